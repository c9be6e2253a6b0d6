"""The web UI's files (server/static.c, server/ui_routes.c) from a web_dir of the test's own: content
types, the security headers on every file response, caching (no-cache HTML; assets with ETag,
Last-Modified and 304), the single-page routes that serve index.html, the 404 page, path
traversal, HEAD, and the JSON errors that stay under /v1."""

from __future__ import annotations

import http.client
import os
import re
import uuid
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from servicekit import PgCluster, Stack, assert_error

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
INDEX = "<!doctype html><title>kforge</title><script type=module src=/app.js></script>\n"
PAGE_404 = "<!doctype html><title>not found</title><p>No such page.\n"
FILES = {
    "index.html": INDEX,
    "404.html": PAGE_404,
    "app.js": "import './js/x.js';\n",
    "js/x.js": "export const x = 1;\n",
    "css/app.css": "body { margin: 0 }\n",
    "img/logo.svg": "<svg xmlns='http://www.w3.org/2000/svg'/>\n",
    "data/facets.json": "{}\n",
    "fonts/a.woff2": "wOF2",
    ".env": "SECRET=1\n",
}
TYPES = {
    "/app.js": "text/javascript",
    "/js/x.js": "text/javascript",
    "/css/app.css": "text/css",
    "/img/logo.svg": "image/svg+xml",
    "/data/facets.json": "application/json",
    "/fonts/a.woff2": "font/woff2",
}
UI_ROUTES = ["/", "/leaderboard", "/submit", "/tasks/{}", "/episodes/{}", "/jobs/{}"]
SECRET = "do not serve this\n"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web-root")
    (root / "secret.txt").write_text(SECRET)
    web = root / "web"
    for name, text in FILES.items():
        (web / name).parent.mkdir(parents=True, exist_ok=True)
        (web / name).write_text(text)
    return web


@pytest.fixture(scope="module")
def stack(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory, web: Path) -> Iterator[Stack]:
    s = Stack(pg_cluster, tmp_path_factory.mktemp("stack-web"), web_dir=str(web))
    yield s
    s.close()


def get(stack: Stack, path: str, **headers: str) -> requests.Response:
    return stack.api.s.get(stack.api.url + path, headers=headers, timeout=10)


