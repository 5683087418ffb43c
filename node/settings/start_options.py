"""Every option of `swarmnode start`, each written once (see `options.py`): its flag, its key
in a `--config` file, its `SWARMNODE_<OPTION>` variable, its Python keyword and its
`--print-config` line are made from the entry below, and so is docs/options.md
(scripts/docs/options.py); its default is the config dataclass field's (`NodeConfig`,
`PeerConfig`, `ExchangeConfig`).

Help says what a value does and when to choose it; how a default was found belongs in
docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from swarmnode.gossip.exchange import ExchangeConfig
from swarmnode.node.settings.config import LR_SCALES, SHARD_AUTO, PeerConfig, parse_seeds
from swarmnode.node.settings.options import Option, OptionSet, Resolved, parse_float, parse_int
from swarmnode.node.train import LR_SCHEDULES, ConfigError
from swarmnode.node.train.data import Partition, parse_partition, parse_shard

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_DEFAULTS = {"log_level": "INFO", "log_json": False}


def _shard(text: str) -> Any:
    return SHARD_AUTO if text.strip() == SHARD_AUTO else parse_shard(text)


def _show_shard(value: Any) -> str:
    return value if isinstance(value, str) else f"{value[0]}/{value[1]}"


def _shard_pair(value: Any) -> tuple[int, int]:
    """`shard=(INDEX, COUNT)` from Python."""
    if isinstance(value, tuple | list) and len(value) == 2 and all(type(v) is int for v in value):
        return parse_shard(f"{value[0]}/{value[1]}")
    raise ConfigError(f"expected 'INDEX/COUNT', 'auto' or a pair (INDEX, COUNT), got {value!r}")


def _partition(value: Any) -> Partition:
    if isinstance(value, Partition):
        return value
    raise ConfigError(f"expected 'iid' or 'dirichlet:ALPHA', got {value!r}")


def _path(value: Any) -> str:
    """A path given as a `pathlib.Path` (or any os.PathLike) from Python."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ConfigError(f"expected a path, got {value!r}")


def _anything(value: Any) -> Any:
    """`model=` and `data=` from Python: an object, a factory, arrays (node/train/sources.py
    says what each may be)."""
    return value


def _mix_rule(text: str) -> bool:
    return text == "delta"


def _on_off(text: str) -> bool:
    return text == "on"


def _opts(group: str, *options: Option) -> list[Option]:
    return [dataclasses.replace(o, group=group) for o in options]


def _num(key: str, help: str, metavar: str | None = None, **kw: Any) -> Option:
    return Option(key, help, parse=parse_float, kind=float, metavar=metavar, **kw)


def _int(key: str, help: str, metavar: str | None = None, **kw: Any) -> Option:
    return Option(key, help, parse=parse_int, kind=int, metavar=metavar, **kw)


LOG_OPTIONS = _opts(
    "logging",
    Option(
        "log-level",
        "verbosity of the log on stderr: INFO says joins, leaves, deaths and refused strangers "
        "once each; WARNING only what an operator should act on",
        choices=LOG_LEVELS,
        parse=str.upper,
    ),
    Option(
        "log-json",
        "log one JSON object a line (time, level, peer, logger, message) instead of text",
        switch=True,
    ),
)

