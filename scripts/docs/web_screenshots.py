#!/usr/bin/env python
"""Screenshots of the swarm page during a chaos scenario: a kill, then a join (docs/img/).

    .venv/bin/python scripts/docs/web_screenshots.py                 # writes docs/img/web-*.png
    .venv/bin/python scripts/docs/web_screenshots.py --out /tmp/shots --keep-report runs/shots

Runs the demo's swarm (node/cli/cmd_demo.py: four peers on 127.0.0.1 learning the signal task)
through the chaos runner with two events, SIGKILL of c at t=12 s and the first start of d at
t=22 s, while headless Chromium (Debian's `chromium` and `chromium-driver`, driven by Selenium)
shows a's page. It saves the page once c is dead on it (with the event line), and once d has been
alive on it for 8 s (its line in the chart). Each PNG is cut to the page's height and reduced
to a 256-colour palette (Pillow, which matplotlib installs), so it stays small in the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swarmnode.fault.chaos.runner import ChaosRunner
from swarmnode.fault.chaos.scenario import parse_scenario_text
from swarmnode.node.cli.cmd_demo import DEMO_TOML

EVENTS = """
[[event]]
at = 12
action = "kill"
peer = "c"
label = "kill c"

[[event]]
at = 22
action = "join"
peer = "d"
label = "d joins"
"""
DURATION = 40
WIDTH, HEIGHT = 1280, 1300
READ_PAGE = """
return {
  rows: [...document.querySelectorAll('#members tbody tr')].map(r => [r.dataset.peer, r.dataset.state]),
  names: [...document.querySelectorAll('#members tbody tr .name')].map(e => e.textContent),
  events: [...document.querySelectorAll('#events li')].map(li => li.dataset.kind),
  height: document.body.scrollHeight,
};
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="docs/img", help="where the PNGs go")
    p.add_argument("--keep-report", metavar="DIR", help="keep the chaos report here")
    return p.parse_args()


def scenario() -> Any:
    """The demo's swarm, its join event replaced by a kill and a later join."""
    base = DEMO_TOML[: DEMO_TOML.index("[[event]]")] + EVENTS
    text = base.replace('name = "demo"', 'name = "page-shots"').replace(
        "duration = 40", f"duration = {DURATION}"
    )
    sc = parse_scenario_text(text, source="web_screenshots", default_name="page-shots")
    return dataclasses.replace(sc, assertions=())


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        sys.exit("needs Debian's chromium and chromium-driver (apt-get install ...)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                f"--window-size={WIDTH},{HEIGHT}"):  # fmt: skip
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service(driver))


def save(driver: Any, path: Path) -> None:
    """The page down to its last element, as a 256-colour PNG."""
    from PIL import Image

    height = min(HEIGHT, int(driver.execute_script(READ_PAGE)["height"]) + 8)
    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    image = image.crop((0, 0, image.width, min(image.height, height)))
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"saved {path} ({path.stat().st_size // 1024} KB)", flush=True)


def shoot(addr: str, ids: Callable[[], dict[str, str]], out: Path, stop: threading.Event) -> None:
    """`ids()`: the peers' ids by name, as far as they are known (d's once it starts)."""
    driver = browser()
    try:
        driver.get(f"http://{addr}/")

        def until(cond: Any, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not stop.is_set() and time.monotonic() < deadline:
                if cond(driver.execute_script(READ_PAGE)):
                    return
                time.sleep(0.2)
            raise SystemExit("the page never showed what the shot waits for")

        def state(page: dict[str, Any], name: str) -> str | None:
            return dict(page["rows"]).get(ids().get(name, "?"))

        until(lambda page: state(page, "c") == "dead" and "dead" in page["events"], 40)
        time.sleep(1.5)  # a frame more: the graph without c's edges
        save(driver, out / "web-kill.png")
        until(lambda page: "d" in page["names"] and state(page, "d") == "alive", 30)
        time.sleep(8)
        save(driver, out / "web-join.png")
    finally:
        driver.quit()


async def run(out: Path, report_dir: Path) -> None:
    runner = ChaosRunner(scenario(), report_dir)
    task = asyncio.create_task(runner.run())
    while not (runner.peers["a"].addr and runner.peers["c"].peer_id):
        if task.done():
            task.result()
            return
        await asyncio.sleep(0.1)
    stop = threading.Event()

    def ids() -> dict[str, str]:
        return {n: p.peer_id for n, p in list(runner.peers.items()) if p.peer_id}

    shots = asyncio.to_thread(shoot, runner.peers["a"].addr or "", ids, out, stop)
    try:
        await shots
    finally:
        stop.set()
        await task


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="web-shots-") as tmp:
        report = Path(args.keep_report) if args.keep_report else Path(tmp) / "report"
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run(out, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
