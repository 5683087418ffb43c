"""`HttpTransport`: the `gossip.transport.Transport` interface over aiohttp.

One `ClientSession` (keep-alive pool) per peer, created lazily inside the running loop. Every
request has one deadline covering connect, send and receive. Failures map onto the transport's
errors so the protocols above never see aiohttp types: refused/reset -> `PeerUnreachable`,
deadline -> `RequestTimeout`, 4xx/5xx -> `RemoteError` with the peer's one-line reason.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from gossip.transport import PeerUnreachable, RemoteError, RequestTimeout
from node.http_body import BodyError, read_body

MAX_ERROR_TEXT = 500


class HttpTransport:
    """POST `http://{addr}/v1/{route}` with a raw body; answers are read into one buffer."""

    def __init__(self, *, max_response_bytes: int = 1 << 30, pool_size: int = 64) -> None:
        self.max_response_bytes = max_response_bytes
        self.pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.pool_size, ttl_dns_cache=60)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        return self._session

    async def request(
        self, addr: str, route: str, body: Any, *, timeout: float
    ) -> bytes | bytearray:
        if self._closed:
            raise PeerUnreachable(f"transport closed; cannot reach {addr}")
        url = f"http://{addr}/v1/{route}"
        try:
            return await asyncio.wait_for(self._post(url, body), timeout)
        except TimeoutError:
            raise RequestTimeout(f"{addr} /v1/{route}: no answer within {timeout:.2f}s") from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            raise PeerUnreachable(f"{addr} /v1/{route}: {type(exc).__name__}: {exc}") from None
        except BodyError as exc:
            raise RemoteError(f"{addr} /v1/{route}: {exc}", exc.status) from None

    async def _post(self, url: str, body: Any) -> bytes | bytearray:
        headers = {"Content-Type": "application/octet-stream"}
        async with self._client().post(url, data=body, headers=headers) as resp:
            if resp.status >= 400:
                text = (await resp.content.read(MAX_ERROR_TEXT)).decode("utf-8", "replace")
                raise RemoteError(
                    f"{url} answered {resp.status}: {' '.join(text.split())}", resp.status
                )
            return await read_body(resp.content, resp.content_length, self.max_response_bytes)

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None
