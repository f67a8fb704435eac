"""The page at / for a browser, checked in a real headless browser (Debian's Chromium, driven by
Selenium through /usr/bin/chromedriver), and the JSON Status API clients get there instead.

Without Chromium these tests are skipped, unless ``CACHEPROXY_REQUIRE_BROWSER`` is set (CI, where
``make browser`` installs it): then its absence is a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.sim import SimServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile, closed after the test."""
    yield from _chromium(tmp_path)


@pytest.fixture
def offline_browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """The same, for which no host resolves but 127.0.0.1: a machine without internet."""
    yield from _chromium(tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1")


def _chromium(tmp_path: Path, *flags: str) -> Iterator[webdriver.Chrome]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.environ.get("CACHEPROXY_REQUIRE_BROWSER"):
            pytest.fail(
                f"CACHEPROXY_REQUIRE_BROWSER is set but {CHROMIUM} or {CHROMEDRIVER} is missing"
            )
        pytest.skip("Chromium is not installed (`make browser` installs Debian's)")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, *flags, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


async def test_json_clients_get_a_status_at_the_root(read_only_daemon: Daemon) -> None:
    for accept in ("application/json", "*/*", ""):
        async with httpx.AsyncClient(base_url=read_only_daemon.url) as proxy:
            response = await proxy.get("/", headers={"Accept": accept} if accept else {})
        assert response.status_code == 404
        body = response.json()
        assert (body["kind"], body["reason"]) == ("Status", "NotFound")
        assert "a browser finds a page about the cache at /" in body["message"]


async def test_a_browser_asking_for_html_gets_the_page(proxy: httpx.AsyncClient) -> None:
    response = await proxy.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["vary"] == "Accept"
    assert "<title>cacheproxy</title>" in response.text


def _page(driver: webdriver.Chrome, url: str) -> dict[str, Any]:
    """What a person sees on the page at ``url``: the title, readiness, the table, the links."""
    driver.get(url)
    rows = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#resources tbody tr"):
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        rows[cells[0]] = cells
    header = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#resources thead th")]
    links = {a.text: a.get_attribute("href") for a in driver.find_elements(By.TAG_NAME, "a")}
    return {
        "title": driver.title,
        "ready": driver.find_element(By.ID, "ready").text,
        "header": header,
        "rows": rows,
        "links": links,
        "text": driver.find_element(By.TAG_NAME, "body").text,
    }


def _follow(driver: webdriver.Chrome, link_text: str) -> str:
    driver.find_element(By.LINK_TEXT, link_text).click()
    return str(driver.find_element(By.TAG_NAME, "body").text)


@pytest.mark.browser
async def test_the_page_shows_each_resource_in_a_real_browser(
    daemon: Daemon,
    demo_server: SimServer,
    proxy: httpx.AsyncClient,
    browser: webdriver.Chrome,
) -> None:
    status = (await proxy.get("/status")).json()
    page = await asyncio.to_thread(_page, browser, daemon.url + "/")
    assert page["title"] == "cacheproxy"
    assert page["ready"] == "yes"
    assert demo_server.url in page["text"]
    assert page["header"][:3] == ["Resource", "Synced", "Objects"]
    assert set(page["rows"]) == set(status["resources"])
    for name, res in status["resources"].items():
        cells = page["rows"][name]
        assert cells[1] == "yes"
        assert cells[2] == str(res["objects"])
        assert cells[7] == str(res["watchers"])
    assert "spec.nodeName" in page["rows"]["pods"][9]
    base = daemon.url
    assert page["links"] == page["links"] | {
        "/status (JSON)": f"{base}/status",
        "/metrics (Prometheus)": f"{base}/metrics",
        "/cacheproxy/docs (API)": f"{base}/cacheproxy/docs",
    }
    followed = await asyncio.to_thread(_follow, browser, "/status (JSON)")
    assert json.loads(followed)["kind"] == "CacheStatus"


@pytest.mark.browser
async def test_the_page_counts_a_watcher_in_a_real_browser(
    daemon: Daemon, proxy: httpx.AsyncClient, browser: webdriver.Chrome
) -> None:
    async with proxy.stream("GET", "/api/v1/configmaps", params={"watch": "1"}) as watch:
        assert watch.status_code == 200
        page = await asyncio.to_thread(_page, browser, daemon.url + "/")
    assert page["rows"]["configmaps"][7] == "1"


def _api_docs(driver: webdriver.Chrome, url: str) -> tuple[str, list[str]]:
    """The title and the operations' paths Swagger UI rendered at ``url``."""
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"))
    title = driver.find_element(By.CSS_SELECTOR, ".info .title").text
    paths = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")]
    return title, paths


@pytest.mark.browser
async def test_the_own_apis_docs_render_in_a_browser_without_internet(
    daemon: Daemon, offline_browser: webdriver.Chrome
) -> None:
    title, paths = await asyncio.to_thread(
        _api_docs, offline_browser, daemon.url + "/cacheproxy/docs"
    )
    assert title.startswith("cacheproxy")
    assert "/cacheproxy/v1/status" in {p.replace("\u200b", "") for p in paths}
