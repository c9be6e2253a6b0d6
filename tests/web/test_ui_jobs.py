"""The job page (web/js/pages/job.js) in Chromium: a job enqueued while no worker runs shows as
queued; once the worker starts, its events arrive over the server-sent event stream and its
result appears, without a reload. A finished evaluation shows its verdict."""

from __future__ import annotations

import pytest
from sitekit import SEED_DEADLINE_S, Site
from webkit import Page, assert_speedup, reward_text


def status_of(page: Page) -> str | None:
    return page.find(".status-line").get_attribute("data-status")


def test_a_job_page_follows_the_worker_live(site: Site, page: Page) -> None:
    job_id = site.queued_job()
    assert site.get(f"/v1/jobs/{job_id}")["status"] == "queued"
    page.open(f"/jobs/{job_id}")
    page.wait_for('.event[data-kind="queued"]', "the queued event")
    page.wait(lambda: status_of(page) == "queued", "the status line to say queued")
    assert page.d.title == "Job optimize · kforge"
    assert page.texts(".job-result .note") == ["The result appears here when the job is done."]
    # the episode is linked while the job waits (GET /v1/jobs gives its id from the start)
    queued = site.get(f"/v1/jobs/{job_id}")
    assert (
        page.find("dl.facts a.episode-link")
        .get_attribute("href")
        .endswith(f"/episodes/{queued['episode_id']}")
    )
    page.shot("job-queued")
    page.mark()

    site.start_workers()
    page.wait_for('.event[data-kind="claimed"]', "the claimed event", timeout=SEED_DEADLINE_S)
    page.wait(lambda: status_of(page) == "running", "the status line to say running")
    page.wait_for('.event[data-kind="turn"]', "a turn event", timeout=SEED_DEADLINE_S)
    page.wait_for(".job-result dl", "the result", timeout=SEED_DEADLINE_S)
    assert page.marked(), "the page was loaded again"

    job = site.get(f"/v1/jobs/{job_id}")
    assert job["status"] == "succeeded", job
    page.wait(lambda: status_of(page) == "succeeded", "the status line to say succeeded")
    assert page.facts("dl.facts")["Attempt"] == str(job["attempt"]) == "1"
    # the page listed the stream's events, in order, each once
    kinds = [e["event"] for e in site.api.events(job_id)]
    shown = [e.get_attribute("data-kind") for e in page.all(".event")]
    assert shown == kinds, (shown, kinds)
    assert kinds[0] == "queued" and kinds[-1] == "done" and "claimed" in kinds
    # the result is the job's
    res = job["result"]
    got = page.facts(".job-result dl")
    assert got["Reward"] == reward_text(res["final_reward"]), (got, res)
    assert_speedup(got["vs eager"], res["speedup_vs_eager"])
    assert_speedup(got["vs torch.compile"], res["speedup_vs_compile"])
    assert got["End"] == res["end_reason"] and got["Turns"] == str(res["n_turns"])
    link = page.find(".job-result a.button")
    assert link.get_attribute("href").endswith(f"/episodes/{res['episode_id']}")
    turns = [e.text for e in page.all('.event[data-kind="turn"]')]
    assert len(turns) == res["n_turns"] and "Turn 1:" in turns[0]
    page.shot("job-done")


@pytest.mark.console_allows(r"/v1/jobs/[0-9a-f-]{36} - .* status of 404 ")
def test_an_evaluation_job_shows_its_verdict(site: Site, page: Page) -> None:
    site.wait_seeded()
    job_id = site.jobs["evaluate-gelu"]
    job = site.get(f"/v1/jobs/{job_id}")
    # an evaluation is its owner's alone: without a key its page finds nothing
    page.open(f"/jobs/{job_id}")
    box = page.wait_for(".error-box", "the not-found error")
    assert "job_not_found (4001)" in box.text, box.text
    page.use_key(site.stack.key)
    page.open(f"/jobs/{job_id}")
    page.wait_for(".job-result dl", "the verdict")
    v = job["result"]
    got = page.facts(".job-result dl")
    assert got["Verdict"] == v["status"] == "ok", got
    assert got["Correct"] == "yes" and got["Reward"] == reward_text(v["reward"])
    assert_speedup(got["vs eager"], v["speedup_vs_eager"])
    assert got["Device"] == job["device"]
    assert page.d.title == "Job evaluate · kforge"
    assert [e.get_attribute("data-kind") for e in page.all(".event")][-1] == "done"
    for phase in ("building", "verifying", "timing"):
        assert page.all(f'.event[data-kind="{phase}"]'), phase
    page.shot("job-evaluation")
