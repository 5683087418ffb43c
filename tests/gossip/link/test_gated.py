"""`Gated` (gossip/link/transport.py): an answer given while its request still arrives holds
its last bytes until the request's check passes, and never completes when it fails."""

from __future__ import annotations

import asyncio

import pytest
from swarmnode.gossip.errors import AuthError
from swarmnode.gossip.link import Gated, Parts, completed

from tests.waiting import eventually

pytestmark = pytest.mark.timeout(10)


async def _write(gated: Gated, out: bytearray) -> None:
    """As a streaming writer does: the buffers, then the trailer once it is known."""
    for buf in gated.buffers:
        out += buf
        gated.sent(buf, buf.nbytes)
    out += await gated.trailer()


@pytest.mark.parametrize("answer", [bytes(range(200)), Parts(b"head", bytes(300))])
async def test_the_last_bytes_wait_for_the_gate(answer: object) -> None:
    whole = bytes(answer)  # type: ignore[call-overload]
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    gated = Gated(answer, gate)
    assert len(gated) == len(whole)
    out = bytearray()
    writing = asyncio.ensure_future(_write(gated, out))
    await eventually(lambda: len(out) == len(whole) - 64, 5, "all but the held bytes written")
    assert not writing.done()  # the held bytes wait for the gate
    gate.set_result(None)
    await writing
    await gated.close()
    assert bytes(out) == whole


async def test_a_failed_gate_never_completes_the_answer() -> None:
    async def refused() -> None:
        raise AuthError("the body's digest does not match its trailer's")

    gated = Gated(bytes(1000), refused())
    with pytest.raises(AuthError, match="digest"):
        await completed(gated)  # closes it too: nothing is left running


async def test_closing_an_abandoned_answer_cancels_its_gate() -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    gated = Gated(bytes(1000), gate)
    await gated.close()
    assert gate.cancelled()
