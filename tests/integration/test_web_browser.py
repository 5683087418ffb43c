"""The swarm page in a real browser: Debian's Chromium, headless, driven by Selenium, against a
real 3-peer swarm of `swarmnode start` processes on 127.0.0.1.

The page loads with no console error, lists the 3 members, its chart gains points while the swarm
trains, and a killed peer turns dead on the page within the failure detector's time (plus a frame
and a busy box's slack), with an event line for it. Skipped, saying why, where Chromium,
chromedriver or selenium is missing (`.ci/run` installs them where it can: apt, root).
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from swarmnode.gossip.membership.config import MembershipConfig

from tests.integration.peers import HOLD, set_slowdown, start_swarm
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.common.exceptions import SessionNotCreatedException
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - the `test` extra installs it
    webdriver = None  # type: ignore[assignment]

if webdriver is None:
    pytest.skip("selenium is not installed (pip install -e '.[test]')", allow_module_level=True)
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "no system Chromium/chromedriver (Debian: apt-get install chromium chromium-driver; "
        ".ci/run does it as root)",
        allow_module_level=True,
    )

# What the failure detector allows before a silent peer is dead (the peers run the defaults),
# then a frame of the page (1 s) and slack for a 2-core box shared with other work.
DETECT_S = MembershipConfig().dead_after
PAGE_SLACK_S = 1.0 + 2.5
# rows and events as the page shows them: read in one script (rows are redrawn every second)
READ_PAGE = """
return {
  rows: [...document.querySelectorAll('#members tbody tr')].map(r => [r.dataset.peer, r.dataset.state]),
  points: Number(document.getElementById('chart').dataset.points || 0),
  span: Number(document.getElementById('chart').dataset.span || -1),
  events: [...document.querySelectorAll('#events li')].map(li => [li.dataset.kind, li.dataset.peer]),
  link: document.getElementById('link').textContent,
};
"""


@pytest.fixture
def browser() -> Iterator[Any]:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    except SessionNotCreatedException as exc:  # installed, but cannot run here (a sandbox)
        pytest.skip(f"Chromium is installed but does not start here: {str(exc).splitlines()[0]}")
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_the_page_follows_a_real_swarm_and_shows_a_killed_peer_dead(tmp_path, browser):
    peers = start_swarm(tmp_path, [[*HOLD, "--steps", "0"]] * 3)
    try:
        set_slowdown(peers, 1, step_s=0.005)  # train, paced: three peers on two shared cores
        browser.get(f"http://{peers[0].addr}/")
        ids = {p.peer_id for p in peers}

        def page() -> dict[str, Any]:
            return browser.execute_script(READ_PAGE)

        def listed() -> dict[str, Any] | None:
            seen = page()
            states = dict(seen["rows"])
            ok = states.keys() == ids and states[peers[0].peer_id] == "self"
            return seen if ok and all(states[p.peer_id] == "alive" for p in peers[1:]) else None

        first = wait_for(listed, 20, "the page to list 3 members, 2 alive besides itself")
        assert first["link"] == "live"
        # a page opened cold: its time axis spans its few points (10 s at least), not years
        drawn = wait_for(lambda: (p := page())["span"] >= 0 and p, 5, "the chart's time axis")
        assert drawn["span"] <= max(10, drawn["points"] + 2), drawn
        wait_for(lambda: page()["points"] >= first["points"] + 3, 20, "the chart to gain points")

        victim = peers[2]
        victim.signal(signal.SIGKILL)
        t0 = time.monotonic()
        wait_for(
            lambda: dict(page()["rows"]).get(victim.peer_id) == "dead",
            DETECT_S + PAGE_SLACK_S + 10,  # the bar is asserted below, with the time it took
            "the killed peer to turn dead on the page",
            every=0.1,
        )
        took = time.monotonic() - t0
        print(f"killed peer dead on the page after {took:.2f} s (detector: {DETECT_S:g} s)")
        assert took <= DETECT_S + PAGE_SLACK_S, f"dead on the page after {took:.1f} s"
        wait_for(
            lambda: ["dead", victim.peer_id] in page()["events"], 5, "an event line for the death"
        )
        events = page()["events"]
        assert len(events) == len({tuple(e) for e in events}), f"an event twice: {events}"
        errors = console_errors(browser)
        assert not errors, errors
    finally:
        for p in peers:
            p.stop()
