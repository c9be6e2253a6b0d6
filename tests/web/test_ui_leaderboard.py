"""The leaderboard page (web/js/pages/leaderboard.js) in Chromium against the seeded site: it
shows exactly the rows, the summary and the facets GET /v1/leaderboard returns for the same
query; its filters, its per-task / every-entry switch and its sortable headers query the API
again and keep their state in the URL (reload and back included); its links lead to the task and
the episode inside the app."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.support.ui import Select
from sitekit import SUITE_A, SUITE_B, Site
from webkit import Page, assert_ms, assert_percent, assert_speedup, reward_text, text_or_none


def shown_rows(page: Page) -> list[dict[str, str]]:
    """The table's rows as {column: text}, with task_href and episode_href."""
    return page.rows("table.leaderboard")


def keys(rows: list[dict[str, Any]], api: bool = False) -> list[tuple[str, str, str, str]]:
    """What tells the rows apart: rank, task, policy, model."""
    if api:
        return [(str(r["rank"]), r["task_name"], r["policy"], text_or_none(r["model"])) for r in rows]
    return [(r["rank"], r["task"], r["policy"], r["model"]) for r in rows]


def wait_rows(page: Page, site: Site, **query: str) -> list[dict[str, Any]]:
    """Waits until the table holds the API's rows for query; checks every cell; returns them."""
    want = site.get("/v1/leaderboard", **query)["rows"]
    assert want, f"the seeded site has no entry for {query}"

    def shown() -> bool:  # the answer to the last request (aria-busy while one is out), and the right rows
        busy = page.d.execute_script("return document.querySelector('.results[aria-busy]') !== null")
        return not busy and keys(shown_rows(page)) == keys(want, api=True)

    page.wait(shown, f"the rows of {query}")
    for got, r in zip(shown_rows(page), want):
        assert got["suite"] == r["suite"] and got["device"] == r["device"], (got, r)
        assert got["reward"] == reward_text(r["reward"]), (got, r)
        assert_speedup(got["eager"], r["speedup_vs_eager"])
        assert_speedup(got["compile"], r["speedup_vs_compile"])
        assert_ms(got["ms"], r["candidate_ms"])
        assert got["task_href"].endswith(f"/tasks/{r['task_id']}")
        assert got["episode_href"].endswith(f"/episodes/{r['episode_id']}")
    return want


def query_of(page: Page) -> str:
    return page.d.execute_script("return location.search")


def test_the_leaderboard_shows_the_api_ranking_summary_and_facets(site: Site, page: Page) -> None:
    site.wait_seeded()
    data = site.get("/v1/leaderboard")
    page.open("/")
    rows = wait_rows(page, site)
    assert page.d.title == "Leaderboard · kforge"
    assert page.find('header nav a[aria-current="page"]').text == "Leaderboard"
    # the seeds: two tasks in two suites, found by two policies
    assert sorted(r["task_name"] for r in rows) == ["gelu", "silu_residual"]
    assert data["facets"]["suites"] == sorted([SUITE_A, SUITE_B])
    assert data["facets"]["policies"] == ["expert", "openai"]
    assert data["facets"]["models"] == ["fakellm-1", "fakellm-2"]
    # the summary box is the API's summary
    s = data["summary"]
    stat = {e.get_attribute("data-stat"): page.find(".stat-value", e).text for e in page.all(".stat")}
    assert stat["entries"] == str(s["entries"]) and stat["tasks"] == str(s["tasks"]) == "2"
    assert_speedup(stat["geomean_speedup_vs_eager"], s["geomean_speedup_vs_eager"])
    assert_speedup(stat["geomean_speedup_vs_compile"], s["geomean_speedup_vs_compile"])
    assert_percent(stat["share_faster_than_eager"], s["share_faster_than_eager"])
    assert_percent(stat["share_faster_than_compile"], s["share_faster_than_compile"])
    # each filter offers "any" and the API's facets
    for name, facet in (("device", "devices"), ("policy", "policies"), ("model", "models"),
                        ("suite", "suites"), ("backend", "backends")):  # fmt: skip
        options = [o.get_attribute("value") for o in Select(page.find(f"#filter-{name}")).options]
        assert options == ["", *data["facets"][facet]], (name, options)
    # the speedups are drawn as bars: right of the middle when faster than eager, left when slower
    for tr, r in zip(page.all("table.leaderboard tbody tr"), rows):
        bar = page.find("td.col-eager .bar", tr)
        assert ("bar-up" in bar.get_attribute("class")) == (r["speedup_vs_eager"] >= 1)
    page.shot("leaderboard")


