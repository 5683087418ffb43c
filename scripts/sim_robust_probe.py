"""Which direction tells an IPM liar from an honest non-iid peer? (scripts/sim_robust.py, probed)

Runs `sim_robust.py` with its arguments and, in every honest peer's own round, projects each
answer's difference x_j - x on three candidate "progress" directions of the receiver:
`mom` (minus its outer momentum: the mixed model's recent progress), `own` (its own model now
minus at its previous round: its last update, shard drift included) and `med` (the change of the
rows' coordinate-wise median between its rounds). Prints, per direction and for honest rows and
the liar's, the distribution of the cosine and of the projection in radii (p/tau) and in own
steps (p/step). Numbers quoted in docs/benchmarks.md "Robust mode against IPM".

    nice -n 5 .venv/bin/python scripts/sim_robust_probe.py --seed 0 --attack ipm:10
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim_robust as sr
import sim_swarm as sw

PREV_OWN: dict[int, np.ndarray] = {}
PREV_MED: dict[int, np.ndarray] = {}
STATS: dict[tuple[str, str, str], list[float]] = {}
CURRENT: list[Any] = [None, None]  # (peer index, id of its trainer) of the round under way
_record, _round = sr.record, sr.robust_round


def directions(i: int, rows: np.ndarray) -> dict[str, np.ndarray]:
    own = rows[0].astype(np.float64)
    med = np.median(rows.astype(np.float64), axis=0)
    m = -sw._anchor[CURRENT[1]][1].astype(np.float64)
    out = {"mom": m} if np.linalg.norm(m) > 0 else {}
    if i in PREV_OWN:
        out["own"] = own - PREV_OWN[i]
        out["med"] = med - PREV_MED[i]
    PREV_OWN[i], PREV_MED[i] = own.copy(), med
    return out


def record(rows: np.ndarray, who: list, liar: int | None, tau: float, st: dict) -> None:
    _record(rows, who, liar, tau, st)
    own = rows[0].astype(np.float64)
    dirs = directions(CURRENT[0], rows)
    step = float(np.linalg.norm(dirs["own"])) if "own" in dirs else 0.0
    for name, u in dirs.items():
        u = u / np.linalg.norm(u)
        for k, j in enumerate(who):
            d = rows[k + 1].astype(np.float64) - own
            p, tag = float(d @ u), "liar" if j == liar else "honest"
            STATS.setdefault((name, tag, "cos"), []).append(p / np.linalg.norm(d))
            STATS.setdefault((name, tag, "p/tau"), []).append(p / tau)
            if step > 0:
                STATS.setdefault((name, tag, "p/step"), []).append(p / step)


def robust_round(i: int, ts: list, *rest: Any) -> None:
    CURRENT[:] = [i, id(ts[i])]
    _round(i, ts, *rest)


def main() -> int:
    sr.record, sr.robust_round = record, robust_round
    sr.main()
    for key in sorted(STATS):
        v = np.array(STATS[key])
        p10, p50, p90 = np.percentile(v, [10, 50, 90])
        print(f"{' '.join(key):22} n={v.size:5d} mean {v.mean():7.3f} "
              f"p10 {p10:7.3f} p50 {p50:7.3f} p90 {p90:7.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
