"""The submit page (web/js/pages/submit.js) in Chromium: a module uploaded from a .py file, a
policy with its settings, limits and the API key start an optimization through POST /v1/optimize
and land on the job's page, which follows the job (here: cancelled with its button); a bad key
and bad modules are answered with the API's error, the blamed field marked."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from selenium.webdriver.support.ui import Select
from servicekit import example_task
from sitekit import Site
from webkit import Page

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def fill_in(page: Page, field: str, value: str) -> None:
    el = page.find(f'[data-field="{field}"]')
    el.clear()
    el.send_keys(value)


def paste(page: Page, source: str) -> None:
    """Puts source into the module's text area as a paste would (send_keys would type it)."""
    el = page.find('[data-field="task.source"]')
    page.d.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", el, source
    )


def error_shown(page: Page) -> str:
    return page.wait_for(".form-errors .error-box", "the API's error").text


def test_the_form_starts_an_optimization_and_lands_on_its_job_page(
    site: Site, page: Page, tmp_path: Path
) -> None:
    module = tmp_path / "my_gelu.py"
    module.write_text(f"# submitted from the browser {uuid.uuid4()}\n" + example_task("gelu"))
    page.open("/submit")
    page.wait_text("h1", "Submit a module")
    assert page.d.title == "Submit a module · kforge"
    page.find("#f-file").send_keys(str(module))  # read by FileReader into the text area
    page.wait(lambda: "class Model" in page.find("#f-task-source").get_attribute("value"), "the file's text")
    assert page.find('[data-field="task.name"]').get_attribute("value") == "my_gelu"
    assert page.find("#f-task-source").get_attribute("value") == module.read_text()
    fill_in(page, "task.suite", "web-submit")
    assert Select(page.find("#f-backend")).first_selected_option.get_attribute("value") == "cuda"
    page.click('input[name="policy"][value="openai"]')
    fill_in(page, "policy.base_url", "http://127.0.0.1:9/v1")
    fill_in(page, "policy.model", "my-model")
    fill_in(page, "policy.sampling.temperature", "0.2")
    page.click("details.more > summary")
    fill_in(page, "limits.max_turns", "5")
    fill_in(page, "key", site.stack.key)
    page.shot("submit-form")
    page.mark()
    page.click("form.submit-form button[type=submit]")

    page.wait(lambda: re.fullmatch(f"/jobs/{UUID}", page.path), "the job's page")
    assert page.marked(), "the form must not load a page"
    job_id = page.path.rsplit("/", 1)[1]
    job = site.get(f"/v1/jobs/{job_id}")
    assert job["kind"] == "optimize" and job["backend"] == "cuda" and job["status"] == "queued", job
    task = site.get(f"/v1/tasks/{job['task_id']}")
    assert (
        task["name"] == "my_gelu" and task["suite"] == "web-submit" and task["source"] == module.read_text()
    )
    # what the form asked for is the episode's: the policy, its settings, the limits
    ep_id = site.stack.psql(f"SELECT id FROM episodes WHERE job_id = '{job_id}'")
    ep = site.get(f"/v1/episodes/{ep_id}", turns="false")
    assert ep["policy"] == {
        "name": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "my-model",
        "sampling": {"temperature": 0.2},
    }, ep["policy"]
    assert ep["limits"]["max_turns"] == 5 and ep["limits"]["max_wall_s"] == 3600, ep["limits"]
    assert page.d.execute_script("return sessionStorage.getItem('kforge.apiKey')") == site.stack.key
    page.wait_for('.event[data-kind="queued"]')
    page.shot("submit-job-queued")

    # no cuda worker here: it waits; the page's cancel button (with the key of this tab) ends it
    page.click("button.cancel")
    page.wait_text(".job-result .note", "The job was cancelled.")
    assert site.get(f"/v1/jobs/{job_id}")["status"] == "cancelled"
    assert [e.get_attribute("data-kind") for e in page.all(".event")] == ["queued", "cancelled", "done"]
    assert page.find(".status-line").get_attribute("data-status") == "cancelled"


@pytest.mark.console_allows(r"/v1/optimize - .* status of (400|403|422) ")
def test_the_form_shows_the_apis_errors_for_a_bad_key_and_bad_modules(site: Site, page: Page) -> None:
    page.open("/submit")
    page.wait_for("form.submit-form")
    paste(page, f"# {uuid.uuid4()}\n" + example_task("gelu"))
    Select(page.find("#f-backend")).select_by_value("cpu")

    # an unknown key: 403 forbidden, the key field marked
    fill_in(page, "key", "kf_00000000_" + "0" * 40)
    page.click("form.submit-form button[type=submit]")
    text = error_shown(page)
    assert "forbidden (2001)" in text and "HTTP 403" in text, text
    assert page.find("#f-key").get_attribute("aria-invalid") == "true"
    assert page.path == "/submit"
    page.shot("submit-bad-key")

    # an empty module: 400 invalid_field, field task.source
    fill_in(page, "key", site.stack.key)
    paste(page, "")
    page.click("form.submit-form button[type=submit]")
    page.wait(lambda: "invalid_field (1003)" in error_shown(page), "the invalid_field error")
    assert "field: task.source" in error_shown(page)
    assert page.find("#f-task-source").get_attribute("aria-invalid") == "true"
    assert page.find("#f-key").get_attribute("aria-invalid") is None

    # a module its check found unfit (its output does not depend on its input): 422 task_invalid
    site.wait_seeded()
    unfit = site.get(f"/v1/tasks/{site.tasks['zeros']['id']}")
    assert unfit["status"] == "invalid"
    want = site.api.post("/v1/optimize", {"task": {"source": unfit["source"]}, "backend": "cpu"}).json()[
        "error"
    ]
    assert want["name"] == "task_invalid", want
    paste(page, unfit["source"])
    page.click("form.submit-form button[type=submit]")
    page.wait(lambda: "task_invalid (3001)" in error_shown(page), "the task_invalid error")
    text = error_shown(page)
    assert want["message"] in text and "HTTP 422" in text, text
    assert page.find("#f-task-source").get_attribute("aria-invalid") == "true"
    assert page.path == "/submit"
    page.shot("submit-bad-module")
