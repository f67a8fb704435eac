"""The page at / for a browser, checked in a real headless browser (Debian's Chromium, driven by
Selenium through /usr/bin/chromedriver), and the JSON Status API clients get there instead.

Without Chromium these tests are skipped, unless ``CACHEPROXY_REQUIRE_BROWSER`` is set (CI, where
``make browser`` installs it): then its absence is a failure. The browser tests leave screenshots
of what they saw in ``test-artifacts/`` (``$CACHEPROXY_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
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

from cacheproxy import __version__
from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.daemon.config.model import DaemonConfig, ServerSettings
from cacheproxy.daemon.runtime import Daemon
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimConfig, SimServer, Simulator
from cacheproxy.sim.policy import Policy
from cacheproxy.upstream import TokenSource, UpstreamConfig
from tests.support import until

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
ARTIFACTS = Path(
    os.environ.get("CACHEPROXY_TEST_ARTIFACTS")
    or Path(__file__).resolve().parents[2] / "test-artifacts"
)
WIDTH = 1280
"""The width of a laptop's browser window the page must fit."""


def _screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """The whole page as the browser drew it, in :data:`ARTIFACTS` (for people; the tests
    judge the page by its elements)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, max(800, int(height) + 40))
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(WIDTH, 900)
    return path


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
    driver.set_window_size(WIDTH, 900)
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
    rows, failures = {}, {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#resources tbody tr"):
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        if row.get_attribute("class") == "failure":
            failures[row.get_attribute("id").removeprefix("error-")] = cells[0]
        else:
            rows[cells[0]] = cells
    header = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#resources thead th")]
    links = {a.text: a.get_attribute("href") for a in driver.find_elements(By.TAG_NAME, "a")}
    charts = {
        card.get_attribute("id").removeprefix("chart-"): len(
            card.find_elements(By.CSS_SELECTOR, "svg polyline")
        )
        for card in driver.find_elements(By.CSS_SELECTOR, "#charts .card")
    }
    return {
        "title": driver.title,
        "ready": driver.find_element(By.ID, "ready").text,
        "version": driver.find_element(By.ID, "version").text,
        "uptime": driver.find_element(By.ID, "uptime").text,
        "upstream": driver.find_element(By.ID, "upstream").text,
        "charts": charts,
        # Wider than the window: a horizontal scroll bar (the page must fit 1 280 px).
        "overflow": driver.execute_script(
            "const e = document.documentElement; return e.scrollWidth - e.clientWidth"
        ),
        "header": header,
        "rows": rows,
        "failures": failures,
        "links": links,
        "text": driver.find_element(By.TAG_NAME, "body").text,
    }


def _configmaps_seen(daemon: Daemon) -> bool:
    assert daemon.server is not None
    served = {r.rtype.config_name: r for r in daemon.server.resources.values()}
    return served["configmaps"].store.get("default/dashboard-9") is not None


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
    # A few seconds of history: configmaps written (through the daemon, to the simulator),
    # pods read, a sample every 0.3 s; the charts span them while they are under 15 minutes.
    assert daemon.server is not None
    history = daemon.server.history
    for i in range(10):
        for _ in range(i):
            assert (await proxy.get("/api/v1/pods", params={"limit": "1"})).status_code == 200
        body = {"metadata": {"name": f"dashboard-{i}"}, "data": {"i": str(i)}}
        created = await proxy.post("/api/v1/namespaces/default/configmaps", json=body)
        assert created.status_code == 201, created.text
        await asyncio.sleep(0.3)
        history.sample()
    await until(lambda: len(history.series("configmaps")) > 10 and _configmaps_seen(daemon))
    status = (await proxy.get("/status")).json()
    page = await asyncio.to_thread(_page, browser, daemon.url + "/")
    await asyncio.to_thread(_screenshot, browser, "home-healthy")
    assert page["title"] == "cacheproxy"
    assert page["ready"] == "yes"
    assert page["version"] == __version__
    assert page["uptime"].endswith((" s", " min"))
    version = (await proxy.get("/version")).json()["gitVersion"]
    assert page["upstream"] == f"Upstream: {demo_server.url} · {version} · reachable"
    assert page["header"][:3] == ["Resource", "State", "Objects"]
    assert "Last heard from upstream" in page["header"]
    assert set(page["rows"]) == set(status["resources"])
    for name, res in status["resources"].items():
        cells = page["rows"][name]
        assert cells[1] == "synced"
        assert cells[2] == str(res["objects"])
        assert cells[5] == str(res["watchers"])
    assert float(page["rows"]["pods"][6]) > 0  # requests/s over the last minute
    assert "spec.nodeName" in page["rows"]["pods"][10]
    assert page["charts"] == dict.fromkeys(status["resources"], 4)
    assert float(page["rows"]["configmaps"][4]) > 0  # changes/s
    assert page["overflow"] <= 0
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
    assert page["rows"]["configmaps"][5] == "1"


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
    await asyncio.to_thread(_screenshot, offline_browser, "api-docs-offline")
    assert title.startswith("cacheproxy")
    assert "/cacheproxy/v1/status" in {p.replace("\u200b", "") for p in paths}


def _forbidding_pods() -> Policy:
    return Policy.from_mapping(
        {
            "users": [{"name": "cacheproxy", "token": "daemon-token", "groups": ["daemons"]}],
            "rules": [
                {
                    "subjects": [{"kind": "Group", "name": "daemons"}],
                    "verbs": ["get", "list", "watch"],
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                }
            ],
        }
    )


@pytest.mark.browser
async def test_a_failing_resource_is_shown_with_its_reason_and_fix_in_a_real_browser(
    browser: webdriver.Chrome,
) -> None:
    sim = Simulator(config=SimConfig(policy=_forbidding_pods()))
    async with SimServer(sim) as server:
        config = DaemonConfig(
            resources=(
                ResourceConfig(rtype=builtin("pods")),
                ResourceConfig(rtype=builtin("configmaps")),
                ResourceConfig(rtype=builtin("apps/v1/deployments")),
            ),
            server=ServerSettings(port=0),
        )
        upstream = UpstreamConfig(
            server=server.url, token_source=TokenSource.static("daemon-token")
        )
        async with Daemon(config, upstream, manage_gc=False) as daemon:
            assert daemon.server is not None
            failures = daemon.server.metrics.failures
            await until(
                lambda: (
                    failures.of("pods") is not None
                    and failures.of("apps/v1/deployments") is not None
                ),
                "the pods and the deployments lists fail",
            )
            page = await asyncio.to_thread(_page, browser, daemon.url + "/")
            await asyncio.to_thread(_screenshot, browser, "home-failing")
    assert page["ready"] == "no"
    assert page["rows"]["pods"][1] == "not synced (backing-off)"
    why = page["failures"]["pods"]
    assert why.startswith("list: 403 pods is forbidden"), why
    assert "cacheproxy rbac --config CONFIG | kubectl apply -f -" in why
    assert page["rows"]["configmaps"][1] == "synced"
    # Both failing resources are forbidden; beside the upstream: the newest of the two.
    assert re.search(r"Last error: (pods|apps/v1/deployments) list: 403 ", page["text"])
    assert page["rows"]["apps/v1/deployments"][1].startswith("not synced")
    assert set(page["failures"]) == {"pods", "apps/v1/deployments"}
    assert page["overflow"] <= 0  # the longest message wraps within the window
