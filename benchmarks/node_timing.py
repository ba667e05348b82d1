"""Time to verdict on a GPU node, in one call: the whole node, every suite, cold and then warm.

    python benchmarks/node_timing.py --dir $OUT/node-timing [--limit-s 240] [--warm-limit-s S] [--reference OLD.json] [-- PYTEST ARGS]
    (or in two calls: --no-warm --cache C, then --warm-only --cache C)

1. cold: `pytest --rocm-device=all --rocm-suite=all` against the committed baselines, with an empty
   compile cache of its own (--cache, by default a fresh folder outside DIR);
2. warm: the same command again, finding the first run's compiled graphs in that cache;
3. DIR/node-timing.json: for each run its wall time (and whether --limit-s cut it), where the time
   went (the report's time section: per suite, kind of work and GPU, beside lanes, the node),
   outcomes per suite, failures, GPUs below their peers, the compile cache's state at the start and
   the BERT-L compile's; every test whose outcome differs between the runs (and, with --reference, from
   an earlier run's report); and the time model (rocm_validate.node.budget) fed with the cold run's
   measured times: the modelled 2-GPU time beside the measured one, and the projection to 8 GPUs
   (the collectives from this run's 2-GPU time and the CPU's per-rank and per-pair terms,
   docs/measurements/collectives-scaling-cpu.json).

Each run is limited to --limit-s seconds (default 240, so both fit 9 minutes of a lent machine): at the
limit pytest is interrupted (it still writes its report, with what ran), and killed 20 s later. Reports
and markdown summaries are kept in DIR. Exit status 1 when a run fails, is cut, or the outcomes differ.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocm_validate.core.suites import BESIDE_SUITES
from rocm_validate.node.budget import collectives_on_gpus, measured_work, node_time
from rocm_validate.results.time_used import TimeRow, TimeUsed, time_table

REPO = Path(__file__).resolve().parents[1]
CPU_SCALING = REPO / "docs" / "measurements" / "collectives-scaling-cpu.json"
GPU_CALLS = 56  # per collective or pair on GPUs: the checked call, 5 warmup calls, 5 rounds of 10
GRACE_S = 20.0


def run_pytest(directory: Path, name: str, cache: Path, limit_s: float, extra: list[str]) -> dict[str, Any]:
    """One whole-node run, interrupted at the limit; its command, exit status, wall time and report."""
    report, summary = directory / f"{name}.json", directory / f"{name}.md"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--rocm-device=all",
        "--rocm-suite=all",
        f"--rocm-compile-cache={cache}",
        f"--rocm-report={report}",
        f"--rocm-summary={summary}",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rfE",
        *extra,
    ]
    print("$ " + shlex.join(command), flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, start_new_session=True)
    cut = False
    try:
        status = process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        cut = True
        print(f"{name}: {limit_s:.0f} s limit reached, interrupting", flush=True)
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C: the workers and ranks stop their tests too
        try:
            status = process.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
    wall = time.perf_counter() - started
    print(f"{name}: exit {status}, {wall:.0f} s wall{' (cut)' if cut else ''}", flush=True)
    data = json.loads(report.read_text()) if report.exists() else {}
    return {"command": shlex.join(command), "exit_status": status, "wall_s": round(wall, 1), "cut": cut, "report": data}


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    """Each check's worst outcome over the GPUs it ran on (a shared test runs on one)."""
    order = ["passed", "xfailed", "xpassed", "skipped", "failed", "error"]
    found: dict[str, str] = {}
    for test in report.get("tests", []):
        old = found.get(test["nodeid"], "passed")
        found[test["nodeid"]] = max(old, test["outcome"], key=order.index)
    return found


def differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [
        f"{nodeid}: {a.get(nodeid, 'absent')} -> {b.get(nodeid, 'absent')}"
        for nodeid in sorted(set(a) | set(b))
        if a.get(nodeid) != b.get(nodeid)
    ]


def by_suite(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for test in report.get("tests", []):
        suite = counts.setdefault(test.get("suite") or "other", {})
        suite[test["outcome"]] = suite.get(test["outcome"], 0) + 1
    return counts


def compile_states(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": m["name"],
            "seconds": m["value"],
            "gpu": (m.get("gpu") or {}).get("index"),
            "cache": m["extra"].get("compile_cache"),
        }
        for m in report.get("metrics", [])
        if m["name"].endswith(".compile_seconds")
    ]


def summary(run: dict[str, Any]) -> dict[str, Any]:
    report = run["report"]
    failures = [
        {
            "nodeid": t["nodeid"],
            "gpu": (t.get("gpu") or {}).get("index"),
            "message": (t.get("message") or "").splitlines()[:1],
        }
        for t in report.get("tests", [])
        if t["outcome"] in ("failed", "error")
    ]
    return {
        **{k: run[k] for k in ("command", "exit_status", "wall_s", "cut")},
        "time": report.get("time"),
        "suites": by_suite(report),
        "failures": failures,
        "below_peers": [p["message"] for p in report.get("peers", []) if p.get("verdict") == "below-peers"],
        "verdict": report.get("verdict"),
        "compile": compile_states(report),
    }


