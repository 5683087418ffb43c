"""Can the swarm dial this peer? The dial-back self-check, and outbound-only running.

At start a joiner asks a live member to dial it back (`dialback`, signed by the joiner's peer
key). The member dials the address in the asker's own signed record, never one named in the
request, so a forged request cannot point it at a third party: that address is one the whole
swarm dials anyway. It dials `reach`, which answers the asker's id and the dialler's nonce, so an
answer from someone else at that address does not count. Each member dials at most
`DIAL_BURST` times per `DIAL_WINDOW_S`, and any one asker once per `ASK_EVERY_S`.

If every member asked tried and failed, the joiner runs outbound-only: it sets `reach =
outbound` in its signed meta, so the others never pick it as a dial target
(gossip/membership/sampling.py), and takes part by dialling out, as every peer does: a push-pull
gives and takes in one request, a gossip push carries its record (so its heartbeat spreads and
nobody declares it dead). A member that lies about it only loses the rounds others would have
started with it. `--reachable yes|no` skips the check.

The check runs again (`ReachWatch`, every `WATCH_S`) when the answer may have changed: the
address this host would advertise now is not the one it advertises (its network changed: another
Wi-Fi, a new DHCP lease; the swarm still dials the old one), a dialable peer has had no request
from any member for `QUIET_S` while members live (they dial it every gossip interval: silence
says they cannot), and for a peer found outbound-only every `OUTBOUND_RECHECK_S` (a port
forwarded since is found). Either way the verdict changes the peer's signed word, said in one
INFO line.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from swarmnode.gossip.auth import Signer, auth_handlers
from swarmnode.gossip.errors import CodecError, RemoteError, TransportError
from swarmnode.gossip.link import Arrival, Handler, Transport, is_takes_arriving, takes_arriving
from swarmnode.gossip.membership import ALIVE, OUTBOUND, REACH, SUSPECT, Membership
from swarmnode.gossip.wire import decode_control, encode_control, require
from swarmnode.node.peer.address import WILDCARDS, advertised
from swarmnode.node.settings import parse_hostport
from swarmnode.node.train import ConfigError

log = logging.getLogger(__name__)

DIAL_S = 3.0  # a member's dial back: a black hole costs the check this long
ASK_S = DIAL_S + 2.0  # the asker's wait for the member's verdict
ASKED = 2  # members asked at most: one that cannot dial out itself is not the last word
DIAL_BURST = 4  # dials a member makes for others ...
DIAL_WINDOW_S = 60.0  # ... per this window
ASK_EVERY_S = 10.0  # one asker's dials at most this often
MAX_ASKERS = 256  # askers remembered for that bound
DIRECT = "direct"  # the reach of a member whose meta says nothing else
WATCH_S = 30.0  # how often the watch looks at the address and at who dialled us
QUIET_S = 60.0  # a dialable peer no member dialled this long, while members live: check again
OUTBOUND_RECHECK_S = 600.0  # a peer found outbound-only checks again this often
INBOUND_ROUTES = ("gossip", "pushpull", "params")  # what members dial a dialable peer for


def reach_of(meta: Any) -> str:
    """`outbound` or `direct`, from a member's (or our own) meta."""
    return OUTBOUND if meta.get(REACH) == OUTBOUND else DIRECT


