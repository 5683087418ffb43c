"""The hostile actors' paced loop (swarmnode.fault.hostile.speak.paced): observations run in a
task of their own, so a step that outlasts the window (a flood's message on a loaded box) still
leaves them; the window's end cuts that step, and a cancelled actor looks once more."""

from __future__ import annotations

import asyncio

import pytest
from swarmnode.fault.hostile.speak import paced

from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


async def _forever(cut: list[bool]) -> None:
    try:
        await asyncio.Event().wait()  # a message whose peers never answer
    finally:
        cut.append(True)


async def test_a_step_past_the_window_is_observed_and_cut_at_its_end() -> None:
    cut: list[bool] = []
    looks: list[bool] = []  # each look: whether the step had been cut by then

    async def observe() -> None:
        looks.append(bool(cut))

    await asyncio.wait_for(paced(1.0, 1.0, lambda i: _forever(cut), 0.05, observe), 20)
    assert cut == [True]
    assert looks[0] is False  # seen while the step still ran
    assert looks[-1] is True  # and once more after the window


async def test_a_cancelled_run_looks_once_more() -> None:
    cut: list[bool] = []
    started: list[int] = []
    looks = 0

    async def step(i: int) -> None:
        started.append(i)
        await _forever(cut)

    async def observe() -> None:
        nonlocal looks
        looks += 1

    task = asyncio.create_task(paced(1.0, 60.0, step, 60.0, observe))
    await eventually(lambda: started, 20, "the first step")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cut == [True] and looks == 1


async def test_steps_keep_to_the_rate_and_never_overlap() -> None:
    steps: list[int] = []
    running = 0
    overlapped = False

    async def step(i: int) -> None:
        nonlocal running, overlapped
        steps.append(i)
        running += 1
        overlapped |= running > 1
        if i == 0:
            await asyncio.sleep(0.1)  # a late step: the next ones wait for it
        running -= 1

    async def observe() -> None:
        pass

    await asyncio.wait_for(paced(50.0, 0.3, step, 1.0, observe), 20)
    assert not overlapped and steps == list(range(len(steps)))
    assert 1 <= len(steps) <= 16  # 50 a second for 0.3 s


async def test_an_observer_that_fails_fails_the_run() -> None:
    async def step(i: int) -> None:
        pass

    async def observe() -> None:
        raise RuntimeError("an observer bug")

    with pytest.raises(RuntimeError, match="observer bug"):
        await asyncio.wait_for(paced(10.0, 0.3, step, 0.01, observe), 20)
