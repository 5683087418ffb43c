"""Issue 32, item 5: hostile input at the streaming envelope's new boundaries.

A real peer (`Node`, aiohttp on 127.0.0.1) with a model past 1 MiB, so that a push takes the
streamed path (its answer starts once the envelope's head verified, node/net/app.py). The
attacker is a member (`mallory`, admitted with her own key) speaking raw HTTP over a socket, so
that she controls every byte and every pause. Each push carries a model at 1e4 everywhere: had
one been mixed, the victim's parameters would be far from their honest range. Each attempt is
refused or cut off (never a complete 200), nothing is mixed, no ERROR is logged, and the
exchange slot is free again afterwards: an honest push is then served.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import numpy as np
import pytest
from swarmnode.fault.hostile.insider import admit
from swarmnode.gossip.auth.signer import TRAILER_BYTES, header_length
from swarmnode.gossip.wire import frames as wire
from swarmnode.node.peer.node import Node

from tests.integration.inprocess import peer_config
from tests.integration.member_client import MemberClient
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

POISON = 1e4
MODEL = "mlp:1024,512"  # a ~3 MiB frame: past INLINE_BYTES, the streamed path
GRACE_S = 1.0  # the victim's body deadline: 1 s + size / 16 MiB/s


@pytest.fixture(params=[None, "s3cret"], ids=["open", "secret"])
async def victim(request) -> AsyncIterator[tuple[Node, MemberClient]]:
    secret = request.param
    cfg = peer_config(
        seed=0, secret=secret, model=MODEL, body_grace_s=GRACE_S, body_min_rate=16 << 20
    )
    node = await Node.create(cfg)
    mallory = MemberClient(secret)
    admit(node, mallory)
    try:
        yield node, mallory
    finally:
        await node.close()


class Answer:
    """What came back on the socket: the status (None: nothing) and whether the body was whole."""

    def __init__(self, raw: bytes) -> None:
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else None
        length = next(
            (int(h.split(":", 1)[1]) for h in lines[1:] if h.lower().startswith("content-length")),
            None,
        )
        self.whole = length is not None and len(body) == length
        self.text = body[:300]

    def __repr__(self) -> str:
        return f"Answer({self.status}, whole={self.whole}, {self.text[:120]!r})"


async def raw_push(
    addr: str, pieces: list[bytes | float], length: int, *, hang_up: bool = False
) -> Answer:
    """POST `pieces` (bytes sent, floats slept) with Content-Length `length`, reading the
    answer all the while (the server answers while the push arrives); `hang_up`: close the
    connection after the last piece instead of waiting for the answer."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    got = asyncio.ensure_future(_collect(reader))
    try:
        writer.write(
            f"POST /v1/pushpull HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {length}\r\n\r\n".encode()
        )
        for piece in pieces:
            if got.done():  # the server answered and closed: nothing more to send
                break
            if isinstance(piece, float):
                await asyncio.wait({got}, timeout=piece)
            else:
                writer.write(piece)
                await writer.drain()
        if hang_up:
            writer.close()
        return Answer(await asyncio.wait_for(got, 30))
    except ConnectionError:  # the server cut us off while we were still sending
        return Answer(await asyncio.wait_for(got, 30))
    finally:
        got.cancel()
        writer.close()


async def _collect(reader: asyncio.StreamReader) -> bytes:
    """Every byte until EOF, or until the server resets the connection (it closes one whose
    body it did not read: the kernel then sends a reset, which may discard its answer)."""
    chunks = []
    try:
        while chunk := await reader.read(1 << 16):
            chunks.append(chunk)
    except ConnectionError:
        pass
    return b"".join(chunks)


def push_of(node: Node, mallory: MemberClient, value: float | None = None) -> bytes:
    """A push sealed by mallory for `node`: poison, or (value None) the node's own model."""
    vec = node.params_host().astype(np.float32) if value is None else None
    if vec is None:
        vec = np.full(node.store.size, value, np.float32)
    frame = wire.encode_params(vec, sender=mallory.peer_id, step=1)
    return mallory.seal(node.addr, "pushpull", bytes(frame))


def flipped(sealed: bytes, at: int) -> bytes:
    out = bytearray(sealed)
    out[at] ^= 0x01
    return bytes(out)


async def settled_clean(node: Node) -> None:
    """Nothing of the poison was mixed, and every exchange slot is free again."""
    await node.exchanger.settle()
    await node.store.settled()
    assert np.abs(node.params_host()).max() < POISON / 10
    sem = node.exchanger._inflight
    await eventually(lambda: sem._value == node.cfg.exchange.max_inflight, 10, "the slots")


