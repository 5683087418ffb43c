"""`PeerConfig`: a training peer's settings plus how it joins, gossips and exchanges.

It extends `NodeConfig` (the single-peer training settings) so everything the trainer needs stays
in one place, and adds the network side. The options that set it are the table of
`start_options`. Its errors name a setting in backquotes (`` `max_lead` ``), never as a flag:
the front the caller used names it their way (naming.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from swarmnode.gossip.errors import ExchangeError
from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.gossip.membership import DEFAULT_PER_HOST, MembershipConfig
from swarmnode.node.train import MAX_STEP_S, ConfigError, NodeConfig
from swarmnode.node.train.lr import RULES as LR_RULES

LR_SCALES = ("auto", *LR_RULES)  # what `lr_scale` accepts; `lr_rule` is what runs

DEFAULT_LISTEN = "127.0.0.1:7070"
SHARD_AUTO = "auto"  # `shard = auto`: a joiner takes a shard no live member holds (shard_pick.py)
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # a peer's `name` (and the old `peer_id` form)


def parse_hostport(text: str, what: str = "address") -> tuple[str, int]:
    """'host:port' -> (host, port); raises ConfigError naming `what` on anything else."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{what} {text!r}: expected HOST:PORT with a port in 0-65535")
    return host.strip("[]"), int(port)


def parse_seeds(text: str | None, what: str = "`join` seed") -> list[str]:
    if not text:
        return []
    seeds = [s.strip() for s in text.split(",") if s.strip()]
    for s in seeds:
        _, port = parse_hostport(s, what)
        if port == 0:
            raise ConfigError(f"{what} {s!r}: port 0 cannot be dialled")
    return seeds


