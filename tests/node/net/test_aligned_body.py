"""A large enveloped body is read so that the wire frame inside it is aligned: its float32 payload
decodes to an aligned view (an odd offset made the NaN check alone 10x slower), and the digest
streamed while it arrived still opens it (node/net/transport.py, gossip/auth/stream_digest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.gossip.auth.peer_key import PeerKey
from swarmnode.gossip.auth.signer import SIGNED_ROUTES, Signer
from swarmnode.gossip.wire import frames as wire
from swarmnode.node.net.transport import read_sized_body

pytestmark = pytest.mark.timeout(30)


class Chunks:
    """The part of aiohttp's StreamReader a large body is read through."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.pos = data, sizes, 0

    async def readany(self) -> bytes:
        n = self.sizes[0] if len(self.sizes) == 1 else self.sizes.pop(0)
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk


@pytest.mark.parametrize("name", ["127.0.0.1:9", "a-longer-name.example:65000"])  # odd offsets
async def test_the_frame_in_a_read_envelope_is_aligned_and_its_digest_opens_it(name) -> None:
    a, b = PeerKey.generate(), PeerKey.generate()
    n = 600_000  # 2.4 MB: a large body (past INLINE_BYTES)
    vec = np.arange(n, dtype=np.float32)
    sealer = Signer(None, key=a, signed_routes=SIGNED_ROUTES, name=name)
    envelope = bytes(sealer.seal("pushpull", wire.encode_params(vec, sender=a.peer_id, step=1)))
    opener = Signer(None, key=b, keys={a.peer_id: a.public}.get, signed_routes=SIGNED_ROUTES)
    opener.accepts = lambda receiver, arrived="": True  # type: ignore[method-assign]  # not here
    tap = opener.tap("pushpull")
    assert tap is not None
    stream = Chunks(envelope, [65_536, 1_000_003, 1 << 20])
    body = await read_sized_body(
        stream,
        len(envelope),
        1 << 30,
        tap=tap.feed,
        align=tap.body_offset,  # type: ignore[arg-type]
    )
    assert bytes(body) == envelope
    digest = await tap.finish(body)
    assert digest is not None  # the buffer fed is the one handed on
    opened = opener.open_request("pushpull", body, digest=digest)
    _, arr = wire.decode_params(opened.body)
    assert arr.ctypes.data % wire.ALIGN == 0 and arr.flags.aligned
    np.testing.assert_array_equal(arr, vec)
