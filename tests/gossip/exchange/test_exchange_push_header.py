"""A pushed frame's header is read once per push: the access check, the codec's choice, the
answer's recipient and the decoding all take the one `FrameHeader` the handler read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np
import pytest
from swarmnode.gossip.errors import RemoteError, WireError
from swarmnode.gossip.exchange import InMemoryStore
from swarmnode.gossip.exchange.exchanger import ExchangeConfig, Exchanger
from swarmnode.gossip.link.inmemory import InMemoryNetwork
from swarmnode.gossip.link.transport import Arrival
from swarmnode.gossip.wire import frames

from tests.gossip.exchange.exchange_fakes import FixedPeers

pytestmark = pytest.mark.timeout(30)

D = 600


@pytest.fixture
def header_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every parse of a frame header (msgpack and its checks), counted: one entry a call."""
    calls: list[int] = []
    parse = frames._read_header

    def counting(view, caps):  # type: ignore[no-untyped-def]
        calls.append(1)
        return parse(view, caps)

    monkeypatch.setattr(frames, "_read_header", counting)
    return calls


Handler = Callable[[Arrival], Awaitable[bytes]]


def _pair(cfg: ExchangeConfig, reads: list[int]) -> tuple[Exchanger, Exchanger, list[int]]:
    """p0 and p1 on one network; the list returned gets the header reads (of all `reads`) p1
    made while serving each push (the initiator reads the answer's only after it)."""
    net = InMemoryNetwork()
    rng = np.random.default_rng(1)
    base = rng.standard_normal(D).astype(np.float32)
    exs = []
    for i in range(2):
        other = [(f"p{1 - i}", f"p{1 - i}:1")]
        exs.append(
            Exchanger(
                cfg,
                self_id=f"p{i}",
                transport=net.transport(f"p{i}:1"),
                store=InMemoryStore(base + 0.01 * rng.standard_normal(D).astype(np.float32)),
                peers=FixedPeers(other, member=lambda pid: pid.startswith("p")),
            )
        )
    served: list[int] = []
    net.register("p0:1", exs[0].handlers())
    net.register("p1:1", {**exs[1].handlers(), "pushpull": _watched(exs[1], reads, served)})
    return exs[0], exs[1], served


def _watched(ex: Exchanger, reads: list[int], served: list[int]) -> Handler:
    serve = ex.handlers()["pushpull"]

    async def handle(req: Arrival) -> bytes:
        before = len(reads)
        reply = await serve(req)
        served.append(len(reads) - before)
        return reply

    return handle


@pytest.mark.parametrize(
    "cfg",
    [
        ExchangeConfig(mode="average"),
        ExchangeConfig(mode="robust", pull=1, aggregator="ss-clip", byzantine_f=0),
        ExchangeConfig(mode="average", compress="int8"),
    ],
    ids=["average", "robust", "compressed"],
)
async def test_one_push_is_one_header_read(cfg: ExchangeConfig, header_reads: list[int]) -> None:
    initiator, _, served = _pair(cfg, header_reads)
    result = await initiator.round()
    assert result.received == ["p1"], result.failures
    assert served == [1]


async def test_a_push_whose_header_does_not_parse_is_read_once_and_refused(
    header_reads: list[int],
) -> None:
    _, responder, _ = _pair(ExchangeConfig(mode="average"), header_reads)
    frame = bytearray(frames.encode_params(np.ones(D, np.float32), sender="p0", step=1))
    frame[4] ^= 0xFF  # the header's first msgpack byte: no longer a map
    with pytest.raises(WireError):
        await responder.handlers()["pushpull"](Arrival(bytes(frame)))
    assert len(header_reads) == 1 and responder.rejected == 1


async def test_the_access_check_reads_the_sender_from_the_one_header(
    header_reads: list[int],
) -> None:
    _, responder, _ = _pair(ExchangeConfig(mode="average"), header_reads)
    frame = frames.encode_params(np.ones(D, np.float32), sender="stranger", step=1)
    with pytest.raises(RemoteError) as refused:
        await responder.handlers()["pushpull"](Arrival(frame))
    assert refused.value.status == 403 and len(header_reads) == 1
