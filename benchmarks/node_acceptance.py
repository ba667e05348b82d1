"""Whole-node acceptance, in one call on a GPU machine:

    python benchmarks/node_acceptance.py --dir DIR [--single] [--suites correctness,perf,collectives] [-- PYTEST ARGS]

1. with --single: today's single-GPU run, `pytest --rocm-device=0` of the per-GPU suites (the reference verdicts);
2. the whole-node run, `pytest --rocm-device=all --rocm-suite=<suites>`: one pinned pytest-xdist worker per GPU,
   the collectives once over every GPU after them;
3. DIR/node-acceptance.json: wall times, outcomes per suite and per GPU, each GPU against its peers, the bus
   bandwidth of every collective at every size, the peer-to-peer matrix, and (with --single) every test and
   metric whose verdict on GPU 0 differs between the two runs.

Each run keeps its report (DIR/single.json, DIR/node.json) and markdown summary (DIR/*.md). On one GPU the
collectives skip (they need two) and the node run is the pinned-worker path on that GPU. Arguments after `--`
go to both pytest runs (e.g. `-- -k "not compiled"`). Exit status 1 when the node run fails or a verdict differs.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rocm_validate.results import jsonfile

REPO = Path(__file__).resolve().parents[1]  # pytest runs here, where suites/ and baselines/ are
SCHEMA: dict[str, Any] = {"title": "node acceptance", "type": "object", "required": ["runs", "busbw", "p2p"]}
_PAIR = re.compile(r"^p2p\.gpu(\d+)-gpu(\d+)\.")


def run_pytest(directory: Path, name: str, device: str, suites: str, extra: list[str]) -> dict[str, Any]:
    """One pytest run with its report and summary kept; its exit status, wall time and report."""
    report, summary = directory / f"{name}.json", directory / f"{name}.md"
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"--rocm-device={device}",
        f"--rocm-suite={suites}",
        f"--rocm-report={report}",
        f"--rocm-summary={summary}",
        "-p",
        "no:cacheprovider",
        "-q",
        *extra,
    ]
    print("$ " + shlex.join(command), flush=True)
    started = time.perf_counter()
    status = subprocess.run(command, check=False, cwd=REPO).returncode
    wall = time.perf_counter() - started
    print(f"{name}: exit {status}, {wall:.0f} s wall", flush=True)
    return {
        "command": shlex.join(command),
        "exit_status": status,
        "wall_s": round(wall, 1),
        "report": json.loads(report.read_text()) if report.exists() else None,
    }


def outcomes_by_gpu(report: dict[str, Any]) -> dict[str, dict[str, dict[str, int]]]:
    """{suite: {'GPU 3' (or 'node'): {outcome: count}}}."""
    table: dict[str, dict[str, dict[str, int]]] = {}
    for test in report["tests"]:
        where = f"GPU {test['gpu']['index']}" if test.get("gpu") else "node"
        counts = table.setdefault(test.get("suite") or "-", {}).setdefault(where, {})
        counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    return table


def busbw_table(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every collective at every size: bus bandwidth and its verdict against the baseline."""
    rows = []
    for metric in report["metrics"]:
        extra = metric.get("extra") or {}
        if extra.get("collective"):
            rows.append(
                {
                    "collective": extra["collective"],
                    "bytes": extra["bytes"],
                    "world": extra.get("world"),
                    "busbw_gbps": metric["value"],
                    "algbw_gbps": extra.get("algbw_gbps"),
                    "verdict": metric["verdict"],
                }
            )
    return sorted(rows, key=lambda r: (r["collective"], r["bytes"]))


def p2p_matrix(report: dict[str, Any]) -> dict[str, Any]:
    """matrix[src][dst] = peer-to-peer copy GB/s, from the p2p.gpuX-gpuY metrics."""
    pairs = {}
    for metric in report["metrics"]:
        match = _PAIR.match(metric["name"])
        if match:
            pairs[(int(match.group(1)), int(match.group(2)))] = metric["value"]
    gpus = sorted({g for pair in pairs for g in pair})
    return {"gpus": gpus, "gbps": [[pairs.get((a, b), pairs.get((b, a))) for b in gpus] for a in gpus]}


def verdict_differences(single: dict[str, Any], node: dict[str, Any], gpu: int) -> list[str]:
    """Tests and metrics whose verdict on `gpu` in the node run differs from the single-GPU run."""
    differences = []
    before = {t["nodeid"]: t["outcome"] for t in single["tests"]}
    for test in node["tests"]:
        if (
            (test.get("gpu") or {}).get("index") == gpu
            and test["nodeid"] in before
            and before[test["nodeid"]] != test["outcome"]
        ):
            differences.append(f"{test['nodeid']}: {before[test['nodeid']]} alone, {test['outcome']} in the node run")
    before_metrics = {m["name"]: m["verdict"] for m in single["metrics"]}
    for metric in node["metrics"]:
        if (metric.get("gpu") or {}).get("index") == gpu and before_metrics.get(
            metric["name"], metric["verdict"]
        ) != metric["verdict"]:
            differences.append(
                f"{metric['name']}: {before_metrics[metric['name']]} alone, {metric['verdict']} in the node run"
            )
    return differences


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    split = args_in.index("--") if "--" in args_in else len(args_in)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True, help="folder for the reports and node-acceptance.json")
    parser.add_argument("--suites", default="correctness,perf,collectives")
    parser.add_argument(
        "--single", action="store_true", help="also run today's single-GPU run first and compare verdicts"
    )
    args = parser.parse_args(args_in[:split])
    extra = args_in[split + 1 :]
    args.dir = args.dir.resolve()
    args.dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = {}
    if args.single:
        per_gpu = ",".join(s for s in args.suites.split(",") if s != "collectives")
        runs["single"] = run_pytest(args.dir, "single", "0", per_gpu, extra)
    runs["node"] = run_pytest(args.dir, "node", "all", args.suites, extra)
    node = runs["node"]["report"]
    if node is None:
        print("node run wrote no report; see its output above", file=sys.stderr)
        return 1
    summary: dict[str, Any] = {
        "runs": {name: {k: v for k, v in run.items() if k != "report"} for name, run in runs.items()},
        "gpus": [
            g["device"]["name"] + f" (GPU {g['device']['index']}, BDF {g['device'].get('pci_bus_id')})"
            for g in (node.get("node") or {}).get("gpus", [])
        ],
        "outcomes": outcomes_by_gpu(node),
        "below_peers": [p["message"] for p in node.get("peers", []) if p["verdict"] == "below-peers"],
        "busbw": busbw_table(node),
        "p2p": p2p_matrix(node),
    }
    if args.single and runs["single"]["report"] is not None:
        summary["verdict_differences_gpu0"] = verdict_differences(runs["single"]["report"], node, 0)
    out = args.dir / "node-acceptance.json"
    jsonfile.write_json(out, summary, SCHEMA)
    print(json.dumps({k: summary[k] for k in ("runs", "outcomes", "below_peers")}, indent=1))
    for row in summary["busbw"]:
        print(f"{row['collective']:<16}{row['bytes']:>12}  {row['busbw_gbps']:.1f} GB/s  {row['verdict']}")
    print(f"wrote {out}")
    failed = runs["node"]["exit_status"] != 0 or bool(summary.get("verdict_differences_gpu0"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