def raw(stack: Stack, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """A request with the path exactly as given (requests would resolve dot segments)."""
    u = urlsplit(stack.api.url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        c.putrequest(method, path, skip_accept_encoding=True)
        c.endheaders()
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def assert_guarded(r: requests.Response) -> None:
    assert r.headers.get("Content-Security-Policy") == CSP, r.headers
    assert r.headers.get("X-Content-Type-Options") == "nosniff", r.headers
    assert r.headers.get("Referrer-Policy") == "same-origin", r.headers
    assert r.headers.get("X-Request-Id"), r.headers


def assert_page(r: requests.Response, status: int, body: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"] == "text/html; charset=utf-8", r.headers
    assert r.headers.get("Cache-Control") == "no-cache", r.headers
    assert r.text == body
    assert_guarded(r)


@pytest.mark.parametrize("path", sorted(TYPES))
def test_asset_types_and_headers(stack: Stack, web: Path, path: str) -> None:
    r = get(stack, path)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].split(";")[0] == TYPES[path], r.headers
    assert r.content == (web / path[1:]).read_bytes()
    assert r.headers.get("Cache-Control") == "public, max-age=300", r.headers
    assert re.fullmatch(r'"[0-9a-f]+-[0-9a-f]+"', r.headers.get("ETag", "")), r.headers
    st = os.stat(web / path[1:])
    assert parsedate_to_datetime(r.headers["Last-Modified"]).timestamp() == int(st.st_mtime)
    assert_guarded(r)


def test_etag_gives_304(stack: Stack, web: Path) -> None:
    first = get(stack, "/css/app.css")
    etag = first.headers["ETag"]
    for inm in (etag, "W/" + etag, f'"other", {etag}', "*"):
        r = get(stack, "/css/app.css", **{"If-None-Match": inm})
        assert r.status_code == 304, (inm, r.status_code)
        assert r.content == b"", "a 304 has no body"
        assert r.headers.get("ETag") == etag and r.headers.get("Cache-Control") == "public, max-age=300"
        assert_guarded(r)
    r = get(stack, "/css/app.css", **{"If-None-Match": '"0-0"'})
    assert r.status_code == 200 and r.content == first.content

    # a changed file has a new ETag: the old one no longer matches
    (web / "css" / "app.css").write_text("body { margin: 1px }\n")
    r = get(stack, "/css/app.css", **{"If-None-Match": etag})
    assert r.status_code == 200 and r.text == "body { margin: 1px }\n"
    assert r.headers["ETag"] != etag


def test_html_is_no_cache(stack: Stack) -> None:
    assert_page(get(stack, "/index.html"), 200, INDEX)
    r = get(stack, "/index.html", **{"If-None-Match": "*"})
    assert r.status_code == 200, "HTML is not answered 304"


@pytest.mark.parametrize("route", UI_ROUTES)
def test_ui_routes_serve_index(stack: Stack, route: str) -> None:
    path = route.format(uuid.uuid4())
    assert_page(get(stack, path), 200, INDEX)
    assert_page(get(stack, path + "?sort=compile&per=entry"), 200, INDEX)
    assert_page(get(stack, route.format(str(uuid.uuid4()).upper())), 200, INDEX)


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/nope.js",
        "/css/missing.css",
        "/css",
        "/css/",
        "/tasks",
        "/tasks/",
        "/tasks/not-a-uuid",
        "/tasks/8b3f61d2-0c4e-4a97-b5e8-2f19d7c0a6b3/more",
        "/tasks/e47a0c95-3d21-4b6f-8a0e-91c5f2d7b364x",
        "/runs/1a6d9e3c-72f4-4e05-b8c1-5f03a9e2d7b8",
        "/leaderboard/",
        "/submit/x",
        "/.env",
        "/app.js/",
        "/v2/tasks",
    ],
)
def test_unknown_paths_get_the_404_page(stack: Stack, path: str) -> None:
    assert_page(get(stack, path), 404, PAGE_404)


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/css/../../secret.txt",
        "/css/%2e%2e/%2e%2e/secret.txt",
        "//secret.txt",
    ],
)
def test_path_traversal_refused(stack: Stack, path: str) -> None:
    status, headers, body = raw(stack, "GET", path)
    assert status in (400, 404), (path, status)
    assert SECRET.encode() not in body


def test_head_has_no_body(stack: Stack, web: Path) -> None:
    for path, status in (("/app.js", 200), ("/leaderboard", 200), ("/nope", 404)):
        code, headers, body = raw(stack, "HEAD", path)
        assert code == status, (path, code)
        assert body == b"", path
        assert headers.get("content-security-policy") == CSP, (path, headers)
    code, headers, _ = raw(stack, "HEAD", "/app.js")
    assert int(headers["content-length"]) == (web / "app.js").stat().st_size
    assert headers.get("etag")


def test_v1_keeps_json_errors(stack: Stack) -> None:
    assert_error(get(stack, "/v1/nothing"), "not_found")
    assert_error(get(stack, "/v1"), "not_found")
    assert_error(get(stack, "/v1/tasks/not-a-uuid"), "invalid_id")
    assert_error(get(stack, "/v1/leaderboard?per=row"), "invalid_query")


def test_other_methods_are_refused(stack: Stack) -> None:
    r = stack.api.post("/leaderboard", {})
    assert_error(r, "method_not_allowed")
    assert {m.strip() for m in r.headers["Allow"].split(",")} == {"GET", "HEAD"}


def test_openapi_document(stack: Stack) -> None:
    r = get(stack, "/openapi.yaml")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/yaml"
    assert r.text.startswith("openapi: 3.1")
    assert_guarded(r)


def test_no_404_page_gives_json(stack: Stack, tmp_path: Path) -> None:
    """A web_dir without 404.html: unknown paths get the JSON not_found error as before."""
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "index.html").write_text(INDEX)
    server = stack.start_server(web_dir=str(bare))
    try:
        r = requests.get(server.url + "/nope", timeout=10)
        assert_error(r, "not_found")
        r = requests.get(server.url + f"/jobs/{uuid.uuid4()}", timeout=10)
        assert r.status_code == 200 and r.text == INDEX
    finally:
        server.stop()
