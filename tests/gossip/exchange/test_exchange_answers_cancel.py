"""A round cancelled while it waits for its partners (a peer closing mid-round) ends the
requests it started: none outlives the round, the store and the HTTP pool behind it."""

from __future__ import annotations

import asyncio

import pytest
from swarmnode.gossip.exchange.exchanger import _answers

from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


async def test_a_cancelled_wait_for_answers_cancels_every_request_it_waited_on() -> None:
    started = asyncio.Event()

    async def partner() -> None:
        started.set()
        await asyncio.sleep(60)  # a partner that never answers in the test's time

    tasks = [asyncio.ensure_future(partner()) for _ in range(3)]
    waiting = asyncio.ensure_future(_answers(tasks, [], cut=False))
    await eventually(started.is_set, 5, "the partners' requests to start")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert all(t.cancelled() for t in tasks)  # ended with the round, not left running
