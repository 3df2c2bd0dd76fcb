"""`nnrag serve` over the search fixture library: the JSON API (good and bad requests) against a
real server process, and the pages driven in a real Chromium (Debian's `chromium`, through
Playwright). Screenshots of the three pages go to tests/artifacts/."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from conftest import run_cli

ARTIFACTS = Path(os.environ.get("NNRAG_TEST_ARTIFACTS", Path(__file__).parent / "artifacts"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(search_lib: dict[str, object]) -> Iterator[str]:
    with _serving(Path(str(search_lib["home"]))) as url:
        yield url


@contextlib.contextmanager
def _serving(home: Path) -> Iterator[str]:
    """``nnrag serve`` over ``home`` on a free port: its URL once it answers."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nnrag", "serve", "--home", str(home), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/api/sources", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"nnrag serve did not start: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_api_answers_each_operation(server: str) -> None:
    hits = httpx.get(server + "/api/search", params={"q": "find anti-aliased downsampling", "k": 3}).json()["results"]
    assert hits[0]["name"] == "BlurDownsample" and hits[0]["validated"]
    block = hits[0]["id"]
    spec = httpx.get(f"{server}/api/blocks/{block}/spec").json()
    assert spec["id"] == block and spec["provenance"]["line_start"] > 0 and "code" not in spec
    code = httpx.get(f"{server}/api/blocks/{block}/code").json()
    assert "class BlurDownsample" in code["code"] and code["validated"]
    sources = {s["name"] for s in httpx.get(server + "/api/sources").json()["sources"]}
    assert sources == {"search_repo", "search_mirror"}
    failed = httpx.get(server + "/api/blocks", params={"status": "failed"}).json()["blocks"]
    assert [b["name"] for b in failed] == ["NativeOnly"]
    library = httpx.get(server + "/api/library").json()
    assert library["tried"] == 7 and library["passed"] == 6
    loss = httpx.get(server + "/api/search", params={"q": "segmentation overlap", "category": "loss"}).json()["results"]
    assert [h["name"] for h in loss] == ["DiceLoss"]
    stem = httpx.get(server + "/api/search", params={"q": "stem of stacked hourglass networks", "k": 1}).json()["results"]
    page = httpx.get(f"{server}/block/{stem[0]['id']}").text  # the README's words beside the spec
    assert "The source's README:</span> Stems: The cheapest hourglass stem" in page
    schema = httpx.get(server + "/openapi.json").json()
    assert {"/api/search", "/api/blocks/{block_id}/spec", "/api/blocks/{block_id}/code", "/api/validate",
            "/api/sources"} <= set(schema["paths"])


def test_posted_code_goes_through_the_gate(server: str) -> None:
    good = "import torch.nn as nn\n\n\nclass Twice(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    record = httpx.post(server + "/api/validate", json={"code": good}, timeout=120).json()
    assert record["ok"] and record["class_name"] == "Twice" and record["isolation"]["process"] in ("pidns+own-proc", "pidns", "fork")
    broken = good.replace("x * 2", "x @ None")
    record = httpx.post(server + "/api/validate", json={"code": broken}, timeout=120).json()
    assert not record["ok"] and record["stage"] == "forward"


def test_bad_requests_get_json_errors(server: str) -> None:
    unknown = httpx.get(server + "/api/blocks/no:such.Block/spec")
    assert unknown.status_code == 404 and "no:such.Block" in unknown.json()["error"]
    assert httpx.get(server + "/api/blocks/no:such.Block/code").status_code == 404
    for query in ("", "   "):
        empty = httpx.get(server + "/api/search", params={"q": query})
        assert empty.status_code == 422 and "q" in empty.json()["error"]
    assert httpx.get(server + "/api/search", params={"q": "x", "state": "maybe"}).status_code == 422
    assert httpx.get(server + "/api/search", params={"q": "x", "k": 0}).status_code == 422
    from nnrag.tools.functions import MAX_CODE_CHARS

    too_long = httpx.post(server + "/api/validate", json={"code": "#" * (MAX_CODE_CHARS + 1)}, timeout=60)
    assert too_long.status_code == 413 and "limit" in too_long.json()["error"]
    huge = httpx.post(server + "/api/validate", content=b"{" + b" " * (8 * MAX_CODE_CHARS) + b"}",
                      headers={"content-type": "application/json"}, timeout=60)
    assert huge.status_code == 413  # refused before the body is read
    assert httpx.post(server + "/api/validate", content=b"not json", headers={"content-type": "application/json"}).status_code == 422
    text = httpx.post(server + "/api/validate", content=b"import torch", headers={"content-type": "text/plain"})
    assert text.status_code == 422 and text.json()["error"], text.text  # one JSON shape, never a 500
    for path in ("/api/blocks/no:such.Block", "/api/nothing-here"):
        missing = httpx.get(server + path)
        assert missing.status_code == 404 and set(missing.json()) == {"error"}, (path, missing.text)

    def chunks() -> Iterator[bytes]:  # no content-length: the limit is found while reading
        for _ in range(60):
            yield b" " * (1 << 20)

    try:
        chunked = httpx.post(server + "/api/validate", content=chunks(), headers={"content-type": "application/json"},
                             timeout=60)
        assert chunked.status_code == 413 and "limit" in chunked.json()["error"], chunked.text
    except (httpx.WriteError, httpx.RemoteProtocolError):
        pass  # refused mid-body: the server stopped reading and closed the connection
    assert httpx.get(server + "/api/sources").status_code == 200


