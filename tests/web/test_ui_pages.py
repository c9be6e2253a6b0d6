"""The task and episode pages (web/js/pages/task.js, episode.js) in Chromium against the seeded
site, compared with what the API returns for the same objects; and the 404 page."""

from __future__ import annotations

import io
import tarfile
import uuid
from typing import Any

import pytest
import requests
from sitekit import SUITE_A, Site
from webkit import Page, assert_ms, assert_speedup, reward_text, text_or_none


def text_content(page: Page, css: str) -> str:
    """The exact text of an element (Selenium's .text folds white space)."""
    return page.d.execute_script("return arguments[0].textContent", page.find(css))


def kernel_order(names: list[str]) -> list[str]:
    """web/js/kernel.js's tab order: kernel sources first, then Python, each by name."""
    return sorted(names, key=lambda n: (n.endswith(".py"), n))


def test_the_task_page_shows_source_baselines_best_kernels_and_their_files(site: Site, page: Page) -> None:
    site.wait_seeded()
    task_id = site.tasks["gelu"]["id"]
    task = site.get(f"/v1/tasks/{task_id}")
    rows = site.get("/v1/leaderboard", task_id=task_id, per="entry")["rows"]
    assert len(rows) == 2 and {r["policy"] for r in rows} == {"expert", "openai"}
    page.open(f"/tasks/{task_id}")
    page.wait_text("h1", "gelu")
    assert page.d.title == "gelu · kforge"
    got = page.facts("dl.facts")
    assert got["Suite"] == SUITE_A and got["Backend"] == "cpu" and got["Status"] == task["status"] == "ok"

    # the reference module, highlighted as Python
    assert text_content(page, "pre.code[data-lang=python]") == task["source"]
    keywords = page.texts("pre.code[data-lang=python] .tok-kw")
    assert {"import", "class", "def", "return"} <= set(keywords), keywords
    assert page.all("pre.code[data-lang=python] .tok-com") and page.all("pre.code[data-lang=python] .tok-str")

    # baselines per GPU: the evaluation measured one
    assert task["baselines"], task
    shown = page.rows("table.baselines")
    assert [s["device"] for s in shown] == [b["device"] for b in task["baselines"]]
    for got, b in zip(shown, task["baselines"]):
        assert_ms(got["eager_ms"], b["eager_ms"])
        assert_ms(got["compile_ms"], b["compile_ms"])

    # the best kernels by policy, as the API ranks them
    shown = page.rows("table.kernels")
    assert [s["policy"] for s in shown] == [r["policy"] for r in rows]
    for got, r in zip(shown, rows):
        assert got["model"] == text_or_none(r["model"]) and got["device"] == r["device"]
        assert got["reward"] == reward_text(r["reward"])
        assert_speedup(got["eager"], r["speedup_vs_eager"])
        assert_speedup(got["compile"], r["speedup_vs_compile"])

    # the best one's files are shown; "files" on the other switches to its files
    for i, r in enumerate(rows):
        if i:
            page.click(f'table.kernels a[data-candidate="{r["candidate_id"]}"]')
            want = f"/tasks/{task_id}?candidate={r['candidate_id']}"
            page.wait(lambda want=want: page.path == want, "the URL")
        page.wait_for(f'.kernel[data-candidate="{r["candidate_id"]}"]', "the kernel's files")
        cand = site.get(f"/v1/candidates/{r['candidate_id']}")
        names = kernel_order(list(cand["files"]))
        assert page.texts(".kernel .tab") == names
        assert text_content(page, ".file-view pre.code") == cand["files"][names[0]]
        assert page.find(".file-view pre.code").get_attribute("data-lang") == "c"
        assert page.all(".file-view .tok-kw") and page.all(".file-view .tok-type")
        page.click(".kernel .tab[data-file='model_new.py']")
        page.wait(
            lambda: page.find(".file-view pre.code").get_attribute("data-lang") == "python", "model_new.py"
        )
        assert text_content(page, ".file-view pre.code") == cand["files"]["model_new.py"]
        href = page.find(".kernel a[download]").get_attribute("href")
        assert href.endswith(f"/v1/candidates/{r['candidate_id']}/download")
        tar = requests.get(href, timeout=10)
        assert tar.status_code == 200
        with tarfile.open(fileobj=io.BytesIO(tar.content)) as t:
            assert {f"candidate/{n}" for n in names} <= set(t.getnames())
        page.shot(f"task-kernel-{r['policy']}")