@dataclass
class PeerConfig(NodeConfig):
    """Settings of one swarm peer. `validate()` raises `ConfigError` on the first bad value."""

    listen: str = DEFAULT_LISTEN
    advertise: str | None = None
    reachable: str = "auto"  # auto | yes | no: node/peer/reach.py
    join: list[str] = field(default_factory=list)
    join_timeout: float = 30.0
    peer_id: str | None = None  # only a check: the id is the key's (node/peer/identity.py)
    name: str | None = None  # human-readable, signed into the member meta; not an identity
    gossip_interval: float = 0.5
    fanout: int = 3
    # live members per host (advertised, or introducing address): swarmnode.gossip.membership.caps
    max_members_per_host: int = DEFAULT_PER_HOST
    max_members_per_prefix: int = 0  # live members per /24 or /64 (0: 4 x per host)
    suspect_after: float | None = None  # None: the membership module's defaults
    dead_after: float | None = None
    exchange: ExchangeConfig = field(default_factory=ExchangeConfig)
    secret: str | None = None
    admission: str | None = None  # open|secret|trust; None: trust with a trust file, secret
    trust_file: str | None = None  # with a secret, else open (see `admission_mode`)
    fault: str = ""
    byzantine: str | None = None
    slowdown: float = 1.0
    step_time: float = 0.0  # simulated compute: each step takes at least this long (s)
    # Bounded staleness: a peer in a swarm takes at most max_lead x sync_every steps past its
    # last completed (or failed) round, then waits for the next (0: no bound, where a peer
    # faster than its network trains alone between rare rounds).
    max_lead: float = 2.0
    # The local lr scaled with the swarm size (node/train/lr/scale.py): none|sqrt|linear of
    # n = live members + 1, or adaptive (the measured gain ratio, between 1 and n; lr/gain.py),
    # n capped at lr_scale_max, reached by a warm-up of lr_warmup steps (NodeConfig's: the lr
    # schedule's warm-up too).
    # auto (the default): sqrt where the lr schedule decays (`lr_kind` cosine or linear), none
    # where it is constant. Under cosine, x sqrt(n) put the worst peer within 2 points of one
    # peer on every task of the portfolio, paced and at full speed (docs/benchmarks.md, "The lr
    # default"); at a constant lr the larger step spiked late (issue 30's held-out swarm, paced)
    # and linear collapsed a conv net whose lr had no headroom ("The lr scaled with the swarm").
    lr_scale: str = "auto"
    lr_scale_max: int = 8
    # 0: exchange partners uniformly; in (0, 1]: prefer quick links, a slow partner keeping at
    # least this share of a quick one's chance (gossip.link.stats.prefer_fast)
    prefer_fast: float = 0.0
    ready_file: str | None = None
    max_body_mb: float = 1024.0
    # Admin routes (runtime faults): off unless enabled, and then only for requests signed by
    # the operator key whose public half is in `admin_key` (node/peer/admin_routes.py).
    enable_admin: bool = False
    admin_key: str | None = None
    # False only for the unsigned baseline of scripts/bench/exchange/throughput.py: params
    # and pushpull then take requests from anyone, in any member's name (what signing exists
    # to prevent).
    sign_exchange: bool = True
    # A request body must arrive within body_grace_s + size / body_min_rate seconds, else it is
    # cut off (node/net/intake.py: a trickled body once held the exchange slots).
    body_grace_s: float = 5.0
    body_min_rate: float = float(1 << 20)
    # `shard = "auto"` sets this (and a placeholder shard): the Node asks the swarm before it
    # builds its trainer, and takes the lowest shard of the swarm's count no live member holds
    shard_auto: bool = False

    def __post_init__(self) -> None:
        if self.shard == SHARD_AUTO:
            self.shard, self.shard_auto = (0, 1), True
        super().__post_init__()

    @property
    def lr_rule(self) -> str:
        """The lr scale rule that runs: `lr_scale`, with `auto` resolved to sqrt where the lr
        schedule decays and to none where it is constant (see the field's comment)."""
        if self.lr_scale != "auto":
            return self.lr_scale
        return "none" if self.lr_kind == "constant" else "sqrt"

    def membership(self) -> MembershipConfig:
        """The gossip and failure-detector settings these options give."""
        timings = {"suspect_after": self.suspect_after, "dead_after": self.dead_after}
        kw = {k: v for k, v in timings.items() if v is not None}  # None: membership's defaults
        return MembershipConfig.for_interval(
            self.gossip_interval,
            fanout=self.fanout,
            max_members_per_host=self.max_members_per_host,
            max_members_per_prefix=self.max_members_per_prefix,
            **kw,
        )

    def validate(self) -> PeerConfig:
        super().validate()
        parse_hostport(self.listen, "`listen`")
        if self.advertise is not None:
            host, port = parse_hostport(self.advertise, "`advertise`")
            if port == 0 or host in ("0.0.0.0", "::"):
                raise ConfigError(
                    f"`advertise` {self.advertise!r}: give an address others can dial"
                )
        if isinstance(self.join, str):
            self.join = parse_seeds(self.join)
        if self.reachable not in ("auto", "yes", "no"):
            raise ConfigError(f"`reachable` {self.reachable!r}: give auto, yes or no")
        if self.shard_auto and not self.join:
            raise ConfigError(
                "`shard` auto needs `join`: it takes a shard that no live member of the swarm "
                "holds (start the swarm's first peer with `shard` 0/COUNT)"
            )
        checks = {
            "join_timeout": self.join_timeout > 0,
            "gossip_interval": self.gossip_interval > 0,
            "fanout": self.fanout >= 1,
            "max_members_per_host": self.max_members_per_host >= 1,
            "max_members_per_prefix": self.max_members_per_prefix >= 0,
            "slowdown": self.slowdown >= 1,
            "step_time": 0 <= self.step_time <= MAX_STEP_S,
            # below 1 the bound would fall before the next round's start step: a deadlock
            "max_lead": self.max_lead == 0 or 1 <= self.max_lead <= 1000,
            "lr_scale": self.lr_scale in LR_SCALES,
            "lr_scale_max": 1 <= self.lr_scale_max <= 1024,
            "prefer_fast": 0 <= self.prefer_fast <= 1,
            "max_body_mb": self.max_body_mb > 0,
            "body_grace_s": self.body_grace_s > 0,
            "body_min_rate": self.body_min_rate > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"`{name}` has an invalid value: {getattr(self, name)!r}")
        if self.name is not None and not NAME_RE.match(self.name):
            raise ConfigError(f"`name` {self.name!r}: use 1-64 letters, digits, '.', '_' or '-'")
        if self.secret is not None and not self.secret.strip():
            # "" is no secret: the swarm would be open while its operator believes it closed
            raise ConfigError(
                "`secret` is empty: give the swarm's shared secret, or leave it unset for an "
                "open swarm"
            )
        mode = self.admission_mode
        if mode not in ("open", "secret", "trust"):
            raise ConfigError(f"`admission` {mode!r}: use open, secret or trust")
        if mode == "secret" and not self.secret:
            raise ConfigError("`admission` secret needs `secret` (the swarm's shared secret)")
        if mode == "trust" and not self.trust_file:
            raise ConfigError("`admission` trust needs `trust` (a file of public keys, one a line)")
        if self.enable_admin and not self.admin_key:
            raise ConfigError(
                "`enable_admin` needs `admin_key` (a file with the operator's Ed25519 public key): "
                "unsigned admin requests would let any local user sabotage this peer"
            )
        try:
            self.exchange.validate()
        except ExchangeError as exc:  # report it the way every other bad option is reported
            raise ConfigError(str(exc)) from None
        return self

    @property
    def admission_mode(self) -> str:
        if self.admission is not None:
            return self.admission
        return "trust" if self.trust_file else "secret" if self.secret else "open"
