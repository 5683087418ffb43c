"""A large envelope sealed while it is sent (envelope v4, gossip/auth/signer.py).

The digest that the tag and the signature cover sits in a trailer after the body, so a sender
does not hash 100 MB before its first byte (twice on the critical path of a push-pull: figures
in docs/benchmarks.md, "Signing cost"). `StreamedSeal` is the transport's `Trailed` body: the
transport writes the envelope head and the body, telling it after each slice; each written
range is queued for one worker thread (the receiver's `StreamDigest` machinery, fed by the
sender), and once the body is out `trailer()` waits for the last range and computes tag and
signature. The body is not copied and must stay unchanged until `close()`.
"""

from __future__ import annotations

from collections.abc import Callable

from swarmnode.gossip.auth.stream_digest import StreamDigest
from swarmnode.gossip.errors import AuthError
from swarmnode.gossip.link import Trailed


class StreamedSeal(Trailed):
    """`head | body | trailer`, where trailer = `finish(BLAKE3(head[skip:] | body))`."""

    def __init__(
        self,
        head: bytes,
        body: memoryview,
        *,
        skip: int,
        tail_bytes: int,
        finish: Callable[[bytes], bytes],
    ) -> None:
        super().__init__((memoryview(head), body), tail_bytes)
        self._body = body
        self._tail_bytes = tail_bytes
        self._digest = StreamDigest(0, lead=head[skip:])
        self._finish = finish
        self._trailer: bytes | None = None

    def sent(self, buf: memoryview, end: int) -> None:
        if buf is self._body:  # the head was hashed up front (`lead`)
            self._digest.feed(buf, end)

    async def trailer(self) -> bytes:
        if self._trailer is None:
            digest = await self._digest.finish(self._body)
            if digest is None:  # closed before the body was out: nothing valid to send
                raise AuthError("the envelope was closed before its trailer was computed")
            trailer = self._finish(digest)
            assert len(trailer) == self._tail_bytes
            self._trailer = trailer
        return self._trailer

    async def close(self) -> None:
        self._digest.abort()  # a no-op once the trailer is computed
        await self._digest.settle()
