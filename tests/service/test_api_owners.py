"""Keys have owners and scopes: another owner's key (and no key) gets 404 for every private
object (jobs, their events and cancel, evaluations with their candidates, episodes, tasks, the
export), an admin key sees everything; the keys API is the admin's; quotas answer 429 with the
registry's error; the leaderboard shows only what owners published, sources only when published
with them. No worker runs in this module: queued jobs and episodes written by SQL suffice."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Any

import pytest
from episodekit import add_candidate, add_episode, call, lit, turn
from servicekit import ROOT, Api, Stack, assert_error, cli, evaluation_body, failing_files, psql, unique_task

KEY = re.compile(r"kf_[0-9a-f]{8}_[0-9a-f]{40}")
KEY_FIELDS = {"id", "prefix", "name", "owner", "scopes", "created_at", "revoked_at"}


def new_key(stack: Stack, owner: str, scopes: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"owner": owner, **extra}
    if scopes is not None:
        body["scopes"] = scopes
    r = stack.api.post("/v1/keys", body)
    assert r.status_code == 201, r.text
    got = r.json()
    assert set(got) == {"key", "secret"} and KEY.fullmatch(got["secret"]), got
    return got


@pytest.fixture(scope="module")
def owners(stack: Stack) -> dict[str, Api]:
    """alice (submit), alice-read (alice's read-only key), bob (submit), admin (the stack's)."""
    tag = uuid.uuid4().hex[:6]
    keys = {
        "alice": new_key(stack, f"alice-{tag}")["secret"],
        "alice-read": new_key(stack, f"alice-{tag}", ["read"], name="alice's reader")["secret"],
        "bob": new_key(stack, f"bob-{tag}")["secret"],
    }
    apis = {who: Api(stack.server.url, key) for who, key in keys.items()}
    apis["admin"] = stack.api
    return apis


@pytest.fixture(scope="module")
def alices(stack: Stack, owners: dict[str, Api]) -> dict[str, str]:
    """alice's objects, all queued: a task, an evaluation (its job and candidate), an optimize
    job and its episode, and a finished episode of hers (SQL) with its candidate."""
    alice = owners["alice"]
    source = unique_task("alice")
    r = alice.post("/v1/evaluations", evaluation_body(source, failing_files()))
    assert r.status_code == 202, r.text
    ev = r.json()["evaluation"]
    r = alice.post("/v1/optimize", {"task_id": ev["task_id"], "backend": "cpu"})
    assert r.status_code == 202, r.text
    opt = r.json()
    alice_owner = owner_of(stack, alice.key)
    cand = add_candidate(stack, ev["task_id"], {"kernels/k.cu": "// alice's kernel\n"})
    done = add_episode(stack, ev["task_id"], owner=alice_owner, best_candidate_id=cand)
    return {
        "task": ev["task_id"],
        "evaluation": ev["id"],
        "eval_job": ev["job_id"],
        "candidate": ev["candidate_id"],
        "opt_job": opt["job"]["id"],
        "episode": opt["episode"]["id"],
        "done_episode": done,
        "done_candidate": cand,
        "source": source,
    }


def owner_of(stack: Stack, key: str) -> str:
    return stack.psql(f"SELECT owner FROM api_keys WHERE prefix = '{key.split('_')[1]}'")


def private_paths(ids: dict[str, str]) -> list[tuple[str, str]]:
    """Every GET of alice's objects, with the error a stranger gets."""
    return [
        (f"/v1/tasks/{ids['task']}", "task_not_found"),
        (f"/v1/evaluations/{ids['evaluation']}", "evaluation_not_found"),
        (f"/v1/jobs/{ids['eval_job']}", "job_not_found"),
        (f"/v1/jobs/{ids['opt_job']}", "job_not_found"),
        (f"/v1/jobs/{ids['opt_job']}/events", "job_not_found"),
        (f"/v1/episodes/{ids['episode']}", "episode_not_found"),
        (f"/v1/episodes/{ids['done_episode']}", "episode_not_found"),
        (f"/v1/candidates/{ids['candidate']}", "candidate_not_found"),
        (f"/v1/candidates/{ids['candidate']}/download", "candidate_not_found"),
        (f"/v1/candidates/{ids['done_candidate']}", "candidate_not_found"),
    ]