TRAINING = (
    _opts(
        "model and data",
        Option(
            "model",
            "model spec, e.g. mlp:128, mlp:256,128, cnn1d:16k5,p2,64 or cnn2d:16k3,p2,32k3,p2,64 "
            "(a 2-D conv net on (H, W) or (H, W, C) images; flat samples name the image first: "
            "cnn2d:8x8,16k3,p2,64), or MODULE:FUNCTION, a factory of your own model on PYTHONPATH "
            "or in the current directory (both: docs/models.md)",
            native=_anything,
            common=True,
        ),
        Option(
            "data",
            "'digits' (bundled), 'synthetic:N,D,C[,SEED]', 'signal:N,L,C[,SEED]' (a harder seeded "
            "task: 1-D signals of length L, C classes, 10% label noise, where a shard alone "
            "overfits), a path to an .npz with X_train, y_train, X_test, y_test, a folder of those "
            "four as .npy files (the inputs are streamed from disk: a set larger than memory "
            "trains), or MODULE:FUNCTION, a function of yours that returns them",
            native=_anything,
            common=True,
        ),
        Option(
            "shard",
            "train on shard INDEX of COUNT (0/1: the whole train set); auto: a joining peer takes "
            "the lowest shard that no live member of the swarm holds (the swarm's peers must have "
            "been started with --shard I/COUNT)",
            parse=_shard,
            show=_show_shard,
            metavar="INDEX/COUNT|auto",
            native=_shard_pair,
        ),
        Option(
            "partition",
            "how the train set is split into shards: iid, or non-iid by label with Dirichlet "
            "concentration ALPHA (small = skewed)",
            parse=parse_partition,
            metavar="iid|dirichlet:ALPHA",
            native=_partition,
        ),
    )
    + _opts(
        "training",
        _int(
            "steps",
            "total optimizer steps; 0: train until stopped (SIGINT/SIGTERM). A resumed "
            "run, or a peer that joins a swarm, continues the step counter up to this count",
            common=True,
        ),
        _int("batch-size", "minibatch size", "N"),
        _num("lr", "learning rate", "LR"),
        Option("optimizer", "sgd or adamw", choices=("sgd", "adamw")),
        _num("momentum", "SGD momentum (ignored by adamw)", "B"),
        # --- the lr schedule: one block, carried over as it is ---
        Option(
            "lr-schedule",
            "the lr on the swarm's step counter (a joiner continues the swarm's, a resumed run "
            "its own): constant, or after the warm-up a cosine or linear decay from --lr to "
            "--lr-floor x --lr at step --lr-decay-steps (else --steps); auto: cosine where "
            "that step lies past the warm-up, constant where there is none (--steps 0); lr = "
            "--lr x the --lr-scale x this",
            choices=LR_SCHEDULES,
        ),
        _int(
            "lr-warmup",
            "cosine/linear: the lr rises linearly to its peak over the first STEPS steps of "
            "the swarm's counter (a joiner past them does not warm up again); with --lr-scale, "
            "the scale rises over STEPS steps after peers join (it falls at once when peers "
            "leave). 0: off",
            "STEPS",
        ),
        _num(
            "lr-floor",
            "cosine/linear: the lr at the end of the decay (and after it), as a fraction of "
            "--lr, in (0, 1]",
            "F",
        ),
        _int(
            "lr-decay-steps",
            "cosine/linear: the step of the swarm's counter at which the decay reaches "
            "--lr-floor; 0: --steps (needed with --steps 0)",
            "N",
        ),
        # --- end of the lr schedule block ---
        _num("weight-decay", "weight decay (L2 for sgd, decoupled for adamw)", "W"),
        _num(
            "logit-adjust",
            "on a --shard whose labels are skewed (dirichlet), train on logits + TAU x log(shard "
            "prior / whole set's prior), so that the model does not learn its shard's class mix "
            "and stays close to the swarm's between mixes; 0: off, 1: the full adjustment (no "
            "effect alone or on all of the data)",
            "TAU",
        ),
        Option(
            "device",
            "auto, cpu, cuda or cuda:N (auto: cuda when cupy and a GPU are present)",
            common=True,
        ),
        _int("seed", "seed for initialisation, shuffling and sharding", "N"),
    )
    + _opts(
        "output and checkpoints",
        _int("eval-every", "evaluate on the test split and print a line every N steps", "N"),
        Option(
            "checkpoint-dir",
            "directory for checkpoints and this peer's key; the run resumes from the newest "
            "checkpoint found there",
            metavar="DIR",
            native=_path,
            common=True,
        ),
        _int("checkpoint-every", "checkpoint every N steps (needs --checkpoint-dir)", "N"),
        _int("keep-checkpoints", "how many checkpoints to keep", "N"),
        Option(
            "summary-json",
            "write the final metrics (test_accuracy, test_loss, steps, samples_per_s, device, "
            "wall_s) to PATH",
            metavar="PATH",
            native=_path,
        ),
    )
)