class DialRate:
    """At most `burst` dials per `window_s`, and one per asker per `every_s`."""

    def __init__(
        self,
        burst: int = DIAL_BURST,
        window_s: float = DIAL_WINDOW_S,
        every_s: float = ASK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.window_s, self.every_s, self.clock = burst, window_s, every_s, clock
        self._recent: deque[float] = deque()
        self._askers: OrderedDict[str, float] = OrderedDict()

    def allow(self, asker: str) -> bool:
        now = self.clock()
        while self._recent and now - self._recent[0] > self.window_s:
            self._recent.popleft()
        last = self._askers.get(asker)
        if len(self._recent) >= self.burst or (last is not None and now - last < self.every_s):
            return False
        self._recent.append(now)
        self._askers[asker] = now
        self._askers.move_to_end(asker)
        while len(self._askers) > MAX_ASKERS:
            self._askers.popitem(last=False)
        return True


class Reacher(Protocol):
    peer_id: str
    addr: str
    reachable: bool
    cfg: Any  # PeerConfig: reachable, join, sign_exchange, listen, advertise
    membership: Membership
    links: Transport
    signer: Signer
    rng: Any
    _handlers: dict[str, Any]


def serve_reach(node: Reacher) -> None:
    """Serve the dial-back routes (node/peer/node.py calls this before the join: a joiner may
    ask us as soon as we are listed, and a 404 then read as a fault in our log)."""
    if node.cfg.sign_exchange:  # the dialler must know who asks: the asker signs
        node.signer.signed_routes = node.signer.signed_routes | {"dialback"}
    handlers = dialback_handlers(node.peer_id, node.membership, node.links)
    node._handlers.update(auth_handlers(handlers, node.signer))


async def start_reach(node: Reacher) -> bool:
    """Check whether the swarm can dial us (node/peer/node.py calls this once, after the join,
    its routes served by `serve_reach`). True: the swarm can dial us."""
    setting = node.cfg.reachable
    if setting == "auto" and not node.cfg.sign_exchange:  # unsigned, nobody would dial back
        setting = "yes"
    return await check_reach(node, setting, bool(node.cfg.join))


def dialback_handlers(
    peer_id: str, membership: Membership, transport: Transport, rate: DialRate | None = None
) -> dict[str, Any]:
    """The two routes: `dialback` (dial the asking member back) and `reach` (answer a dial)."""
    rate = rate or DialRate()

    async def on_dialback(req: Arrival) -> bytes:
        decode_control(req.body, "dialback")  # what else it says is ignored: no address
        asker = req.signed_by
        member = membership.get(asker) if asker else None
        if member is None or member.state not in (ALIVE, SUSPECT):
            # routine too: a joiner that asks a member which has not heard of it yet
            raise RemoteError(
                "dialback: only a live member's signed request is dialled", 403, said=True
            )
        if not rate.allow(asker):  # routine for a joiner that asks again: no WARNING
            raise RemoteError("dialback: asked too often, try later", 429, said=True)
        ok, why = await dial(transport, member.addr, asker)
        return encode_control("dialback-ack", ok=ok, addr=member.addr, why=why)

    async def on_reach(req: Arrival) -> bytes:
        msg = decode_control(req.body, "reach")
        nonce = require(msg, "nonce", str)[:64]
        return encode_control("reach-ack", peer_id=peer_id, nonce=nonce)

    return {"dialback": on_dialback, "reach": on_reach}


async def dial(transport: Transport, addr: str, expect: str) -> tuple[bool, str]:
    """Dial `addr`'s `reach`: whether `expect` answered there, and why not."""
    nonce = secrets.token_hex(8)
    try:
        raw = await transport.request(
            addr, "reach", encode_control("reach", nonce=nonce), timeout=DIAL_S
        )
        msg = decode_control(raw, "reach-ack")
    except (TransportError, CodecError) as exc:
        return False, str(exc)[:200]
    if msg.get("peer_id") != expect or msg.get("nonce") != nonce:
        return False, f"another peer answers at {addr}"
    return True, ""


async def ask_dialback(node: Reacher) -> tuple[bool | None, str]:
    """Ask up to `ASKED` live members at once to dial us back: True if one reached us, False
    if those that tried all failed (with why), None if nobody could tell."""
    members = node.membership.dialable_peers()
    node.rng.shuffle(members)
    answers = await asyncio.gather(*(_ask(node, m.addr) for m in members[:ASKED]))
    said = [(m.peer_id, a) for m, a in zip(members, answers, strict=False) if a is not None]
    if any(ok for _, (ok, _) in said):
        return True, ""
    if not said:
        return None, ""
    pid, (_, why) = said[0]
    more = f"; {len(said) - 1} more member(s) failed too" if len(said) > 1 else ""
    return False, f"{pid} tried: {why}{more}"


async def _ask(node: Reacher, addr: str) -> tuple[bool, str] | None:
    """One member's verdict (dialled us?, why not), or None if it could not be asked."""
    try:
        raw = await node.links.request(addr, "dialback", encode_control("dialback"), timeout=ASK_S)
        msg = decode_control(raw, "dialback-ack")
        return require(msg, "ok", bool), str(msg.get("why"))[:160]
    except (TransportError, CodecError) as exc:
        log.debug("reach check: %s could not be asked: %s", addr, exc)
        return None


async def check_reach(node: Reacher, setting: str, joined: bool) -> bool:
    """Serve the dial-back routes, find out whether the swarm can dial us (`setting`: auto,
    yes, no) and run outbound-only if not. True: reachable."""
    if setting == "yes" or (setting == "auto" and not joined):
        return True  # a swarm's first peer: nobody to ask; its joiners dial it anyway
    if setting == "auto":
        verdict, why = await ask_dialback(node)
        if verdict is None:
            log.info("reach check: no member could dial back; taking %s as dialable", node.addr)
            return True
        if verdict:
            return True
    node.membership.set_meta(**{REACH: OUTBOUND})
    if setting == "no":
        log.info("running outbound-only (--reachable no): this peer starts every exchange")
        return False
    _say_outbound(node.addr, why)
    return False


def _say_outbound(addr: str, why: str, fix: str = "") -> None:
    """The one line that says this peer cannot be dialled, and what to do about it."""
    port = addr.rpartition(":")[2]
    log.info(
        "the swarm cannot dial this peer at %s (%s): running outbound-only, it starts every "
        "exchange itself and nobody dials it. To be dialled too: %sforward port %s to this "
        "machine, or pass --advertise HOST:PORT with the address the others reach",
        addr,
        why,
        fix,
        port,
    )


class ReachWatch:
    """Reruns the self-check when its answer may have changed (the module doc says when);
    `step` is one look, `run` looks every `WATCH_S` for good. Only for `--reachable auto`."""

    def __init__(
        self,
        node: Reacher,
        clock: Callable[[], float] = time.monotonic,
        current_addr: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.node, self.clock = node, clock
        self.current_addr = current_addr or (lambda: _current_addr(node))
        self.dialled_at = self.checked_at = clock()
        self.moved_to: str | None = None  # the address last found in place of ours
        self.rechecks = 0

    def dialled(self) -> None:
        """A member's request reached us: the swarm can dial us, for now."""
        self.dialled_at = self.clock()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            await self.step()

    async def step(self) -> None:
        why = await self.reason()
        if why is not None:
            await self.recheck(why)

    async def reason(self) -> str | None:
        """Why the check should run again now, or None."""
        node, now = self.node, self.clock()
        moved = await self.current_addr()
        if moved is not None and moved != node.addr and moved != self.moved_to:
            self.moved_to = moved
            return f"this host's address is now {moved}, the swarm dials {node.addr}"
        if node.reachable:
            quiet = now - max(self.dialled_at, self.checked_at)
            if quiet >= QUIET_S and node.membership.live_peers():
                return f"no member dialled this peer in {quiet:.0f} s"
        elif now - self.checked_at >= OUTBOUND_RECHECK_S:
            return "outbound-only: checking whether the swarm can dial this peer now"
        return None

    async def recheck(self, why: str) -> None:
        """Ask again, and change the peer's word where the verdict changed."""
        node = self.node
        self.checked_at = self.clock()
        self.rechecks += 1
        verdict, detail = await ask_dialback(node)
        if verdict is None or verdict == node.reachable:
            log.debug("reach check again (%s): unchanged (%s)", why, verdict)
            return
        node.reachable = verdict
        if verdict:
            node.membership.set_meta(**{REACH: DIRECT})
            log.info(
                "the swarm can dial this peer at %s again (%s): it is dialled again", node.addr, why
            )
            return
        node.membership.set_meta(**{REACH: OUTBOUND})
        fix = f"restart it to advertise {self.moved_to}, " if self.moved_to else ""
        _say_outbound(node.addr, f"{why}; {detail}", fix)


async def _current_addr(node: Reacher) -> str | None:
    """The address this host would advertise now, where the peer derived its own from a route
    (None where it was given, `--advertise` or a `--listen` host, or none can be found)."""
    cfg = node.cfg
    host, _ = parse_hostport(cfg.listen, "--listen")
    if cfg.advertise or host not in WILDCARDS:
        return None
    port = int(node.addr.rpartition(":")[2])
    try:
        found = await asyncio.to_thread(advertised, host, port, None, list(cfg.join))
    except ConfigError:
        return None  # no route right now: nothing to compare
    return found.addr


def watch_reach(node: Reacher) -> ReachWatch | None:
    """The watch of a peer whose reach is found (`--reachable auto`, signed), counting the
    members' requests that reach it; None where a flag forces the reach."""
    if node.cfg.reachable != "auto" or not node.cfg.sign_exchange:
        return None
    watch = ReachWatch(node)
    for route in INBOUND_ROUTES:
        inner = node._handlers.get(route)
        if inner is not None:
            node._handlers[route] = _counted(inner, watch)
    return watch


def _counted(inner: Handler, watch: ReachWatch) -> Handler:
    async def handler(req: Arrival) -> Any:
        out = await inner(req)  # counted once answered: a forged request raised before
        watch.dialled()
        return out

    # the mark says the server may hand the handler a push whose body still arrives (its
    # envelope's head verified) and send the answer meanwhile; lost here, every signed
    # push-pull of a `--reachable auto` peer waited for the whole push before its answer began
    # (over a link: the round took the two bodies' times, one after the other)
    return takes_arriving(handler) if is_takes_arriving(inner) else handler
