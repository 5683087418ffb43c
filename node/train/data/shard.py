"""Which training samples a peer owns: `iid` or label-skewed `dirichlet:ALPHA` shards.

Every peer computes the *whole* partition from the shared seed and keeps its own piece, so no
coordination is needed and the shards of all indices are disjoint and cover the train set
exactly. The partition depends only on (labels, count, scheme, seed) — never on the peer's own
index — which is what makes that guarantee hold.

`dirichlet:ALPHA` follows Hsu et al. 2019 ("Measuring the effects of non-identical data
distribution"): each class is split across shards in proportions drawn from Dir(ALPHA). Small
ALPHA (0.1) gives each peer a few dominant classes; large ALPHA (100) approaches iid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from swarmnode.node.train.errors import ConfigError, DataError

MAX_DIRICHLET_DRAWS = 200  # redraws before giving up on a partition with an empty shard


@dataclass(frozen=True)
class Partition:
    """A parsed `--partition` value."""

    scheme: str  # "iid" or "dirichlet"
    alpha: float = 0.0

    def __str__(self) -> str:
        return "iid" if self.scheme == "iid" else f"dirichlet:{self.alpha:g}"


def parse_partition(text: str) -> Partition:
    """`iid` or `dirichlet:ALPHA` (ALPHA > 0)."""
    text = text.strip()
    if text == "iid":
        return Partition("iid")
    name, sep, arg = text.partition(":")
    if name == "dirichlet" and sep:
        try:
            alpha = float(arg)
        except ValueError:
            alpha = float("nan")
        if not alpha > 0 or alpha == float("inf"):
            raise ConfigError(f"bad partition {text!r}: ALPHA must be a positive number")
        return Partition("dirichlet", alpha)
    raise ConfigError(
        f"bad partition {text!r}: expected 'iid' or 'dirichlet:ALPHA' (e.g. dirichlet:0.5)"
    )


def parse_shard(text: str) -> tuple[int, int]:
    """`INDEX/COUNT` with 0 <= INDEX < COUNT -> (index, count)."""
    index_s, sep, count_s = text.strip().partition("/")
    try:
        index, count = int(index_s), int(count_s)
    except ValueError:
        raise ConfigError(f"bad shard {text!r}: expected INDEX/COUNT, e.g. 0/4") from None
    if not sep or count < 1 or not 0 <= index < count:
        raise ConfigError(f"bad shard {text!r}: need COUNT >= 1 and 0 <= INDEX < COUNT")
    return index, count


def shard_indices(
    y: np.ndarray, n_shards: int, index: int, scheme: str | Partition = "iid", seed: int = 0
) -> np.ndarray:
    """Sorted indices into `y` of shard `index` out of `n_shards`."""
    part = scheme if isinstance(scheme, Partition) else parse_partition(scheme)
    if n_shards < 1 or not 0 <= index < n_shards:
        raise ConfigError(f"shard index {index} out of range for {n_shards} shard(s)")
    return all_shards(y, n_shards, part, seed)[index]


def all_shards(y: np.ndarray, n_shards: int, part: Partition, seed: int) -> list[np.ndarray]:
    """The whole partition: `n_shards` sorted, disjoint index arrays covering `range(len(y))`."""
    y = np.asarray(y)
    if n_shards > len(y):
        raise DataError(f"cannot split {len(y)} samples into {n_shards} non-empty shards")
    rng = np.random.default_rng([seed, n_shards, 0x5A4D])  # independent of the init/shuffle streams
    if part.scheme == "iid":
        shards = np.array_split(rng.permutation(len(y)), n_shards)
    else:
        shards = _dirichlet_shards(y, n_shards, part.alpha, rng)
    return [np.sort(s).astype(np.int64) for s in shards]


def _dirichlet_shards(
    y: np.ndarray, n_shards: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    # A very skewed draw can leave a shard empty, and a peer with no data cannot train; redraw
    # (deterministically: the same RNG stream) until every shard has a minimum size.
    min_size = max(1, min(10, len(y) // (2 * n_shards)))
    classes = np.unique(y)
    for _ in range(MAX_DIRICHLET_DRAWS):
        pieces: list[list[np.ndarray]] = [[] for _ in range(n_shards)]
        for c in classes:
            members = rng.permutation(np.flatnonzero(y == c))
            props = rng.dirichlet(np.full(n_shards, alpha))
            cuts = (np.cumsum(props)[:-1] * len(members)).astype(np.int64)
            for shard, chunk in enumerate(np.split(members, cuts)):
                pieces[shard].append(chunk)
        shards = [np.concatenate(p) for p in pieces]
        if min(len(s) for s in shards) >= min_size:
            return shards
    raise DataError(
        f"dirichlet:{alpha:g} left a shard with fewer than {min_size} samples after "
        f"{MAX_DIRICHLET_DRAWS} draws; use a larger ALPHA or fewer shards"
    )
