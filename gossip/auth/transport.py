"""Envelopes on the wire: `AuthTransport` seals requests and opens answers, `auth_handlers`
opens requests and seals answers (gossip/auth/signer.py has the format and what it binds).

Large bodies never block the event loop and are hashed while they move: a large envelope
goes out as a `StreamedSeal` (its body is hashed in a worker thread while the transport writes
it, the tag and signature follow as a trailer), and an arriving one is hashed while it streams
in by a `StreamDigest` the transport feeds (`Arrival.tap`), so opening it only checks
the tag and the signature. What the tap did not see in full (a small body, a copy made by a
fault wrapper) is hashed after the fact, in a thread past 1 MiB.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from swarmnode.gossip.auth.signer import INLINE_BYTES, Head, Opened, Signer, nonce_of
from swarmnode.gossip.auth.stream_digest import StreamDigest
from swarmnode.gossip.errors import AuthError, UnauthenticatedRequest, UnauthenticatedResponse
from swarmnode.gossip.link import (
    BODY_TAP,
    Arrival,
    Early,
    Gated,
    Handler,
    Parts,
    Trailed,
    Transport,
    body_views,
    is_takes_arriving,
    takes_arriving,
)


class AuthTransport:
    """A `Transport` that seals requests (every one with a secret, else those on the signer's
    signed routes) and, with a secret, opens (authenticates) every answer."""

    def __init__(self, inner: Transport, signer: Signer) -> None:
        self.inner = inner
        self.signer = signer

    async def request(self, addr: str, route: str, body: Any, *, timeout: float) -> Any:
        if not self.signer.wraps(route):
            return await self.inner.request(addr, route, body, timeout=timeout)
        sealed = _seal(self.signer, route, body, to=addr)
        try:
            if not self.signer.has_secret:  # answers travel bare without a secret
                return await self.inner.request(addr, route, sealed, timeout=timeout)
            return await self._request_sealed(addr, route, sealed, timeout)
        finally:
            if isinstance(sealed, Trailed):  # its hashing read the body: none outlives us
                await sealed.close()

    async def _request_sealed(
        self, addr: str, route: str, sealed: Parts | Trailed, timeout: float
    ) -> Any:
        tap = self.signer.tap()
        assert tap is not None  # every message is enveloped with a secret
        token = BODY_TAP.set(tap)
        try:
            answer = await self.inner.request(addr, route, sealed, timeout=timeout)
            opened = await _open(self.signer, route, answer, tap, reply_to=nonce_of(sealed))
        except AuthError as exc:
            raise UnauthenticatedResponse(f"{addr} {route}: {exc}") from None
        finally:
            BODY_TAP.reset(token)
            tap.abort()  # a no-op once finished; stops the hashing of an answer that failed
            await tap.settle()
        return opened.body

    async def close(self) -> None:
        await self.inner.close()


def auth_handlers(handlers: Mapping[str, Handler], signer: Signer) -> dict[str, Handler]:
    """Wrap server-side handlers: open each enveloped request (401/403 if not authentic, the
    handler never runs) and, with a secret, seal each answer. Routes the signer does not
    envelope (without a secret: all but the signed ones) are passed through unchanged."""
    return {
        route: _authenticated(route, handler, signer) if signer.wraps(route) else handler
        for route, handler in handlers.items()
    }


def _authenticated(route: str, handler: Handler, signer: Signer) -> Handler:
    early = is_takes_arriving(handler)

    @takes_arriving  # a body still arriving is awaited here for a handler that wants it whole
    async def wrapped(req: Arrival) -> Any:
        if req.arriving is not None:
            return await _streamed(route, handler, signer, req, early)
        tap = req.tap
        try:
            opened = await _open(signer, route, req.body, tap, arrived=req.local)
        except AuthError as exc:
            raise _refused(route, exc) from None
        finally:
            if tap is not None:
                tap.abort()
                await tap.settle()
        answer = await handler(req.opened(opened.body, opened.signed_by))
        if not signer.has_secret:
            return answer
        # a large answer is a StreamedSeal: whoever writes it closes it (node/net/app.py)
        return _seal(signer, route, answer, reply_to=opened.nonce)

    wrapped.__name__ = f"authenticated_{getattr(handler, '__name__', 'handler')}"
    return wrapped


async def _streamed(
    route: str, handler: Handler, signer: Signer, req: Arrival, early: bool
) -> Gated:
    """A request whose body still streams in: its head verified now (401/403/426 before one
    byte of the body is read), the rest by `_verify_rest` once it is in. A handler that
    takes arrivals may answer before that (`Early`); whatever it answers, the last bytes of
    the answer wait until the body verified and the handler's checks passed (`Gated`)."""
    buf = req.body
    try:
        head = signer.open_head(route, buf, total=len(buf), arrived=req.local)
    except AuthError as exc:
        raise _refused(route, exc) from None
    verified = asyncio.ensure_future(_verify_rest(signer, head, req.arriving, req.tap))
    try:
        if early:  # the body's bytes are not there yet: only `arriving` hands them out
            inner = req.opened(b"", head.signed_by, arriving=verified)
        else:
            inner = req.opened(await verified, head.signed_by)
        answer = await handler(inner)
    except BaseException:
        verified.cancel()
        await asyncio.gather(verified, return_exceptions=True)
        raise
    gate: Any = verified
    if isinstance(answer, Early):
        gate, answer = _both(verified, answer.done), answer.answer
    if signer.has_secret:
        answer = _seal(signer, route, answer, reply_to=head.nonce)
    return Gated(answer, gate)


