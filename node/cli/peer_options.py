"""The `swarmnode start` flags for the swarm side: listening, joining, gossip, exchange, faults."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields

from swarmnode.gossip.exchange.exchanger import ExchangeConfig
from swarmnode.node.peer.config import PeerConfig, parse_seeds
from swarmnode.node.train.config import NodeConfig

# Every default comes from the config dataclasses, the one place that keeps it.
_PEER = PeerConfig()
_EX = _PEER.exchange


def add_peer_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("swarm")
    s.add_argument(
        "--listen",
        default=_PEER.listen,
        metavar="HOST:PORT",
        help="address to serve on; port 0 picks a free port (printed when ready)",
    )
    s.add_argument(
        "--advertise",
        default=None,
        metavar="HOST:PORT",
        help="address other peers should dial, when it is not --listen (0.0.0.0, NAT)",
    )
    s.add_argument(
        "--join",
        default=None,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="any live peer(s) of a running swarm; without it this peer starts a swarm",
    )
    s.add_argument(
        "--join-timeout",
        type=float,
        default=_PEER.join_timeout,
        metavar="S",
        help="give up (exit 2) if no seed answers within S seconds",
    )
    s.add_argument(
        "--peer-id",
        default=None,
        help="expected peer id: refused unless it is the id of this peer's key "
        "(the id derives from the key kept in --checkpoint-dir, else a fresh one)",
    )
    s.add_argument(
        "--name",
        default=None,
        help="a human-readable name for this peer (1-64 letters, digits, '.', '_', '-'), "
        "signed into its member record and shown by status; not unique, not an identity",
    )
    s.add_argument(
        "--max-members-per-host",
        type=int,
        default=_PEER.max_members_per_host,
        metavar="N",
        help="list at most N live members per host (their advertised host, and the address "
        "that introduced them): bounds the identities one machine, e.g. an insider holding "
        "--secret, can fill the table with; peers sharing an address (one host, one NAT) "
        "share it too, so keep N above the peers you run behind one address",
    )
    s.add_argument(
        "--admission",
        choices=("open", "secret", "trust"),
        default=None,
        help="who may join: open (anyone), secret (holders of --secret), trust (the keys of "
        "--trust FILE); default: trust with --trust, secret with --secret, else open",
    )
    s.add_argument(
        "--trust",
        default=None,
        metavar="FILE",
        help="allow-list of peer public keys, one 64-hex-digit key a line "
        "(each peer logs its own at start)",
    )
    s.add_argument(
        "--gossip-interval",
        type=float,
        default=_PEER.gossip_interval,
        metavar="S",
        help="seconds between two membership gossip rounds",
    )
    s.add_argument("--fanout", type=int, default=_PEER.fanout, help="peers gossiped to per round")
    s.add_argument(
        "--ready-file",
        default=None,
        metavar="PATH",
        help='write {"peer_id", "name", "addr", "pid"} as JSON to PATH once serving',
    )
    s.add_argument(
        "--secret",
        default=os.environ.get("SWARMNODE_SECRET"),
        help="swarm secret: every message carries an HMAC-SHA256 with it, bound to its "
        "route and receiver (default: $SWARMNODE_SECRET)",
    )
    s.add_argument(  # a benchmark's baseline, not an option for a swarm: hidden from --help
        "--unsigned-exchange-for-bench",
        dest="sign_exchange",
        action="store_false",
        default=_PEER.sign_exchange,
        help=argparse.SUPPRESS,
    )
    s.add_argument(
        "--enable-admin",
        action="store_true",
        default=_PEER.enable_admin,
        help="serve the fault-injection routes /v1/admin/{fault,byzantine,slowdown} "
        "(chaos runs); each request must be signed with the operator key of --admin-key",
    )
    s.add_argument(
        "--admin-key",
        default=os.environ.get("SWARMNODE_ADMIN_KEY", _PEER.admin_key),
        metavar="FILE",
        help="the operator's Ed25519 public key (PEM) that admin requests must be signed "
        "with; make one with `swarmnode keygen` (default: $SWARMNODE_ADMIN_KEY)",
    )
    e = p.add_argument_group("exchange")
    e.add_argument(
        "--exchange",
        default=_EX.mode,
        choices=["average", "robust"],
        help="average: push-pull with --group peers at once and take the mean; robust: pull "
        "--pull peers and aggregate with --aggregator; both then take an outer step "
        "(--outer-lr, --outer-momentum)",
    )
    e.add_argument(
        "--sync-every",
        type=int,
        default=_EX.sync_every,
        metavar="K",
        help="local steps between two exchanges (a minimum: a slow round delays the next)",
    )
    e.add_argument(
        "--max-lead",
        type=float,
        default=_PEER.max_lead,
        metavar="R",
        help="a peer takes at most R x --sync-every steps past its last completed round, then "
        "waits for the next one (a failed round counts: a dead partner never stops training); "
        "the wait shows as `utilization` in the summary, status and /metrics. 0: no bound "
        "(a peer faster than its network then trains mostly alone); otherwise >= 1",
    )
    e.add_argument(
        "--group",
        type=int,
        default=_EX.group,
        metavar="K",
        help="average: peers pushed to per round; the initiator takes the mean of all K+1 "
        "models (1: pairwise AD-PSGD, the old behaviour)",
    )
    e.add_argument(
        "--lr-scale",
        default=_PEER.lr_scale,
        choices=["none", "sqrt", "linear", "adaptive"],
        help="scale --lr with the swarm size n (live peers + 1): linear x n (Goyal et al. "
        "2017), sqrt x sqrt(n), adaptive x the gain ratio measured from this peer's gradient "
        "noise (AdaScale, Johnson et al. 2020: between 1 and n), none. linear reaches a target "
        "in about half the steps when one peer with an n x batch trains better at n x --lr "
        "(check that first: it collapsed a conv net whose lr had no headroom); alone, n = 1 "
        "and --lr is used as is",
    )
    e.add_argument(
        "--lr-scale-max",
        type=int,
        default=_PEER.lr_scale_max,
        metavar="N",
        help="count at most N peers in --lr-scale (bounds what listed peers can buy)",
    )
    e.add_argument(
        "--lr-warmup",
        type=int,
        default=_PEER.lr_warmup,
        metavar="STEPS",
        help="the scaled lr rises to its target over STEPS steps (also after peers join); "
        "it falls at once when peers leave",
    )
    e.add_argument(
        "--outer-lr",
        type=float,
        default=_EX.outer_lr,
        metavar="LR",
        help="outer step on the mixed model after each own round, in (0, 2] "
        "(1 with --outer-momentum 0: plain averaging, the old behaviour)",
    )
    e.add_argument(
        "--outer-momentum",
        type=float,
        default=_EX.outer_momentum,
        metavar="B",
        help="Nesterov momentum of the outer step, in [0, 1)",
    )
    e.add_argument(
        "--pull", type=int, default=_EX.pull, metavar="K", help="robust: peers pulled per exchange"
    )
    e.add_argument(
        "--aggregator",
        default=_EX.aggregator,
        help="robust: ss-clip (self-centered clipping, the default), krum, multi-krum, median, "
        "trimmed-mean, centered-clip or mean",
    )
    e.add_argument(
        "--backward-limit",
        type=float,
        default=_EX.backward_limit,
        metavar="C",
        help="robust (ss-clip): a model's pull back along my outer momentum m is cut to "
        "C x |m| (0: off; gossip/robust/heading.py)",
    )
    e.add_argument(
        "--byzantine-f",
        type=int,
        default=_EX.byzantine_f,
        metavar="F",
        help="robust: lying peers the aggregator must tolerate",
    )
    e.add_argument(
        "--exchange-timeout",
        type=float,
        default=_EX.timeout,
        metavar="S",
        help="deadline of every exchange request",
    )
    e.add_argument(
        "--mix",
        type=float,
        default=_EX.mix,
        metavar="W",
        help="weight of the received model: x <- (1-W) x + W y",
    )
    e.add_argument(
        "--mix-rule",
        default="delta" if _EX.delta_rule else "replace",
        choices=["delta", "replace"],
        help="how a round's result lands. delta: the group's mean (robust: the aggregate) is "
        "taken with the model the round started from, and the steps trained while the round "
        "was in flight are kept whole; replace: x <- (1-w) x + w mean(y) on the model as it is "
        "when the round ends, which scales those steps by 1-w (robust: drops them; the "
        "behaviour before: on slow links most of a round's training is lost)",
    )
    e.add_argument(
        "--on-short",
        default=_EX.on_short,
        choices=["skip", "shrink"],
        help="robust round with too few answers: skip it, or lower f to fit",
    )
    s.add_argument(
        "--compress",
        default=_EX.compress,
        metavar="none|fp16|int8|topk:RATIO|lowrank:RANK",
        help="what push-pulls carry: compressed differences against a reference shared per "
        "pair, with error feedback (topk, lowrank: average mode only); lowrank:R sends each "
        "weight matrix as rank-R fp16 factors (R in 1..64; about 2R(rows+cols) bytes a "
        "matrix); fp16/int8 also quantise the models that pulls answer with",
    )
    s.add_argument(
        "--prefer-fast",
        type=float,
        default=_PEER.prefer_fast,
        metavar="FLOOR",
        help="0: pick exchange partners uniformly; in (0, 1]: prefer partners on quick links "
        "(measured), a slow one keeping at least FLOOR of a quick one's chance",
    )
    _add_intake_options(p)
    f = p.add_argument_group("fault injection")
    f.add_argument(
        "--fault",
        default=_PEER.fault,
        metavar="SPEC",
        help="transport faults, e.g. drop=0.1,delay=50ms,jitter=10ms,duplicate=0.05,"
        "corrupt=0.01,bandwidth=10MB/s",
    )
    f.add_argument(
        "--byzantine",
        default=None,
        metavar="KIND[:PARAM]",
        help="serve poisoned parameters: sign-flip, gaussian, alie, ipm, label-flip, "
        "mimic, nan, huge, garbage",
    )
    f.add_argument(
        "--slowdown",
        type=float,
        default=_PEER.slowdown,
        metavar="FACTOR",
        help="train FACTOR times slower than this machine can (a straggler)",
    )
    f.add_argument(
        "--step-time",
        type=float,
        default=_PEER.step_time,
        metavar="S",
        help="simulated compute: every step takes at least S seconds (paces this peer like a "
        "compute-bound GPU peer whatever else loads the machine; 0: off)",
    )


def _add_intake_options(p: argparse.ArgumentParser) -> None:
    """How this peer reads request bodies: the slow-body defence (node/net/intake.py). The
    defaults fit links of ~10 Mbit/s and up for one body at a time; a slow link that carries
    several uncompressed models at once needs a lower rate (or --compress)."""
    b = p.add_argument_group("request bodies (slow links)")
    b.add_argument(
        "--max-body-mb",
        type=float,
        default=_PEER.max_body_mb,
        metavar="MB",
        help="largest request body this peer reads, in MB",
    )
    b.add_argument(
        "--body-grace-s",
        type=float,
        default=_PEER.body_grace_s,
        metavar="S",
        help="seconds every body may take on top of its size / --body-min-rate",
    )
    b.add_argument(
        "--body-min-rate",
        type=float,
        default=_PEER.body_min_rate,
        metavar="BYTES/S",
        help="a body that arrives slower than this (after --body-grace-s) is cut off with 408: "
        "the defence against peers that trickle bodies to hold the exchange; lower it on "
        "links slower than ~10 Mbit/s per concurrent exchange",
    )


def peer_config_from_args(args: argparse.Namespace, base: NodeConfig) -> PeerConfig:
    """The single-peer settings of `base` plus the swarm flags of `args`."""
    common = {f.name: getattr(base, f.name) for f in fields(NodeConfig)}
    exchange = ExchangeConfig(
        mode=args.exchange,
        sync_every=args.sync_every,
        pull=args.pull,
        aggregator=args.aggregator,
        byzantine_f=args.byzantine_f,
        group=args.group,
        outer_lr=args.outer_lr,
        outer_momentum=args.outer_momentum,
        backward_limit=args.backward_limit,
        timeout=args.exchange_timeout,
        mix=args.mix,
        on_short=args.on_short,
        compress=args.compress,
        delta_rule=args.mix_rule == "delta",
    )
    return PeerConfig(
        **common,
        listen=args.listen,
        advertise=args.advertise,
        join=parse_seeds(args.join),
        join_timeout=args.join_timeout,
        peer_id=args.peer_id,
        name=args.name,
        gossip_interval=args.gossip_interval,
        fanout=args.fanout,
        max_members_per_host=args.max_members_per_host,
        exchange=exchange,
        secret=args.secret,
        admission=args.admission,
        trust_file=args.trust,
        enable_admin=args.enable_admin,
        sign_exchange=args.sign_exchange,
        admin_key=args.admin_key,
        fault=args.fault,
        byzantine=args.byzantine,
        slowdown=args.slowdown,
        step_time=args.step_time,
        max_lead=args.max_lead,
        lr_scale=args.lr_scale,
        lr_scale_max=args.lr_scale_max,
        lr_warmup=args.lr_warmup,
        prefer_fast=args.prefer_fast,
        max_body_mb=args.max_body_mb,
        body_grace_s=args.body_grace_s,
        body_min_rate=args.body_min_rate,
        ready_file=args.ready_file,
    ).validate()