SWARM = _opts(
    "swarm",
    Option(
        "listen",
        "address to serve on; port 0 picks a free port (printed when ready); a wildcard "
        "(0.0.0.0) serves on every interface and advertises the address the route to the "
        "--join seed leaves from",
        metavar="HOST:PORT",
        common=True,
    ),
    Option(
        "advertise",
        "address other peers should dial, when it is not the one --listen finds (NAT, "
        "port forwarding)",
        metavar="HOST:PORT",
        common=True,
    ),
    Option(
        "reachable",
        "whether the swarm can dial this peer: auto (at the join a live member dials it back; "
        "if that fails it runs outbound-only: it starts every exchange and gossip itself and "
        "nobody dials it), yes (skip the check), no (outbound-only from the start)",
        choices=("auto", "yes", "no"),
    ),
    Option(
        "join",
        "any live peer(s) of a running swarm; without it this peer starts a swarm",
        field="join",
        parse=lambda text: parse_seeds(text, "seed"),
        show=",".join,
        metavar="HOST:PORT[,HOST:PORT...]",
        kind=list,
        common=True,
    ),
    _num("join-timeout", "give up (exit 2) if no seed answers within S seconds", "S"),
    Option(
        "peer-id",
        "expected peer id: refused unless it is the id of this peer's key (the id derives "
        "from the key kept in --checkpoint-dir, else a fresh one)",
    ),
    Option(
        "name",
        "a human-readable name for this peer (1-64 letters, digits, '.', '_', '-'), signed "
        "into its member record, shown by status and on every log line; not unique, not an "
        "identity",
        common=True,
    ),
    _int(
        "max-members-per-host",
        "list at most N live members per host (their advertised host, and the address that "
        "introduced them): bounds the identities one machine, e.g. an insider holding "
        "--secret, can fill the table with; peers sharing an address (one host, one NAT) "
        "share it too, so keep N above the peers you run behind one address",
        "N",
    ),
    _int(
        "max-members-per-prefix",
        "list at most N live members per /24 (IPv4) or /64 (IPv6) block, counted like "
        "--max-members-per-host (0: 4 x that): addresses within a block are cheap; keep N above "
        "the peers you run in one subnet",
        "N",
    ),
    Option(
        "admission",
        "who may join: open (anyone), secret (holders of --secret), trust (the keys of --trust "
        "FILE); default: trust with --trust, secret with --secret, else open",
        choices=("open", "secret", "trust"),
    ),
    Option(
        "trust",
        "allow-list of peer public keys, one 64-hex-digit key a line (each peer logs its own "
        "at start)",
        field="trust_file",
        metavar="FILE",
        native=_path,
    ),
    _num("gossip-interval", "seconds between two membership gossip rounds", "S"),
    _int("fanout", "peers gossiped to per round", "N"),
    Option(
        "ready-file",
        'write {"peer_id", "name", "addr", "pid"} as JSON to PATH once serving',
        metavar="PATH",
        native=_path,
    ),
    Option(
        "secret",
        "swarm secret: every message carries an HMAC-SHA256 with it, bound to its route and "
        "receiver (prefer $SWARMNODE_SECRET or a config file readable by you alone: a flag is "
        "visible to every user in the process list)",
        secret=True,
        common=True,
    ),
    Option(  # a benchmark's baseline, not an option for a swarm: hidden from --help
        "unsigned-exchange-for-bench",
        "",
        field="sign_exchange",
        switch=True,
        invert=True,
        hidden=True,
    ),
    Option(
        "enable-admin",
        "serve the fault-injection routes /v1/admin/{fault,byzantine,slowdown} (chaos runs); "
        "each request must be signed with the operator key of --admin-key",
        switch=True,
    ),
    Option(
        "admin-key",
        "the operator's Ed25519 public key (PEM) that admin requests must be signed with; "
        "make one with `swarmnode keygen`",
        metavar="FILE",
        native=_path,
    ),
    Option(
        "compress",
        "what push-pulls carry: compressed differences against a reference shared per pair, "
        "with error feedback (topk, topk2, lowrank: average mode only); lowrank:R sends each "
        "weight matrix as rank-R fp16 factors (R in 1..64; about 2R(rows+cols) bytes a matrix); "
        "topk2:D the largest D of every 4096 values (D in (0, 0.5]), each as 2 bits (sign, one "
        "of two levels) and a Rice-coded place: 0.41 bits a parameter at topk2:0.05 (79x); "
        "fp16/int8 also quantise the models that pulls answer with",
        field="exchange.compress",
        metavar="none|fp16|int8|topk:RATIO|topk2:DENSITY|lowrank:RANK",
    ),
    _num(
        "prefer-fast",
        "0: pick exchange partners uniformly; in (0, 1]: prefer partners on quick links "
        "(measured), a slow one keeping at least FLOOR of a quick one's chance",
        "FLOOR",
    ),
)