def best_points(turns: list[dict[str, Any]]) -> list[float]:
    """web/js/pages/episode.js's bestSoFar: each rise of the best correct speedup over eager."""
    out: list[float] = []
    for t in turns:
        for r in t["rewards"]:
            s = r.get("speedup_vs_eager")
            if r.get("correct") is True and isinstance(s, (int, float)) and (not out or s > out[-1]):
                out.append(s)
    return out


@pytest.mark.parametrize("label", ["expert-gelu", "openai-gelu"])
def test_the_episode_page_shows_the_trajectory_rewards_and_chart(site: Site, page: Page, label: str) -> None:
    site.wait_seeded()
    ep = site.get(f"/v1/episodes/{site.episodes[label]}")
    page.open(f"/episodes/{ep['id']}")
    page.wait(lambda: len(page.all("article.turn")) == len(ep["turns"]) > 0, "every turn")
    assert page.d.title == "Episode · gelu · kforge"
    got = page.facts("dl.episode-facts")
    res = ep["result"]
    assert got["Reward"] == reward_text(res["reward"]) and got["Status"] == ep["status"] == "finished"
    assert got["End"] == ep["end_reason"] and got["Turns"] == str(ep["n_turns"])
    assert got["Task"] == ep["task_name"] == "gelu"
    assert got.get("Why") == ep["end_detail"], (got, ep["end_detail"])  # shown when the job gave one
    assert_speedup(got["vs eager"], res["speedup_vs_eager"])
    assert_speedup(got["vs torch.compile"], res["speedup_vs_compile"])
    assert got["Device"] == res["device"]
    policy = ep["policy"]
    assert got["Policy"] == (
        f"{policy['name']} · {policy['model']}" if policy.get("model") else policy["name"]
    )

    folds = 0
    for art, turn in zip(page.all("article.turn"), ep["turns"]):
        calls = turn["assistant"].get("tool_calls") or []
        assert [c.get_attribute("data-tool") for c in page.all(".call", art)] == [
            c["function"]["name"] for c in calls
        ]
        content = turn["assistant"].get("content") or ""
        if content and len(content) <= 2000 and content.count("\n") < 20:  # not folded
            assert content.split("\n")[0] in page.find(".message", art).text
        rw = page.all("table.rewards tbody tr", art)
        assert len(rw) == len(turn["rewards"])
        for tr, r in zip(rw, turn["rewards"]):
            assert page.find("td.col-tool", tr).text == r["tool"]
            assert page.find("td.col-status", tr).text == r["status"]
            assert page.find("td.col-correct", tr).text == {True: "yes", False: "no"}.get(r["correct"], "—")
            assert_speedup(page.find("td.col-eager", tr).text, r.get("speedup_vs_eager"))
        for m in turn["tool_results"]:
            text = m["content"] if isinstance(m["content"], str) else ""
            folds += len(text.split("\n")) > 14 or len(text) > 1200
    # long tool results are folded, and stay closed
    folded_results = page.all(".result details.fold")
    assert len(folded_results) == folds
    assert all(d.get_attribute("open") is None for d in folded_results)

    # the chart: one dot per rise of the best correct speedup, and the best in its caption
    points = best_points(ep["turns"])
    assert points, ep["turns"]
    assert len(page.all("svg.chart circle.dot")) == len(points)
    assert_speedup(page.find("figcaption").text.split(": ")[1].split(" ")[0], points[-1])
    page.wait_for(f'.kernel[data-candidate="{ep["best_candidate_id"]}"]', "the best kernel")
    page.shot(f"episode-{label}")


@pytest.mark.console_allows(r"/(no/such/page|v1/tasks/[0-9a-f-]{36}) - .* status of 404 ")
def test_unknown_paths_get_the_404_page(site: Site, page: Page) -> None:
    r = requests.get(site.url + "/no/such/page", timeout=10)
    assert r.status_code == 404 and r.headers["Content-Type"].startswith("text/html")
    page.open("/no/such/page")
    page.wait_text("h1", "Page not found")
    assert page.d.title == "Not found · kforge"
    page.shot("404")
    page.click(".not-found a[href='/']")
    page.wait_text("h1", "Leaderboard")
    assert page.path == "/"

    # an app path whose object does not exist: the API's error, readably
    page.open(f"/tasks/{uuid.uuid4()}")
    box = page.wait_for(".error-box")
    assert "task_not_found (3000)" in box.text and "HTTP 404" in box.text
    assert page.d.title == "Not found · kforge"
    page.shot("task-not-found")