async def _both(verified: asyncio.Future[Any], done: Awaitable[None]) -> None:
    """The gate of an early answer: the handler's work on the body (which awaits `verified`),
    then `verified` itself, so that its failure is never left unretrieved; a handler that
    refused the request first stops the rest of its body from being read."""
    try:
        await done
    except BaseException:
        verified.cancel()
        await asyncio.gather(verified, return_exceptions=True)
        raise
    await verified


async def _verify_rest(signer: Signer, head: Head, arriving: Any, tap: Any) -> Any:
    """The body of a request whose head verified, once it is whole and its digest and
    trailer check out (hashed while it arrived, by the tap)."""
    try:
        whole = await arriving  # a body that never comes whole raises the HTTP layer's error
        digest = await tap.finish(whole) if isinstance(tap, StreamDigest) else None
        size = 0 if digest is not None else len(whole)
        opened = await _maybe_in_thread(size, signer.open_body, head, whole, digest=digest)
    except AuthError as exc:
        raise _refused(head.route, exc) from None
    finally:
        if tap is not None:
            tap.abort()
            await tap.settle()
    return opened.body


def _refused(route: str, exc: AuthError) -> UnauthenticatedRequest:
    refused = UnauthenticatedRequest(f"{route}: {exc}", exc.status)
    refused.said = getattr(exc, "said", False)  # logged once already (a clock skew)
    refused.stranger = getattr(exc, "stranger", False)  # no envelope: an outsider
    return refused


async def _open(
    signer: Signer, route: str, data: Any, tap: Any, *, reply_to: bytes = b"", arrived: str = ""
) -> Opened:
    """Open `data` with the digest the tap computed while it arrived, if it saw all of it."""
    digest = await tap.finish(data) if isinstance(tap, StreamDigest) else None
    size = 0 if digest is not None else len(data)  # hashed already: a tag and a signature left
    return await _maybe_in_thread(
        size, signer.open_request, route, data, reply_to=reply_to, digest=digest, arrived=arrived
    )


def _seal(
    signer: Signer, route: str, body: Any, *, to: str = "", reply_to: bytes = b""
) -> Parts | Trailed:
    """Small bodies sealed at once; large ones hashed while the transport writes them."""
    if sum(view.nbytes for view in body_views(body)) <= INLINE_BYTES:
        return signer.seal_parts(route, body, to=to, reply_to=reply_to)
    return signer.seal_streamed(route, body, to=to, reply_to=reply_to)


async def _maybe_in_thread(size: int, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Run `fn` inline for small messages, in a worker thread when hashing would block the loop."""
    if size <= INLINE_BYTES:
        return fn(*args, **kw)
    return await asyncio.to_thread(fn, *args, **kw)