EXCHANGE = _opts(
    "exchange",
    Option(
        "exchange",
        "average: push-pull with --group peers at once and take the mean; robust: pull --pull "
        "peers and aggregate with --aggregator; both then take an outer step (--outer-lr, "
        "--outer-momentum)",
        field="exchange.mode",
        choices=("average", "robust"),
    ),
    _int(
        "sync-every",
        "local steps between two exchanges (a peer runs at most --max-lead x K steps past its "
        "last round, then waits)",
        "K",
        field="exchange.sync_every",
    ),
    _num(
        "max-lead",
        "a peer takes at most R x --sync-every steps past its last completed round, then waits "
        "for the next one (a failed round counts: a dead partner never stops training); the wait "
        "shows as `utilization` in the summary, status and /metrics. 0: no bound (a peer faster "
        "than its network then trains mostly alone); otherwise >= 1",
        "R",
    ),
    _int(
        "group",
        "average: peers pushed to per round; the initiator takes the mean of all K+1 models "
        "(1: pairwise AD-PSGD, the least traffic a round; more mixes faster)",
        "K",
        field="exchange.group",
    ),
    Option(
        "lr-scale",
        "scale --lr with the swarm size n (live peers + 1): linear x n (Goyal et al. 2017), "
        "sqrt x sqrt(n), adaptive x the gain ratio measured from this peer's gradient noise "
        "(AdaScale, Johnson et al. 2020: between 1 and n), none. linear reaches a target in "
        "about half the steps when one peer with an n x batch trains better at n x --lr "
        "(check that first: a model whose --lr is already near the largest that trains "
        "diverges when it is multiplied); auto: sqrt where --lr-schedule decays, none where "
        "the lr is constant; alone, n = 1 and --lr is used as is",
        choices=LR_SCALES,
    ),
    _int(
        "lr-scale-max",
        "count at most N peers in --lr-scale (bounds what listed peers can buy)",
        "N",
    ),
    _num(
        "outer-lr",
        "outer step on the mixed model after each own round, in (0, 2] (1 with "
        "--outer-momentum 0: plain averaging, no outer step)",
        "LR",
        field="exchange.outer_lr",
    ),
    _num(
        "outer-momentum",
        "Nesterov momentum of the outer step, in [0, 1)",
        "B",
        field="exchange.outer_momentum",
    ),
    _int("pull", "robust: peers pulled per exchange", "K", field="exchange.pull"),
    Option(
        "aggregator",
        "robust: ss-clip (self-centered clipping, the default), krum, multi-krum, median, "
        "trimmed-mean, centered-clip or mean",
        field="exchange.aggregator",
    ),
    _num(
        "backward-limit",
        "robust (ss-clip): a model's pull back along my outer momentum m is cut to C x |m| "
        "(0: off; gossip/robust/heading.py)",
        "C",
        field="exchange.backward_limit",
    ),
    _int(
        "byzantine-f",
        "robust: lying peers the aggregator must tolerate",
        "F",
        field="exchange.byzantine_f",
    ),
    _num(
        "exchange-timeout",
        "cap on every exchange request's deadline (a proven partner's push-pull gets what its "
        "measured link calls for: bytes / throughput x 4 + round trip, at least 1 s)",
        "S",
        field="exchange.timeout",
    ),
    _num("mix", "weight of the received model: x <- (1-W) x + W y", "W", field="exchange.mix"),
    Option(
        "mix-rule",
        "how a round's result lands. delta: the group's mean (robust: the aggregate) is taken "
        "with the model the round started from, and the steps trained while the round was in "
        "flight are kept whole; replace: x <- (1-w) x + w mean(y) on the model as it is when "
        "the round ends, which scales those steps by 1-w (robust: drops them), so on slow "
        "links much of the training done during a round is lost: choose it only to compare",
        field="exchange.delta_rule",
        parse=_mix_rule,
        show=lambda delta: "delta" if delta else "replace",
        choices=("delta", "replace"),
    ),
    Option(
        "push-budget",
        "the bounds on a hostile insider (on): each sender's pushes mixed about once a round of "
        "ours and moving us at most 2 radii over eight rounds, the push radius anchored, a "
        "group's answers clipped and cut where they pull away from the swarm, and a mix that "
        "kills hidden units, or jumps the loss and keeps it there, rolled back; off: none of "
        "these (only to measure what the bounds cost, in a swarm whose members are all trusted)",
        field="exchange.push_budget",
        parse=_on_off,
        show=lambda on: "on" if on else "off",
        choices=("on", "off"),
    ),
    Option(
        "on-short",
        "robust round with too few answers: skip it, or lower f to fit",
        field="exchange.on_short",
        choices=("skip", "shrink"),
    ),
)

