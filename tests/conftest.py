"""Suite-wide fixtures and markers.

`gpu` tests need cupy and a CUDA device; they are skipped cleanly where either is missing, so the
CPU path is always what CI checks.

`slow` marks every test that starts a process (`make test-fast` leaves them out). The mark is
enforced, not remembered: a test without it that starts a subprocess fails and says so.

`flood` marks a test that saturates the box on purpose (an attacker flooding a swarm, measured
against its control) and whose bars assume it is the only one doing so: two such runs side by
side on 2 cores starved each other's attackers and honest peers (a drag insider sent 562 pushes
against the 600 that show its attack was on; a sybil flood's honest round rate fell to 0.27x its
control's, the bar 0.40x). Under `make test` they take turns (`_one_flood_at_a_time`), and the
collection order spaces their files apart so that the turns are rarely waited for.
"""

from __future__ import annotations

import asyncio
import fcntl
import multiprocessing.process
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline anywhere: a property test checks what holds, not how fast (speed
# lives in scripts/bench); on a loaded box one example of a fast test took 353 ms against
# hypothesis' default 200 ms and failed a run.
settings.register_profile("swarmnode", deadline=None)
settings.load_profile("swarmnode")


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, no device: all mean "no GPU here"
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The files that start processes first (stable: each keeps its tests' order). `make test`
    # hands whole files to two workers in this order (`--no-loadscope-reorder`); xdist's own
    # order, by tests per file, left the few-test process files, a minute each, to the end.
    items.sort(key=lambda item: "slow" not in item.keywords)
    items[:] = _floods_spaced(items)
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs cupy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _floods_spaced(items: list[pytest.Item], gap: int = 2) -> list[pytest.Item]:
    """The same items, whole files kept together and in order, but each file of `flood` tests
    followed by `gap` other files before the next: a worker takes its next file while two
    tests of its current one are left, so adjacent flood files would start side by side."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(str(item.path), []).append(item)
    floods = [f for f in files.values() if any("flood" in i.keywords for i in f)]
    others = [f for f in files.values() if not any("flood" in i.keywords for i in f)]
    out: list[pytest.Item] = []
    while floods:
        out += floods.pop(0)
        for _ in range(gap if floods else 0):
            if others:
                out += others.pop(0)
    for f in others:
        out += f
    return out


@pytest.fixture(autouse=True)
def _one_flood_at_a_time(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """A `flood` test holds the suite's flood lock while it runs (an xdist worker's; a single
    process has no one to share with). Turns alternate: a worker that finds another's ticket
    waiting lets it go first, so one file's three floods cannot starve the other's past its
    timeout. The wait is bounded; past it the test runs anyway, as it did before the lock."""
    worker = getattr(request.config, "workerinput", {}).get("workerid")
    if request.node.get_closest_marker("flood") is None or worker is None:
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # shared by the workers
    mine = root / f"flood-waiting-{worker}"
    deadline = time.monotonic() + 90.0  # past one flood test (~50 s)
    while _others_waiting(root, mine) and time.monotonic() < deadline:
        time.sleep(0.1)  # polls a condition, with a deadline: another worker's turn
    with open(root / "flood.lock", "a") as lock:
        mine.touch()
        while time.monotonic() < deadline:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.1)
        mine.unlink()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _others_waiting(root: Path, mine: Path) -> bool:
    return any(p != mine for p in root.glob("flood-waiting-*"))


@pytest.fixture(scope="session", autouse=True)
def _font_cache_before_the_process_guard() -> None:
    """matplotlib builds its font list on first use, running `fc-list` once per machine: on a
    fresh machine that would happen inside whichever fast test plots first, and trip the guard
    below. Build it here, before any test (a no-op where it is cached or matplotlib is absent)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.font_manager  # loading it builds (or reads) the list
    except ImportError:
        pass


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("slow") is not None:
        yield
        return

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts a process: mark it @pytest.mark.slow "
            "(make test-fast leaves those out)"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    yield