async def test_each_lie_at_the_new_boundaries_is_refused_or_cut_off(victim, caplog) -> None:
    node, mallory = victim
    caplog.set_level(logging.INFO)
    sealed = push_of(node, mallory, POISON)
    n, head = len(sealed), header_length(sealed)
    body_end = n - TRAILER_BYTES

    # the head declares (and signs) a longer body than the message carries: 401 at the head
    # (the refusal comes before the body is read, and the connection is closed on the rest:
    # the kernel may then reset it before the 401 is read; the log has the reason)
    short = sealed[:-1000]
    got = await raw_push(node.addr, [short], len(short))
    assert got.status in (401, None), got
    # ... or a shorter one (padding after the trailer)
    padded = push_of(node, mallory, POISON) + bytes(1000)
    got = await raw_push(node.addr, [padded], len(padded))
    assert got.status in (401, None), got
    declared = [r for r in caplog.records if "the head declares" in r.getMessage()]
    assert len(declared) == 2 and "401" in declared[0].getMessage()

    # a body that stops after the head verified: the connection drops, nothing is kept
    stops = push_of(node, mallory, POISON)
    got = await raw_push(node.addr, [stops[: head + (64 << 10)], 0.3], n, hang_up=True)
    assert not (got.status == 200 and got.whole), got

    # a body whose digest fails at its last byte: the answer (begun) is cut off
    last = flipped(push_of(node, mallory, POISON), body_end - 1)
    got = await raw_push(node.addr, [last], n)
    assert not (got.status == 200 and got.whole), got

    # a slow body after a valid head: cut off at the body deadline, not held for ever
    slow = push_of(node, mallory, POISON)
    t0 = asyncio.get_running_loop().time()
    got = await raw_push(node.addr, [slow[: head + (64 << 10)], 30.0, slow[head + (64 << 10) :]], n)
    assert not (got.status == 200 and got.whole), got
    assert asyncio.get_running_loop().time() - t0 < 20  # the deadline (~1.2 s), not 30 s

    # a head replayed with another body: refused at the head (its nonce was seen) ...
    honest = push_of(node, mallory)
    got = await raw_push(node.addr, [honest], len(honest))
    assert got.status == 200 and got.whole, got  # the original, an honest push: served
    poison = push_of(node, mallory, POISON)
    replayed = honest[:head] + poison[head:body_end] + honest[body_end:]
    got = await raw_push(node.addr, [replayed], len(replayed))
    assert got.status in (401, None), got
    assert "replay" in caplog.records[-1].getMessage().lower()
    # ... and a head never seen before, with another body: it fails at the trailer
    fresh = push_of(node, mallory)
    swapped = fresh[:head] + poison[head:body_end] + fresh[body_end:]
    got = await raw_push(node.addr, [swapped], len(swapped))
    assert not (got.status == 200 and got.whole), got

    await settled_clean(node)
    honest = push_of(node, mallory)  # the slots are free: an honest push is served whole
    got = await raw_push(node.addr, [honest], len(honest))
    assert got.status == 200 and got.whole, got
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "does not match" in said and "not delivered within" in said


async def test_the_answer_begins_while_the_push_still_arrives() -> None:
    """A default peer (`--reachable auto`: its reach watch wraps the route) starts its answer
    once the head verified, not after the body: half a push sent, the 200 comes back; the rest
    then completes both. (Lost, a round over a link took the two bodies one after the other.)"""
    node = await Node.create(peer_config(seed=0, model=MODEL, body_grace_s=30.0))
    try:
        assert node.cfg.reachable == "auto"
        mallory = MemberClient(None)
        admit(node, mallory)
        sealed = push_of(node, mallory)
        half = header_length(sealed) + (len(sealed) - header_length(sealed)) // 2
        host, port = node.addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(
                f"POST /v1/pushpull HTTP/1.1\r\nHost: {node.addr}\r\nConnection: close\r\n"
                "Content-Type: application/octet-stream\r\n"
                f"Content-Length: {len(sealed)}\r\n\r\n".encode()
            )
            writer.write(sealed[:half])
            await writer.drain()
            # the server's body deadline is 30 s: an answer that waits for the body never comes
            first = await asyncio.wait_for(reader.readuntil(b"\r\n"), 20)
            assert first.startswith(b"HTTP/1.1 200"), first
            writer.write(sealed[half:])
            await writer.drain()
            got = Answer(first + await asyncio.wait_for(_collect(reader), 30))
        finally:
            writer.close()
        assert got.status == 200 and got.whole, got
        await eventually(lambda: node.exchanger.served >= 1, 10, "the push mixed and counted")
    finally:
        await node.close()