BODIES = _opts(
    "request bodies (slow links)",
    _num("max-body-mb", "largest request body this peer reads, in MB", "MB"),
    _num("body-grace-s", "seconds every body may take on top of its size / --body-min-rate", "S"),
    _num(
        "body-min-rate",
        "a body that arrives slower than this (after --body-grace-s) is cut off with 408: the "
        "defence against peers that trickle bodies to hold the exchange; lower it on links "
        "slower than ~10 Mbit/s per concurrent exchange",
        "BYTES/S",
    ),
)

FAULTS = _opts(
    "fault injection",
    Option(
        "fault",
        "transport faults, e.g. drop=0.1,delay=50ms,jitter=10ms,duplicate=0.05,corrupt=0.01,"
        "bandwidth=10MB/s",
        metavar="SPEC",
    ),
    Option(
        "byzantine",
        "serve poisoned parameters: sign-flip, gaussian, alie, ipm, label-flip, mimic, nan, "
        "huge, garbage",
        metavar="KIND[:PARAM]",
    ),
    _num("slowdown", "train FACTOR times slower than this machine can (a straggler)", "FACTOR"),
    _num(
        "step-time",
        "simulated compute: every step takes at least S seconds (paces this peer like a "
        "compute-bound GPU peer whatever else loads the machine; 0: off)",
        "S",
    ),
)

START_OPTIONS = [*TRAINING, *SWARM, *EXCHANGE, *BODIES, *FAULTS]

# The project's `SWARMNODE_*` variables that are not options (a test keeps this list true):
# `start` refuses any other variable of the prefix that no option has.
OTHER_VARS = (
    "SWARMNODE_CONFIG",  # the --config file (node/cli/cmd_start.py)
    "SWARMNODE_NATIVE",  # 0: the numpy int8 codec instead of the C one (kernels/int8_native.py)
)

_PEER = PeerConfig()


def field_default(path: str) -> Any:
    """The dataclass default of a field path (`lr`, `exchange.timeout`), or a log default."""
    if path in LOG_DEFAULTS:
        return LOG_DEFAULTS[path]
    value: Any = _PEER
    for part in path.split("."):
        value = getattr(value, part)
    return value


@functools.cache
def start_options() -> OptionSet:
    """The options of `swarmnode start`: logging first, then the peer's."""
    return OptionSet([*LOG_OPTIONS, *START_OPTIONS], field_default)


@functools.cache
def log_options() -> OptionSet:
    """The options every verb takes (before or after the verb)."""
    return OptionSet(LOG_OPTIONS, field_default)


def build_config(resolved: Resolved) -> PeerConfig:
    """The `PeerConfig` the resolved options give (not yet validated)."""
    top: dict[str, Any] = {}
    exchange: dict[str, Any] = {}
    for opt in START_OPTIONS:
        value = resolved.values[opt.key]
        head, _, rest = opt.path.partition(".")
        if rest:
            exchange[rest] = value
        else:
            top[head] = value
    known = {f.name for f in fields(PeerConfig)}
    assert set(top) <= known, set(top) - known  # a typo in a field path is a bug here
    return PeerConfig(**top, exchange=ExchangeConfig(**exchange))


def check_node_table(
    data: Mapping[str, Any], where: str, exclude: Iterable[str] = ()
) -> dict[str, Any]:
    """A chaos scenario's [node] (or [[peer]]) table through the same loader as `--config`:
    unknown keys (with the nearest valid one), bad values and keys the runner sets are errors.
    Returns the table as given (keys with `-`), for the runner to pass on as flags."""
    start_options().load_table(data, where, exclude)
    return {k.replace("_", "-"): v for k, v in data.items()}


__all__ = [
    "LOG_OPTIONS",
    "START_OPTIONS",
    "build_config",
    "check_node_table",
    "log_options",
    "start_options",
]