def test_only_requests_for_the_names_it_serves_are_answered(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example", ""):
        refused = httpx.get(server + "/api/sources", headers={"host": host})
        assert refused.status_code == 421 and "answers requests for" in refused.json()["error"], host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST"):
        assert httpx.get(server + "/api/sources", headers={"host": host}).status_code == 200, host


def test_no_request_reads_outside_the_home(server: str) -> None:
    for path in ("/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd", "/static/../../../etc/passwd", "/block/..%2F..%2Fetc%2Fpasswd",
                 "/api/blocks/..%2F..%2Fetc%2Fpasswd/code", "/block/x:..%2F..%2F..%2Fetc%2Fpasswd/download"):
        response = httpx.get(server + path)
        assert response.status_code == 404 and "root:" not in response.text, path


def _chromium() -> str:
    found = os.environ.get("NNRAG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "the browser test needs Debian's chromium (apt install chromium; .ci/run installs it)"
    return found


def test_a_user_searches_opens_a_block_filters_and_reads_a_failure(server: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(server + "/")
        page.fill("#q", "find anti-aliased downsampling")  # typed: results come as live updates
        first = page.locator("#results li").first
        expect(first.locator("a.name")).to_have_text("BlurDownsample")
        expect(first.locator(".mark")).to_have_text("✓")
        page.screenshot(path=str(ARTIFACTS / "serve-search.png"))

        first.locator("a.name").click()
        expect(page.locator("#block-name")).to_contain_text("BlurDownsample")
        expect(page.locator("#spec")).to_contain_text("Provenance")
        expect(page.locator("#code .source-code")).to_contain_text("class BlurDownsample")
        expect(page.locator("#download")).to_have_attribute("download", "BlurDownsample.py")
        page.screenshot(path=str(ARTIFACTS / "serve-block.png"), full_page=True)

        page.goto(server + "/")
        page.fill("#q", "segmentation overlap")
        expect(page.locator("#status")).to_have_text(re.compile(r"\d+ results"))
        assert page.locator("#results li").count() > 1  # before the filter, blocks of other categories too
        page.select_option("#category", "loss")
        expect(page.locator("#results li")).to_have_count(1)
        expect(page.locator("#results li a.name")).to_have_text("DiceLoss")
        assert "category=loss" in page.url

        page.select_option("#category", "")
        page.fill("#q", "rotated box pooling")
        page.select_option("#state", "failed")
        failed = page.locator("#results li").first
        expect(failed.locator("a.name")).to_have_text("NativeOnly")
        expect(failed.locator(".mark")).to_have_text("✗")
        failed.locator("a.name").click()
        expect(page.locator("#failure")).to_be_visible()
        code = page.locator("#failure-code").inner_text()
        assert code and code == httpx.get(server + "/api/blocks", params={"status": "failed"}).json()["blocks"][0]["code"]

        page.goto(server + "/library")
        expect(page.locator("#figures")).to_contain_text("6 of 7 blocks pass")
        page.select_option("#filter select[name=code]", code)
        page.click("#filter button")
        expect(page.locator("#failures")).to_contain_text("NativeOnly")
        page.screenshot(path=str(ARTIFACTS / "serve-library.png"), full_page=True)
        browser.close()
    for name in ("serve-search.png", "serve-block.png", "serve-library.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000


def test_blocks_stored_unjudged_are_shown_as_not_validated_yet(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_cli("build", str(Path(__file__).parent / "fixtures" / "copies_repo"), "--home", str(home), "--no-validate",
            "--no-harvest")
    with _serving(home) as url:
        assert len(httpx.get(url + "/api/blocks", params={"status": "not-run"}).json()["blocks"]) == 8
        hits = httpx.get(url + "/api/search", params={"q": "gate tokens with a sigmoid", "state": "all"}).json()["results"]
        assert hits and {h["status"] for h in hits} == {"not-run"}
        block = httpx.get(f"{url}/block/{hits[0]['id']}").text
        assert "not validated yet" in block and 'id="failure"' not in block
        library = " ".join(httpx.get(url + "/library").text.split())
        assert "8 more are not validated yet" in library and "No failed block matches." in library