def _collectives_timed(report: dict[str, Any]) -> tuple[float, float]:
    """The collectives' own calls, and one pair's copies, in seconds, from the run's metrics."""
    timed = pair = 0.0
    for metric in report.get("metrics", []):
        seconds = metric.get("extra", {}).get("seconds")
        if metric["name"].startswith("collective.") and seconds:
            timed += GPU_CALLS * statistics.fmean(seconds)
        if metric["name"].startswith("p2p.") and metric.get("value") and metric["extra"].get("bytes"):
            pair = max(pair, GPU_CALLS * metric["extra"]["bytes"] / (metric["value"] * 1e9))
    return timed, pair


def projection(run: dict[str, Any], gpus: tuple[int, ...]) -> dict[str, Any] | None:
    """The time model fed with this run's measured times, at each node size of `gpus`."""
    report = run["report"]
    section = report.get("time")
    if not section or not section.get("rows"):
        return None
    rows = [TimeRow(**row) for row in section["rows"]]
    largest: dict[str, float] = {}
    for test in report.get("tests", []):
        if test.get("work") == "shared" and test.get("suite") not in BESIDE_SUITES:
            largest[test["suite"]] = max(largest.get(test["suite"], 0.0), test["duration_s"])
    work = measured_work(rows, largest)
    coll = [r.seconds for r in rows if r.suite == "collectives" and r.gpu is None]
    fit = json.loads(CPU_SCALING.read_text())["rest_fit"]
    timed, pair = _collectives_timed(report)
    cost = collectives_on_gpus(sum(coll), timed, fit, pair) if coll else None
    measured_gpus = max(1, len({r.gpu for r in rows if r.gpu is not None}))
    # What the model does not explain at the measured size (starting, collecting, waiting) is kept as is.
    startup = max(0.0, section["wall_s"] - node_time(work, measured_gpus, 0.0, cost).total_s)
    return {
        "inputs": {
            "suites": {name: vars(w) for name, w in work.items()},
            "startup_s": round(startup, 1),
            "collectives": None if cost is None else vars(cost),
            "cpu_fit": fit,
        },
        "modelled": {str(n): node_time(work, n, startup, cost).terms() for n in gpus},
        "measured_wall_s": section["wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--limit-s", type=float, default=240.0, help="the cold run's limit (default 240 s)")
    parser.add_argument("--warm-limit-s", type=float, help="the warm run's limit (default: --limit-s)")
    parser.add_argument("--reference", type=Path, help="an earlier run's report, to compare outcomes with")
    parser.add_argument("--no-warm", action="store_true", help="only the cold run")
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="only the warm run, on the --cache a cold run (--no-warm) filled: the two in separate calls",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="the compile cache of both runs, emptied first (default: a fresh folder outside --dir, which may be "
        "copied back from a lent machine)",
    )
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="rocm-validate-node-timing-cache-"))
    runs: dict[str, dict[str, Any]] = {}
    if not args.warm_only:
        shutil.rmtree(cache, ignore_errors=True)
        runs["cold"] = run_pytest(args.dir, "cold", cache, args.limit_s, args.pytest_args)
    if not args.no_warm:
        runs["warm"] = run_pytest(args.dir, "warm", cache, args.warm_limit_s or args.limit_s, args.pytest_args)
    result: dict[str, Any] = {name: summary(run) for name, run in runs.items()}
    seen = {name: outcomes(run["report"]) for name, run in runs.items()}
    if "warm" in seen and "cold" in seen:
        result["differences_cold_warm"] = differences(seen["cold"], seen["warm"])
    if args.reference:  # against the first run made here (with --warm-only, the cold run's report of an earlier call)
        first = next(iter(runs))
        result[f"differences_reference_{first}"] = differences(
            outcomes(json.loads(args.reference.read_text())), seen[first]
        )
    result["projection"] = {name: projection(run, (2, 4, 8)) for name, run in runs.items()}
    out = args.dir / ("node-timing-warm.json" if args.warm_only else "node-timing.json")
    out.write_text(json.dumps(result, indent=1, sort_keys=True, default=str) + "\n")
    for name, run in runs.items():
        section = run["report"].get("time")
        if section:
            print(f"\n{name}: {section['wall_s']:.0f} s wall, budget {section['budget_s']:.0f} s")
            print("\n".join(time_table(TimeUsed(section["wall_s"], tuple(TimeRow(**r) for r in section["rows"])))))
        modelled = (result["projection"].get(name) or {}).get("modelled", {})
        if modelled:
            print(f"{name}: modelled " + ", ".join(f"{n} GPUs {t['total_s']:.0f} s" for n, t in modelled.items()))
    print(f"wrote {out}")
    failed = any(r["exit_status"] != 0 or r["cut"] for r in runs.values()) or bool(result.get("differences_cold_warm"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
