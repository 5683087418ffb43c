"""The progress lines of a training run: every evaluation into a log, a few a minute on a
terminal (issue 34, item 8: `--steps 0` printed 966 lines in 18 s)."""

from __future__ import annotations

import io
import itertools

import pytest
from swarmnode.node.cli.progress import PROGRESS_EVERY_S, ProgressPrinter
from swarmnode.node.train.metrics import WorkerMetrics

pytestmark = pytest.mark.timeout(10)


def metrics(step: int) -> WorkerMetrics:
    return WorkerMetrics(step, step * 32, 0, 0.5, 0.4, 0.9, step, 1e5, "cpu", True, step / 1e4)


def run(printer: ProgressPrinter, clock: list[float], steps: range, dt: float) -> list[int]:
    """Evaluations at `steps`, `dt` seconds apart on the fake clock; the steps printed."""
    out = printer.stream
    assert isinstance(out, io.StringIO)
    start = clock[0]
    for i, step in enumerate(steps):
        clock[0] = start + i * dt  # not a running sum: no rounding drift
        printer(metrics(step))
    return [int(line.split()[1].split("/")[0]) for line in out.getvalue().splitlines()]


def test_on_a_terminal_an_unbounded_run_prints_a_line_every_few_seconds() -> None:
    clock = [0.0]
    printer = ProgressPrinter(None, io.StringIO(), tty=True, clock=lambda: clock[0])
    # 18 s of evaluations 50 times a second, as the digits MLP on --steps 0
    printed = run(printer, clock, range(100, 90_100, 100), 0.02)
    assert len(printed) == 18 / PROGRESS_EVERY_S  # was 900
    assert printed[0] == 100  # the first evaluation at once
    assert all(b - a == 100 * PROGRESS_EVERY_S / 0.02 for a, b in itertools.pairwise(printed))
    assert printer.skipped == 900 - len(printed)


def test_on_a_terminal_the_last_evaluation_of_a_bounded_run_is_printed() -> None:
    clock = [0.0]
    printer = ProgressPrinter(1500, io.StringIO(), tty=True, clock=lambda: clock[0])
    assert run(printer, clock, range(100, 1600, 100), 0.01) == [100, 1500]


def test_into_a_log_every_evaluation_is_printed_as_eval_every_says() -> None:
    clock = [0.0]
    printer = ProgressPrinter(None, io.StringIO(), tty=False, clock=lambda: clock[0])
    assert run(printer, clock, range(100, 1100, 100), 0.02) == list(range(100, 1100, 100))


def test_a_slow_run_prints_every_evaluation_on_a_terminal_too() -> None:
    clock = [0.0]
    printer = ProgressPrinter(None, io.StringIO(), tty=True, clock=lambda: clock[0])
    assert run(printer, clock, range(100, 600, 100), PROGRESS_EVERY_S) == [100, 200, 300, 400, 500]


def test_the_stream_says_whether_it_is_a_terminal() -> None:
    assert ProgressPrinter(None, io.StringIO()).tty is False