def test_another_owner_gets_404_for_everything(
    stack: Stack, owners: dict[str, Api], alices: dict[str, str]
) -> None:
    bob = owners["bob"]
    for path, name in private_paths(alices):
        err = assert_error(bob.get(path), name)
        assert alices["source"] not in json.dumps(err)
        assert_error(bob.get(path, key=None), name)  # and without a key
        # a made-up id of the same kind answers the same: nothing tells the two apart
        fake = re.sub(r"[0-9a-f-]{36}", str(uuid.uuid4()), path, count=1)
        assert_error(bob.get(fake), name)
    # not listed either
    listed = bob.get("/v1/tasks?limit=200").json()["tasks"]
    assert alices["task"] not in {t["id"] for t in listed}
    # nor usable by id in a write
    r = bob.post("/v1/optimize", {"task_id": alices["task"], "backend": "cpu"})
    assert_error(r, "task_not_found")
    body = evaluation_body("", failing_files())
    del body["task"]
    assert_error(bob.post("/v1/evaluations", {**body, "task_id": alices["task"]}), "task_not_found")


def test_another_owner_cannot_cancel(stack: Stack, owners: dict[str, Api], alices: dict[str, str]) -> None:
    job = alices["eval_job"]
    assert_error(owners["bob"].post(f"/v1/jobs/{job}/cancel"), "job_not_found")
    assert_error(owners["bob"].post(f"/v1/jobs/{uuid.uuid4()}/cancel"), "job_not_found")
    assert_error(owners["alice-read"].post(f"/v1/jobs/{job}/cancel"), "forbidden")  # read scope
    assert stack.psql(f"SELECT status, cancel_requested FROM jobs WHERE id = '{job}'") == "queued|f"


