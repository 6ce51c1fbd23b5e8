"""The server introduces itself (_server/pages.py): ``GET /`` names the model and the routes and gives
examples with the URL the client used; ``GET /docs`` is Swagger UI from the package, with nothing
loaded from another host; the log prints one block at start. The browser side (the page renders,
no request leaves the server) is typescript/test/docs.test.ts in Chromium."""

from __future__ import annotations

import html
import re
import subprocess
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from densewire._server.pages import DOCS_DIR, _routes, display_url
from densewire.server import ServerConfig, create_app
from server_support import ServerProcess


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:48", "--served-model-name", "tiny-model", "--no-demo-tables",
                       "--table", "t=demo:rows=5", "--table-compression", "off") as s:
        yield s


class _Refs(HTMLParser):
    """What a page loads (script src, stylesheet href, img src, ...) and links to (a href)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        elif tag in ("script", "img", "iframe", "source") and a.get("src"):
            self.loads.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.loads.append(a["href"])


def _refs(text: str) -> _Refs:
    p = _Refs()
    p.feed(text)
    return p


def test_home_names_the_model_its_dimensions_and_every_route(server) -> None:
    r = httpx.get(server.url + "/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    text = r.text
    assert "tiny-model" in text and "48 dimensions" in text
    for path in ("/v1/embeddings", "/v1/models", "/v1/tables", "/v1/tables/{name}", "/health", "/metrics",
                 "/openapi.json", "/docs", "/demo/"):
        assert f"<code>{path}</code>" in text or f'<a href="{path}">{path}</a>' in text, path
    links = set(_refs(text).links)
    assert {"/docs", "/demo/", "/metrics", "/openapi.json"} <= links
    for link in links:  # every link answers
        assert httpx.get(server.url + link).status_code == 200, link


def test_home_examples_use_the_url_the_client_used_and_run(server) -> None:
    host = f"localhost:{server.port}"
    text = httpx.get(f"http://{host}/").text
    curl = html.unescape(re.search(r'<pre id="curl">(.*?)</pre>', text, re.S).group(1))
    assert f"http://{host}/v1/embeddings" in curl
    out = subprocess.run(["bash", "-o", "pipefail", "-ec", curl], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"object":"list"' in out.stdout.replace(" ", "") and "tiny-model" in out.stdout
    sdk = html.unescape(re.search(r'<pre id="sdk">(.*?)</pre>', text, re.S).group(1))
    assert f'base_url="http://{host}/v1"' in sdk
    scope: dict = {}
    exec(compile(sdk.replace("print(", "result = ("), "the SDK example of GET /", "exec"), scope)
    assert scope["result"] == 48


def test_home_escapes_the_host_header(server) -> None:
    r = httpx.get(server.url + "/", headers={"Host": "x<script>alert(1)</script>"})
    assert r.status_code == 200
    assert "<script>" not in r.text  # written escaped, or not at all (an invalid Host is not reflected)


def test_docs_is_swagger_ui_over_openapi_json_from_the_package(server) -> None:
    r = httpx.get(server.url + "/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    loads = _refs(r.text).loads
    assert "/docs/swagger-ui-bundle.js" in loads and "/docs/swagger-ui.css" in loads
    init = httpx.get(server.url + "/docs/init.js").text
    assert '"/openapi.json"' in init and "validatorUrl: null" in init
    for ref in loads:
        if ref.startswith("data:"):
            continue
        url = urljoin(server.url + "/docs", ref)
        assert urlsplit(url).netloc == urlsplit(server.url).netloc, f"/docs loads {ref} from another host"
        asset = httpx.get(url)
        assert asset.status_code == 200 and len(asset.content) > 0, ref


def test_docs_files_load_nothing_from_another_host() -> None:
    """The page, its initializer and its stylesheet name no http(s) URL that a browser would load:
    no script, stylesheet, font or image from a CDN (the Swagger UI bundle itself is checked in
    Chromium, where every request the page makes is recorded)."""
    page = (DOCS_DIR / "index.html").read_text()
    assert not re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", page)
    assert not re.findall(r"https?://", (DOCS_DIR / "init.js").read_text())
    css = (DOCS_DIR / "swagger-ui.css").read_text()
    urls = re.findall(r"url\(\s*[\"']?([^\"')]+)", css) + re.findall(r"@import\s+[\"']?([^\"';]+)", css)
    assert urls, "the stylesheet's url() references were not found"
    assert [u for u in urls if not u.startswith("data:")] == []
    assert "Apache License" in (DOCS_DIR / "LICENSE").read_text()  # Swagger UI's, shipped with it


def test_start_log_prints_one_block_with_url_model_engine_routes_and_demo(server) -> None:
    log = server.log_text()
    start = log.index("densewire serve is ready at ")
    block = log[start:].split("\nINFO", 1)[0]
    assert f"ready at http://127.0.0.1:{server.port}/" in block
    assert "model    tiny-model (48 dimensions" in block
    assert "engine   HashBackend" in block
    assert f"demo     http://127.0.0.1:{server.port}/demo/   (tables: t)" in block
    for path in ("/v1/embeddings", "/v1/tables/{name}", "/docs", "/metrics", "/openapi.json"):
        assert re.search(rf"^\s+(GET|POST)\s+{re.escape(path)}\s", block, re.M), path
    assert log.count("densewire serve is ready at ") == 1


def test_display_url_reaches_a_wildcard_bind_through_loopback() -> None:
    assert display_url(ServerConfig(host="0.0.0.0", port=9000)) == "http://127.0.0.1:9000"
    assert display_url(ServerConfig(host="::", port=80)) == "http://[::1]:80"
    assert display_url(ServerConfig(host="fd00::1", port=80)) == "http://[fd00::1]:80"
    assert display_url(ServerConfig(host="10.1.2.3", port=80)) == "http://10.1.2.3:80"


def test_every_route_of_the_app_is_described() -> None:
    # a route without a line in _ABOUT shows up on / and in the start-up block with no description
    app = create_app(ServerConfig(model="hash:8", demo_tables=False))
    undescribed = [path for _m, path, what in _routes(app.routes) if not what]
    assert undescribed == []