def test_filters_the_switch_and_sorting_query_the_api_and_live_in_the_url(site: Site, page: Page) -> None:
    site.wait_seeded()
    page.open("/leaderboard")
    wait_rows(page, site)

    Select(page.find("#filter-policy")).select_by_value("expert")
    wait_rows(page, site, policy="expert")
    assert query_of(page) == "?policy=expert"

    # no expert entry in the second suite: the empty state, and the way back
    Select(page.wait_for("#filter-suite")).select_by_value(SUITE_B)
    page.wait_text(".results .empty", "No entries match these filters.")
    assert query_of(page) == f"?policy=expert&suite={SUITE_B}"
    page.shot("leaderboard-empty")
    Select(page.find("#filter-suite")).select_by_value("")
    wait_rows(page, site, policy="expert")

    # every entry: gelu has one per policy
    page.click('button[data-per="entry"]')
    wait_rows(page, site, policy="expert", per="entry")
    Select(page.find("#filter-policy")).select_by_value("")
    entries = wait_rows(page, site, per="entry")
    assert len(entries) == 3 and [r["task_name"] for r in entries].count("gelu") == 2
    assert page.find('button[data-per="entry"]').get_attribute("aria-pressed") == "true"
    model = Select(page.find("#filter-model"))
    model.select_by_value("fakellm-2")
    assert [r["task_name"] for r in wait_rows(page, site, per="entry", model="fakellm-2")] == [
        "silu_residual"
    ]
    Select(page.find("#filter-model")).select_by_value("")
    wait_rows(page, site, per="entry")

    # sorting: a header sets sort; the same header again flips the order
    page.click('th button[data-sort="task"]')
    wait_rows(page, site, per="entry", sort="task", order="asc")
    assert page.find('th[aria-sort="ascending"]').text.startswith("Task")
    page.click('th button[data-sort="task"]')
    wait_rows(page, site, per="entry", sort="task", order="desc")
    page.click('th button[data-sort="reward"]')
    wait_rows(page, site, per="entry", sort="reward", order="desc")
    page.click('th button[data-sort="recent"]')
    wait_rows(page, site, per="entry", sort="recent", order="desc")
    assert query_of(page) == "?per=entry&sort=recent"
    page.shot("leaderboard-entries")

    # a reload keeps it all; back goes to the previous query
    page.mark()
    page.d.refresh()
    wait_rows(page, site, per="entry", sort="recent", order="desc")
    assert not page.marked() and query_of(page) == "?per=entry&sort=recent"
    page.d.back()
    page.wait(lambda: query_of(page) == "?per=entry&sort=reward", "the previous query")
    wait_rows(page, site, per="entry", sort="reward", order="desc")


def test_links_lead_to_the_task_and_the_episode_inside_the_app(site: Site, page: Page) -> None:
    site.wait_seeded()
    gelu = site.tasks["gelu"]
    page.open("/")
    wait_rows(page, site)
    page.mark()
    page.click(f'td.col-task a[href="/tasks/{gelu["id"]}"]')
    page.wait_text("h1", "gelu")
    assert page.path == f"/tasks/{gelu['id']}" and page.d.title == "gelu · kforge"
    first = site.get("/v1/leaderboard", task_id=gelu["id"], per="entry")["rows"][0]
    page.click(f'table.kernels a[href="/episodes/{first["episode_id"]}"]')
    page.wait_text("h1", "Episode of gelu")
    assert page.path == f"/episodes/{first['episode_id']}"
    assert page.marked(), "in-app links must not load the page again"
    page.d.back()
    page.wait_text("h1", "gelu")
    assert page.path == f"/tasks/{gelu['id']}"
    page.click('header nav a[href="/"]')
    wait_rows(page, site)
    assert page.marked()
