"""A frame whose envelope digest was verified skips its own xxh3 check (gossip/wire/covered.py),
and only that very object does: a copy, a freed-and-reallocated buffer or a frame that no
envelope covered is still checked."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import INLINE_BYTES, SIGNED_ROUTES, Signer
from swarmnode.gossip.errors import WireError
from swarmnode.gossip.wire import covered
from swarmnode.gossip.wire import frames as wire

pytestmark = pytest.mark.timeout(30)


def frame(n: int = INLINE_BYTES // 4 + 1000) -> bytes:
    return wire.encode_params(np.arange(n, dtype=np.float32), sender="a", step=1)


def with_bad_crc(data: bytes) -> bytearray:
    """The frame with one payload byte changed and its header's checksum left as it was."""
    out = bytearray(data)
    out[-1] ^= 0x01
    return out


def test_an_opened_large_body_is_covered_and_decodes_without_its_checksum(monkeypatch) -> None:
    a, b = PeerKey.generate(), PeerKey.generate()
    sealer = Signer(None, key=a, signed_routes=SIGNED_ROUTES, name="a:1")
    opener = Signer(None, key=b, keys={a.peer_id: a.public}.get, signed_routes=SIGNED_ROUTES)
    opener.name = "b:1"
    body = opener.open("params", sealer.seal("params", frame(), to="b:1"))
    assert isinstance(body, memoryview) and covered.is_covered(body)
    calls: list[int] = []
    monkeypatch.setitem(wire.CHECKSUMS, "xxh3", lambda v: calls.append(len(v)) or b"")
    wire.decode_params(body)
    assert calls == []  # the envelope's BLAKE3 covered these bytes
    with pytest.raises(WireError, match="checksum"):
        wire.decode_params(memoryview(bytes(body)))  # a copy is not the verified object
    assert len(calls) == 1


def test_an_unmarked_or_freed_buffer_is_checked() -> None:
    bad = with_bad_crc(frame())
    with pytest.raises(WireError, match="checksum"):
        wire.decode_params(memoryview(bad))
    view = memoryview(bad)
    covered.mark(view)
    wire.decode_params(view)  # marked: trusted as verified (what open_request vouches for)
    key = id(view)
    del view
    gc.collect()
    assert key not in covered._MARKS  # the mark died with its object
    with pytest.raises(WireError, match="checksum"):
        wire.decode_params(memoryview(bad))