def test_the_owner_and_admin_see_everything(
    stack: Stack, owners: dict[str, Api], alices: dict[str, str]
) -> None:
    for who in ("alice", "alice-read", "admin"):
        for path, _ in private_paths(alices):
            if path.endswith("/events"):
                continue  # a stream open until the job ends: below, through the cancel
            r = owners[who].get(path)
            assert r.status_code == 200, (who, path, r.status_code, r.text)
    task = owners["alice-read"].get(f"/v1/tasks/{alices['task']}").json()
    assert task["source"] == alices["source"] and "check" in task
    ev = owners["alice"].get(f"/v1/evaluations/{alices['evaluation']}").json()
    assert ev["candidate"]["files"] == failing_files()
    # the owner cancels; her stream then ends with the cancellation
    r = owners["alice"].post(f"/v1/jobs/{alices['opt_job']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    kinds = [e["event"] for e in owners["alice"].events(alices["opt_job"], deadline_s=30)]
    assert kinds[0] == "queued" and kinds[-1] == "done" and "cancelled" in kinds, kinds


def test_export_is_the_owners(stack: Stack, owners: dict[str, Api], alices: dict[str, str]) -> None:
    bobs_task = owners["bob"].post("/v1/tasks", {"source": unique_task("bob"), "backend": "cpu"})
    assert bobs_task.status_code == 201, bobs_task.text
    bob_owner = owner_of(stack, owners["bob"].key)
    bobs = add_episode(stack, bobs_task.json()["task"]["id"], owner=bob_owner)

    def exported(api: Api, key: Any = True) -> set[str]:
        r = api.get("/v1/export?limit=1000", key=key, timeout=30)
        assert r.status_code == 200, r.text
        lines = [json.loads(x) for x in r.text.splitlines() if x]
        return {x["episode_id"] for x in lines if "episode_id" in x}

    assert exported(owners["alice"]) >= {alices["done_episode"]} and bobs not in exported(owners["alice"])
    assert exported(owners["bob"]) == {bobs}
    assert {alices["done_episode"], bobs} <= exported(owners["admin"])
    assert_error(owners["bob"].get("/v1/export", key=None), "unauthorized")


def test_task_dedup_across_owners(stack: Stack, owners: dict[str, Api]) -> None:
    """The same source from two owners is one task that both own; its check only they see; a
    third sees it only through a published episode, without check, and its source only when
    published with sources."""
    source = unique_task("shared")
    a = owners["alice"].post("/v1/tasks", {"source": source, "backend": "cpu"})
    b = owners["bob"].post("/v1/tasks", {"source": source, "backend": "cpu"})
    assert (a.status_code, b.status_code) == (201, 200), (a.text, b.text)
    tid = a.json()["task"]["id"]
    assert b.json()["task"]["id"] == tid
    stack.psql(
        f"UPDATE tasks SET status = 'ok', check_result = {lit({'fit': True, 'reasons': ['secret words']})}"
        f" WHERE id = '{tid}'"
    )
    for who in ("alice", "bob"):
        got = owners[who].get(f"/v1/tasks/{tid}").json()
        assert got["check"]["reasons"] == ["secret words"] and got["source"] == source, who
    carol = Api(stack.server.url, new_key(stack, f"carol-{uuid.uuid4().hex[:6]}")["secret"])
    assert_error(carol.get(f"/v1/tasks/{tid}"), "task_not_found")

    ep = add_episode(stack, tid, owner=owner_of(stack, owners["alice"].key), publish="results")
    for api, key in ((carol, True), (carol, None)):
        got = api.get(f"/v1/tasks/{tid}", key=key).json()
        assert got["id"] == tid and got["check"] is None and got["check_job_id"] is None, got
        assert got["source"] is None and "secret words" not in json.dumps(got)
    listed = carol.get("/v1/tasks?limit=200").json()["tasks"]
    assert [t["check"] for t in listed if t["id"] == tid] == [None]
    stack.psql(f"UPDATE episodes SET publish = 'sources' WHERE id = '{ep}'")
    got = carol.get(f"/v1/tasks/{tid}", key=None).json()
    assert got["source"] == source and got["check"] is None


def test_leaderboard_shows_what_owners_published(stack: Stack, owners: dict[str, Api]) -> None:
    suite = "owners-" + uuid.uuid4().hex[:8]
    alice = owner_of(stack, owners["alice"].key)
    eps: dict[str, tuple[str, str]] = {}
    for publish in ("none", "results", "sources"):
        r = owners["alice"].post(
            "/v1/tasks", {"source": unique_task(publish), "suite": suite, "backend": "cpu"}
        )
        assert r.status_code == 201, r.text
        tid = r.json()["task"]["id"]
        cand = add_candidate(stack, tid, {"kernels/k.cu": f"// {publish}\n"})
        turns = [turn([call("write_file", {"path": "kernels/k.cu", "content": f"// {publish}"})])]
        ep = add_episode(
            stack,
            tid,
            turns,
            owner=alice,
            publish=publish,
            best_candidate_id=cand,
            policy_config={"model": "m", "base_url": "http://10.1.2.3:8000/v1"},
        )
        eps[publish] = (ep, cand)
    for key in (None, owners["bob"].key, stack.key):
        board = stack.api.get(f"/v1/leaderboard?suite={suite}&per=entry", key=key).json()
        shown = {row["episode_id"] for row in board["rows"]}
        assert shown == {eps["results"][0], eps["sources"][0]}, (key, board["rows"])
        assert board["summary"]["entries"] == 2
    anon = owners["bob"]
    assert_error(anon.get(f"/v1/episodes/{eps['none'][0]}", key=None), "episode_not_found")
    # results: the episode without its turns or endpoint, no kernel
    got = anon.get(f"/v1/episodes/{eps['results'][0]}", key=None).json()
    assert "turns" not in got and got["policy"] == {"name": "expert", "model": "m"}, got
    assert_error(anon.get(f"/v1/candidates/{eps['results'][1]}"), "candidate_not_found")
    assert_error(anon.get(f"/v1/candidates/{eps['results'][1]}/download"), "candidate_not_found")
    # sources: the turns and the kernel too, still no endpoint
    got = anon.get(f"/v1/episodes/{eps['sources'][0]}", key=None).json()
    assert len(got["turns"]) == 1 and "base_url" not in got["policy"], got
    assert anon.get(f"/v1/candidates/{eps['sources'][1]}", key=None).json()["files"] == {
        "kernels/k.cu": "// sources\n"
    }
    # the job of a published episode is public too; its owner sees the endpoint
    job = stack.psql(f"SELECT job_id FROM episodes WHERE id = '{eps['results'][0]}'")
    assert anon.get(f"/v1/jobs/{job}", key=None).status_code == 200
    assert_error(anon.post(f"/v1/jobs/{job}/cancel"), "job_not_found")
    mine = owners["alice"].get(f"/v1/episodes/{eps['results'][0]}").json()
    assert mine["policy"]["base_url"] == "http://10.1.2.3:8000/v1" and "turns" in mine


def test_optimize_publish_flag(stack: Stack, owners: dict[str, Api]) -> None:
    body = {"task": {"source": unique_task("publish")}, "backend": "cpu"}
    r = owners["alice"].post("/v1/optimize", {**body, "publish": "sources"})
    assert r.status_code == 202, r.text
    ep = r.json()["episode"]["id"]
    assert stack.psql(f"SELECT publish FROM episodes WHERE id = '{ep}'") == "sources"
    r = owners["alice"].post("/v1/optimize", body)
    ep = r.json()["episode"]["id"]
    assert stack.psql(f"SELECT publish FROM episodes WHERE id = '{ep}'") == "none"
    err = assert_error(
        owners["alice"].post("/v1/optimize", {**body, "publish": "everything"}), "invalid_field"
    )
    assert err["field"] == "publish"


def test_owner_publishes_a_finished_episode_later(stack: Stack, owners: dict[str, Api]) -> None:
    """POST /v1/episodes/{id}/publish: its owner raises and lowers what it publishes of an
    episode that has already ended, and the leaderboard and anonymous reads follow; another
    owner, an anonymous caller and the owner's read-only key change nothing (404, 401, 403);
    a bad level is the registry's 400 and changes nothing either."""
    suite = "publish-" + uuid.uuid4().hex[:8]
    r = owners["alice"].post("/v1/tasks", {"source": unique_task("later"), "suite": suite, "backend": "cpu"})
    assert r.status_code == 201, r.text
    tid = r.json()["task"]["id"]
    cand = add_candidate(stack, tid, {"kernels/k.cu": "// later\n"})
    turns = [turn([call("write_file", {"path": "kernels/k.cu", "content": "// later"})])]
    ep = add_episode(stack, tid, turns, owner=owner_of(stack, owners["alice"].key), best_candidate_id=cand)

    def board(key: str | None = None) -> set[str]:
        rows = stack.api.get(f"/v1/leaderboard?suite={suite}&per=entry", key=key).json()["rows"]
        return {row["episode_id"] for row in rows}

    def level() -> str:
        return stack.psql(f"SELECT publish FROM episodes WHERE id = '{ep}'")

    assert board(None) == set() and level() == "none"
    anon = owners["bob"]
    assert_error(anon.get(f"/v1/episodes/{ep}", key=None), "episode_not_found")
    # nobody but its owner changes it, and none of them learns that it exists
    assert_error(
        owners["bob"].post(f"/v1/episodes/{ep}/publish", {"publish": "sources"}), "episode_not_found"
    )
    assert (
        owners["bob"].post(f"/v1/episodes/{ep}/publish", {"publish": "sources"}, key=None).status_code == 401
    )
    assert owners["alice-read"].post(f"/v1/episodes/{ep}/publish", {"publish": "sources"}).status_code == 403
    missing = str(uuid.uuid4())
    assert_error(
        owners["alice"].post(f"/v1/episodes/{missing}/publish", {"publish": "results"}), "episode_not_found"
    )
    for body, code, field in (
        ({"publish": "everything"}, "invalid_field", "publish"),
        ({"publish": 1}, "invalid_field", "publish"),
        ({}, "missing_field", "publish"),
        ({"publish": "results", "more": True}, "unknown_field", "more"),
    ):
        err = assert_error(owners["alice"].post(f"/v1/episodes/{ep}/publish", body), code)
        assert err["field"] == field, (body, err)
    assert level() == "none" and board(None) == set()
    # results: on the leaderboard, read by anyone without turns or kernels
    r = owners["alice"].post(f"/v1/episodes/{ep}/publish", {"publish": "results"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["id"] == ep and got["publish"] == "results" and "turns" not in got, got
    assert level() == "results" and board(None) == {ep} and board(owners["bob"].key) == {ep}
    assert "turns" not in anon.get(f"/v1/episodes/{ep}", key=None).json()
    assert_error(anon.get(f"/v1/candidates/{cand}", key=None), "candidate_not_found")
    # sources: the turns and the kernel too
    assert (
        owners["alice"].post(f"/v1/episodes/{ep}/publish", {"publish": "sources"}).json()["publish"]
        == "sources"
    )
    assert len(anon.get(f"/v1/episodes/{ep}", key=None).json()["turns"]) == 1
    assert anon.get(f"/v1/candidates/{cand}", key=None).json()["files"] == {"kernels/k.cu": "// later\n"}
    # and back to private: off the leaderboard, 404 to anyone else again (an admin key may too)
    r = owners["admin"].post(f"/v1/episodes/{ep}/publish", {"publish": "none"})
    assert r.status_code == 200 and r.json()["publish"] == "none", r.text
    assert board(None) == set()
    assert_error(anon.get(f"/v1/episodes/{ep}", key=None), "episode_not_found")
    assert_error(anon.get(f"/v1/candidates/{cand}", key=None), "candidate_not_found")
    assert owners["alice"].get(f"/v1/episodes/{ep}").json()["publish"] == "none"


def test_key_admin_api(stack: Stack, owners: dict[str, Api]) -> None:
    owner = "dave-" + uuid.uuid4().hex[:6]
    made = new_key(stack, owner, ["read", "submit"], name="dave's laptop")
    k = made["key"]
    assert set(k) == KEY_FIELDS and k["owner"] == owner and k["scopes"] == ["read", "submit"], k
    assert (
        k["name"] == "dave's laptop"
        and k["revoked_at"] is None
        and made["secret"].split("_")[1] == k["prefix"]
    )
    listed = stack.api.get("/v1/keys", params={"owner": owner})
    assert listed.status_code == 200 and [x["id"] for x in listed.json()["keys"]] == [k["id"]]
    assert made["secret"] not in stack.api.get("/v1/keys").text  # the secret is shown once
    assert k["id"] in {x["id"] for x in stack.api.get("/v1/keys").json()["keys"]}
    # the key works, for its owner
    dave = Api(stack.server.url, made["secret"])
    assert dave.post("/v1/tasks", {"source": unique_task("dave"), "backend": "cpu"}).status_code == 201

    # only admin keys use the keys API
    for api in (owners["bob"], dave, owners["alice-read"]):
        assert_error(api.post("/v1/keys", {"owner": "eve"}), "forbidden")
        assert_error(api.get("/v1/keys"), "forbidden")
        assert_error(api.post(f"/v1/keys/{k['id']}/revoke"), "forbidden")
    assert_error(stack.api.get("/v1/keys", key=None), "unauthorized")
    assert_error(stack.api.post("/v1/keys", {"owner": "eve"}, key=None), "unauthorized")
    assert stack.psql("SELECT count(*) FROM owners WHERE name = 'eve'") == "0"
    # bad bodies
    for body, field in (
        ({"owner": "-bad"}, "owner"),
        ({"owner": "a b"}, "owner"),
        ({}, "owner"),
        ({"owner": "ok", "scopes": ["root"]}, "scopes"),
        ({"owner": "ok", "scopes": []}, "scopes"),
    ):
        r = stack.api.post("/v1/keys", body)
        assert r.status_code == 400 and r.json()["error"]["field"] == field, (body, r.text)

    # revoke: the key is refused from then on, on reads and writes; again is the same answer
    r = stack.api.post(f"/v1/keys/{k['id']}/revoke")
    assert r.status_code == 200 and r.json()["revoked_at"], r.text
    first = r.json()["revoked_at"]
    assert_error(dave.post("/v1/tasks", {"source": unique_task("dave2"), "backend": "cpu"}), "forbidden")
    assert_error(dave.get("/v1/tasks"), "forbidden")
    again = stack.api.post(f"/v1/keys/{k['id']}/revoke")
    assert again.status_code == 200 and again.json()["revoked_at"] == first
    assert_error(stack.api.post(f"/v1/keys/{uuid.uuid4()}/revoke"), "key_not_found")


def test_cli_keys(stack: Stack) -> None:
    owner = "frank-" + uuid.uuid4().hex[:6]
    key = cli(stack.env(), "keys", "create", "--owner", owner, "--scope", "read").strip()
    assert KEY.fullmatch(key)
    listed = cli(stack.env(), "keys", "list", "--owner", owner)
    assert listed.startswith(key.split("_")[1]) and "scopes=read\t" in listed and "active" in listed
    frank = Api(stack.server.url, key)
    assert_error(frank.post("/v1/tasks", {"source": unique_task("frank")}), "forbidden")
    assert frank.get("/v1/tasks").status_code == 200


def test_quotas(stack: Stack) -> None:
    """A server with quotas of 2 active jobs and 100 GPU-seconds a day per owner."""
    server = stack.start_server(quota_active_jobs=2, quota_gpu_s_per_day=100)
    owner = "quota-" + uuid.uuid4().hex[:6]
    api = Api(server.url, new_key(stack, owner)["secret"])
    body = evaluation_body(unique_task("quota"), failing_files())
    first = api.post("/v1/evaluations", body)  # the task's check job and the evaluation's
    assert first.status_code == 202, first.text
    before = stack.counts()
    task = first.json()["evaluation"]["task_id"]
    by_id = {**{k: v for k, v in body.items() if k != "task"}, "task_id": task}
    r = api.post("/v1/evaluations", by_id)
    err = assert_error(r, "job_quota_exceeded")
    assert owner in err["message"] and r.headers.get("Retry-After", "").isdigit(), (err, r.headers)
    assert stack.counts() == before, "a refused write stored something"
    # one ends: room again
    assert api.post(f"/v1/jobs/{first.json()['job']['id']}/cancel").status_code == 200
    again = api.post("/v1/evaluations", by_id)
    assert again.status_code == 202, again.text
    # the owner's own quota (kforge keys quota) goes over the setting
    cli(stack.env(), "keys", "quota", owner, "--active-jobs", "10")
    third = api.post("/v1/optimize", {"task_id": task, "backend": "cpu"})
    assert third.status_code == 202, third.text

    # GPU-seconds: a job of the last 24 h that held the GPU 150 s
    stack.psql(
        "INSERT INTO jobs (id, kind, class, backend, task_id, status, owner, claimed_at, finished_at, result)"
        f" VALUES ('{uuid.uuid4()}', 'evaluate', 'cuda', 'cuda', '{task}', 'succeeded', '{owner}',"
        f" now() - interval '2 hours', now() - interval '1 hour', {lit({'gpu_lock_held_s': 150.0})})"
    )
    r = api.post("/v1/optimize", {"task_id": task, "backend": "cpu"})
    err = assert_error(r, "gpu_quota_exceeded")
    retry = int(r.headers["Retry-After"])
    assert 22 * 3600 < retry <= 23 * 3600 + 60, retry  # when that job leaves the 24 hours
    assert "150" in err["message"], err
    # an admin key has no quota
    assert (
        Api(server.url, stack.key).post("/v1/optimize", {"task_id": task, "backend": "cpu"}).status_code
        == 202
    )
    server.stop()


def test_quota_api(stack: Stack) -> None:
    """GET /v1/quota: a key reads its own owner's quotas and use (an admin key any owner's);
    POST /v1/quota: an admin key sets an owner's own, which the next write obeys, and "default"
    puts the server's setting back. Nobody else reads or sets them, bad bodies change nothing."""
    server = stack.start_server(quota_active_jobs=2, quota_gpu_s_per_day=100)
    owner, other = ("quota-api-" + uuid.uuid4().hex[:6] for _ in range(2))
    api = Api(server.url, new_key(stack, owner)["secret"])
    reader = Api(server.url, new_key(stack, owner, ["read"])["secret"])
    them = Api(server.url, new_key(stack, other)["secret"])
    admin = Api(server.url, stack.key)

    def quota(who: Api = api, **q: str) -> dict[str, Any]:
        r = who.get("/v1/quota" + (f"?owner={q['owner']}" if q else ""))
        assert r.status_code == 200, r.text
        return r.json()

    assert quota() == {
        "owner": owner,
        "active_jobs": {"own": None, "limit": 2, "used": 0},
        "gpu_seconds_per_day": {"own": None, "limit": 100, "used": 0},
    }
    assert quota(reader) == quota() and quota(admin, owner=owner) == quota()
    # nobody else learns whether the owner exists, nor its use
    assert_error(them.get(f"/v1/quota?owner={owner}"), "owner_not_found")
    assert_error(admin.get("/v1/quota?owner=nobody-" + uuid.uuid4().hex[:6]), "owner_not_found")
    assert_error(api.get("/v1/quota?owner=-bad"), "invalid_query")
    assert api.get("/v1/quota", key=None).status_code == 401

    body = evaluation_body(unique_task("quota-api"), failing_files())
    first = api.post("/v1/evaluations", body)  # the task's check job and the evaluation's
    assert first.status_code == 202, first.text
    assert quota()["active_jobs"]["used"] == 2
    by_id = {
        **{k: v for k, v in body.items() if k != "task"},
        "task_id": first.json()["evaluation"]["task_id"],
    }
    assert_error(api.post("/v1/evaluations", by_id), "job_quota_exceeded")

    # only an admin key sets a quota, and bad bodies change nothing
    assert api.post("/v1/quota", {"owner": owner, "active_jobs": 10}).status_code == 403
    for bad, code, field in (
        ({"owner": owner, "active_jobs": -1}, "invalid_field", "active_jobs"),
        ({"owner": owner, "active_jobs": 1.5}, "invalid_field", "active_jobs"),
        ({"owner": owner, "gpu_seconds_per_day": "lots"}, "invalid_field", "gpu_seconds_per_day"),
        ({"owner": owner, "active_jobs": None}, "invalid_field", "active_jobs"),
        ({"active_jobs": 10}, "missing_field", "owner"),
        ({"owner": owner, "jobs": 10}, "unknown_field", "jobs"),
        ({"owner": "-bad", "active_jobs": 10}, "invalid_field", "owner"),
        ({"owner": "nobody-" + uuid.uuid4().hex[:6], "active_jobs": 10}, "owner_not_found", "owner"),
    ):
        err = assert_error(admin.post("/v1/quota", bad), code)
        assert err["field"] == field, (bad, err)
    assert quota()["active_jobs"] == {"own": None, "limit": 2, "used": 2}

    r = admin.post("/v1/quota", {"owner": owner, "active_jobs": 10})
    assert r.status_code == 200, r.text
    assert r.json()["active_jobs"] == {"own": 10, "limit": 10, "used": 2}
    assert r.json()["gpu_seconds_per_day"]["own"] is None  # left out: unchanged
    assert api.post("/v1/evaluations", by_id).status_code == 202
    # GPU-seconds: a job of the last 24 h that held the GPU 150 s, over the setting's 100
    stack.psql(
        "INSERT INTO jobs (id, kind, class, backend, task_id, status, owner, claimed_at, finished_at, result)"
        f" VALUES ('{uuid.uuid4()}', 'evaluate', 'cuda', 'cuda', '{by_id['task_id']}', 'succeeded', '{owner}',"
        f" now() - interval '2 hours', now() - interval '1 hour', {lit({'gpu_lock_held_s': 150.0})})"
    )
    assert quota()["gpu_seconds_per_day"] == {"own": None, "limit": 100, "used": 150}
    assert_error(api.post("/v1/evaluations", by_id), "gpu_quota_exceeded")
    r = admin.post("/v1/quota", {"owner": owner, "gpu_seconds_per_day": 0})  # 0: no limit
    assert r.json()["gpu_seconds_per_day"] == {"own": 0, "limit": 0, "used": 150}
    assert api.post("/v1/evaluations", by_id).status_code == 202
    # "default": the server's settings again
    r = admin.post("/v1/quota", {"owner": owner, "active_jobs": "default", "gpu_seconds_per_day": "default"})
    assert r.status_code == 200, r.text
    assert r.json()["active_jobs"] == {"own": None, "limit": 2, "used": 4}, r.json()
    assert r.json()["gpu_seconds_per_day"]["limit"] == 100
    assert_error(api.post("/v1/evaluations", by_id), "job_quota_exceeded")
    server.stop()


def test_an_older_database_migrates(stack: Stack) -> None:
    """A database of migrations 0001-0003 with keys and a finished episode: 0004 gives each key
    an owner named after it (local's key the admin scope, the others submit), leaves the old
    jobs to admin keys, and keeps the finished episode on the leaderboard, without sources."""
    url = stack.cluster.createdb("kforge_old_" + uuid.uuid4().hex[:8])
    for f in sorted((ROOT / "migrations").glob("000[123]_*.sql")):
        p = subprocess.run(
            ["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(f)], capture_output=True
        )
        assert p.returncode == 0, p.stderr
    task, job, ep = (str(uuid.uuid4()) for _ in range(3))
    psql(
        url,
        "INSERT INTO api_keys (id, prefix, hash, name) VALUES"
        f" ('{uuid.uuid4()}', '0000000a', 'h', 'local'), ('{uuid.uuid4()}', '0000000b', 'h', 'my key!'),"
        f" ('{uuid.uuid4()}', '0000000c', 'h', '');"
        f" INSERT INTO tasks (id, sha256, name, source, backend) VALUES ('{task}', 's', 't', 'x', 'cpu');"
        f" INSERT INTO jobs (id, kind, class, backend, task_id, status) VALUES"
        f" ('{job}', 'optimize', 'cpu', 'cpu', '{task}', 'succeeded');"
        " INSERT INTO episodes (id, job_id, task_id, backend, policy, status) VALUES"
        f" ('{ep}', '{job}', '{task}', 'cpu', 'expert', 'finished')",
    )
    cli({**stack.env(), "KFORGE_DATABASE_URL": url}, "migrate")
    keys = psql(url, "SELECT prefix, owner, array_to_string(scopes, ',') FROM api_keys ORDER BY prefix")
    assert keys.splitlines() == ["0000000a|local|admin", "0000000b|my-key-|submit", "0000000c|default|submit"]
    assert psql(url, "SELECT count(*) FROM owners") == "3"
    assert psql(url, f"SELECT owner IS NULL FROM jobs WHERE id = '{job}'") == "t"
    assert psql(url, f"SELECT publish FROM episodes WHERE id = '{ep}'") == "results"
    assert psql(url, "SELECT max(version) FROM schema_migrations") == "4"


def test_a_burst_of_one_owners_writes_all_succeed(stack: Stack) -> None:
    """An owner's writes check its quota inside their transactions; they take turns (an advisory
    lock per owner), so a burst of them on one task neither ends in 503 contention nor makes
    PostgreSQL abort one of them (under SERIALIZABLE, each would otherwise read the jobs the
    others insert: hundreds of serialization failures in such a burst, retried by the server)."""
    import concurrent.futures

    key = new_key(stack, f"burst-{uuid.uuid4().hex[:6]}")["secret"]
    api = Api(stack.server.url, key)
    task_id = api.post("/v1/tasks", {"source": unique_task("burst"), "backend": "cpu"}).json()["task"]["id"]

    body = evaluation_body("", failing_files())
    del body["task"]
    body["task_id"] = task_id

    def one(i: int) -> int:
        return api.post("/v1/evaluations", body).status_code

    log = stack.cluster.log
    start = log.stat().st_size if log.exists() else 0
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(one, range(96)))
    assert codes.count(202) == len(codes), sorted(set(codes))
    with open(log, "rb") as f:
        f.seek(start)
        aborted = f.read().decode(errors="replace").count("could not serialize access")
    assert aborted == 0, f"{aborted} of the owner's transactions were aborted"
