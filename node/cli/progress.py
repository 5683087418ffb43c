"""What a training run prints: a progress line per evaluation, a final summary, a JSON file.

An evaluation runs every `--eval-every` steps; its line is printed as it comes where the output
is not a terminal (a log or a pipe: every evaluation, as asked). On a terminal a line is
printed at most every `PROGRESS_EVERY_S` (the newest evaluation then; the first and the last
always): a small model on `--steps 0` evaluates 50 times a second, 966 lines in 18 s (issue
34), which no one reads and which scrolls away the lines that matter.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from swarmnode.node.train import ConfigError, WorkerMetrics


def _num(x: float, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def format_progress(m: WorkerMetrics, max_steps: int | None = None) -> str:
    """`step  300/1500  loss 0.1234  test_loss 0.0987  test_acc 96.94%  81234 samples/s  t 1.2s`."""
    width = len(str(max_steps)) if max_steps else 6
    total = f"/{max_steps}" if max_steps else ""
    acc = _num(m.test_acc * 100 if not math.isnan(m.test_acc) else m.test_acc, ".2f")
    return (
        f"step {m.step:>{width}}{total}  loss {_num(m.loss, '.4f')}  "
        f"test_loss {_num(m.test_loss, '.4f')}  test_acc {acc}%  "
        f"{_num(m.samples_per_s, ',.0f')} samples/s  t {m.elapsed_s:.1f}s"
    )


_SAY_LOCK = threading.Lock()


def say(line: str, out: TextIO | None = None) -> None:
    """Print one whole line, flushed. The training thread prints progress while the event loop
    prints its own lines: `print` writes the text and the newline separately, so two threads
    could splice their lines together."""
    stream = out or sys.stdout
    with _SAY_LOCK:
        stream.write(line + "\n")
        stream.flush()


PROGRESS_EVERY_S = 3.0  # on a terminal, at most one progress line this often


class ProgressPrinter:
    """An `on_eval` callback for `TrainingWorker` that prints evaluation lines: every one where
    the output is no terminal, at most one per `every_s` on a terminal (see the module doc).
    `tty`: whether the output is a terminal (default: ask the stream)."""

    def __init__(
        self,
        max_steps: int | None = None,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_steps = max_steps
        self.stream = stream
        self.tty = _isatty(stream or sys.stdout) if tty is None else tty
        self.every_s = every_s
        self.clock = clock
        self._last: float | None = None  # when the last line was printed
        self.skipped = 0  # evaluations not printed (a terminal's rate limit)

    def __call__(self, m: WorkerMetrics) -> None:
        now = self.clock()
        last = self.max_steps is not None and m.step >= self.max_steps
        due = self._last is None or now - self._last >= self.every_s
        if self.tty and not (due or last):
            self.skipped += 1
            return
        self._last = now
        say(format_progress(m, self.max_steps), self.stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or a fake stream
        return False


def format_summary(summary: dict[str, Any]) -> str:
    acc = summary.get("test_accuracy")
    acc_s = "-" if acc is None or math.isnan(acc) else f"{acc * 100:.2f}%"
    trained = summary.get("steps_this_run", summary["steps"])
    joined = summary.get("joined_at_step")
    steps = f"{summary['steps']} steps"
    if joined is not None:  # a joiner's counter starts at the swarm's, not at 0
        steps += f" ({trained} trained here, joined at step {joined})"
    return (
        f"done: {steps}, test_acc {acc_s} (at step {summary.get('eval_step', summary['steps'])}), "
        f"test_loss {_num(summary.get('test_loss', float('nan')), '.4f')}, "
        f"{_num(summary.get('samples_per_s', float('nan')), ',.0f')} samples/s on "
        f"{summary['device']}, wall {summary['wall_s']:.1f}s{_utilization(summary)}"
    )


def _utilization(summary: dict[str, Any]) -> str:
    """', compute 62% busy (waited 12.3s for exchange rounds)' when the peer waited at all."""
    util, waited = summary.get("utilization"), summary.get("waited_s")
    if not isinstance(util, float) or not isinstance(waited, float) or waited <= 0:
        return ""
    return f", compute {100 * util:.0f}% busy (waited {waited:.1f}s for exchange rounds)"


def write_summary_json(path: str | Path, summary: dict[str, Any]) -> None:
    """Write the summary atomically (a reader polling for the file never sees half of it)."""
    p = Path(path)
    text = json.dumps(_json_safe(summary), indent=2, sort_keys=True) + "\n"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".summary-", dir=p.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except OSError as exc:
        raise ConfigError(
            f"cannot write --summary-json {str(p)!r}: {exc.strerror or exc}"
        ) from None


def _json_safe(obj: Any) -> Any:
    # JSON has no NaN: a run with no test split reports null rather than an invalid file.
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj
