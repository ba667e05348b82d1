"""How the collectives suite's time grows with the world: gloo ranks on this host's CPU.

    python benchmarks/collectives_scaling.py OUT.json [--ranks 2,3,4] [--repeats 3]

Runs the suite's own launcher (`rocm_validate.collectives.launch`, the CPU plan) at each world
size and splits each run's wall time into what the ranks timed (the collectives at every size;
the peer-to-peer copies, pair by pair) and the rest: starting and joining the ranks, the checks,
the barrier before each pair. Then fits, over the world sizes,

    rest(n) = fixed + per_rank x n + per_pair x n(n-1)/2

(least squares), the terms `rocm_validate.node.budget.CollectivesCost` projects to 8 GPUs with
(docs/node.md, "Time"). On a machine with fewer cores than ranks the ranks share cores, which
makes every term an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocm_validate.collectives.launch import launch
from rocm_validate.collectives.plan import CPU_PLAN, cpu_world


def calls(plan: Any) -> int:
    """Calls of one step or pair: the checked call, the warmup, the timed rounds."""
    return 1 + plan.warmup + plan.rounds * plan.iters


def one_run(ranks: int, log_dir: Path) -> dict[str, float]:
    started = time.perf_counter()
    outcome = launch(CPU_PLAN, cpu_world(ranks), os.environ, log_dir)
    wall = time.perf_counter() - started
    if outcome.problems:
        raise SystemExit(f"{ranks} ranks: {'; '.join(outcome.problems)}")
    steps = sum(calls(CPU_PLAN) * statistics.fmean(s.seconds) for s in outcome.steps if s.seconds)
    pairs = sum(calls(CPU_PLAN) * statistics.fmean(p.seconds) for p in outcome.pairs if p.seconds)
    return {"wall_s": wall, "collectives_s": steps, "pairs_s": pairs, "rest_s": wall - steps - pairs}


def fit(points: list[tuple[int, float]]) -> dict[str, float]:
    """Least squares of rest(n) = fixed + per_rank n + per_pair n(n-1)/2 (normal equations)."""
    rows = [(1.0, float(n), n * (n - 1) / 2) for n, _ in points]
    ys = [y for _, y in points]
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    # Gaussian elimination on the 3 x 3 system.
    m = [row[:] + [v] for row, v in zip(ata, aty)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(3):
            if r != col and m[col][col]:
                factor = m[r][col] / m[col][col]
                m[r] = [a - factor * b for a, b in zip(m[r], m[col])]
    fixed, per_rank, per_pair = (m[i][3] / m[i][i] for i in range(3))
    return {"fixed_s": fixed, "per_rank_s": per_rank, "per_pair_s": per_pair}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", default="2,3,4")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.ranks.split(",")]
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="collectives-scaling-") as logs:
        for _ in range(args.repeats):
            for n in sizes:
                result = one_run(n, Path(logs) / f"{n}-{len(runs.get(str(n), []))}")
                runs.setdefault(str(n), []).append(result)
                print(f"{n} ranks: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
    medians = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
    model = fit([(int(n), m["rest_s"]) for n, m in medians.items()])
    data = {
        "what": "the collectives suite's time by world size, gloo ranks on the CPU (CPU plan)",
        "host": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "plan": {"sizes": list(CPU_PLAN.sizes), "calls_per_step": calls(CPU_PLAN), "p2p_bytes": CPU_PLAN.p2p_bytes},
        "runs": runs,
        "medians": medians,
        "rest_fit": model,
    }
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps({"medians": medians, "rest_fit": model}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
