"""Suite-wide fixtures and markers.

`gpu` tests need cupy and a CUDA device; they are skipped cleanly where either is missing, so the
CPU path is always what CI checks.

`slow` marks every test that starts a process (`make test-fast` leaves them out). The mark is
enforced, not remembered: a test without it that starts a subprocess fails and says so.
"""

from __future__ import annotations

import asyncio
import multiprocessing.process
import subprocess
from collections.abc import Iterator

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
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs cupy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
