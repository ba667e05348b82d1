"""TunableOp acceptance on a GPU, in one shot (about 5 minutes on an H100):

    python benchmarks/tunable_acceptance.py --out DIR [--device 0]

1. job: a BERT-L-shaped training job's GEMMs (linear layers with bias at 48 x 512 tokens, the
   attention-score bmm, the perf suite's benchmark GEMMs) run with TunableOp tuning on, as a user
   tunes: PYTORCH_TUNABLEOP_ENABLED=1, TUNING=1, FILENAME=DIR/tunableop_results%d.csv, verbose log
   kept. TunableOp writes the results file when the job exits.
2. correctness: suites/correctness/test_tunable.py with that file: its validators match this
   stack, every entry's solution against float64, and every solution TunableOp selects for the
   suite's own GEMM shapes against float64 (expected: all pass).
3. perf: suites/perf/test_tunable_gemm.py with that file, recording into DIR/baselines: the tuned
   vs default speedup of every benchmark GEMM and of every entry (expected: all pass; the
   speedups are in DIR/summary.json).
4. stale: the file with PT_VERSION changed, as a file from another stack: torch's own read_file
   must reject it, and the suite must fail it as configuration, saying the tuning is ignored.
5. slower: the file with its largest GEMM's solution replaced by one TunableOp itself skipped
   as more than twice as slow (from the job's verbose log): the perf suite must fail it, naming
   the entry. Where the log shows no slower solution for any entry (a CUDA build: TunableOp's
   only GEMM solution there is cuBLAS's Default, so tuned and default are the same kernel), a
   file cannot be doctored; the slower solution is planted instead: a plugin makes the tuned
   path run one extra GEMM every PLANTED_EVERY calls (10% more work), and the perf suite must
   fail every timed entry and benchmark GEMM as slower, naming each.

DIR/summary.json holds every step's command, exit status, outcomes, categories and messages,
the speedups and the verdicts ("expected": what each step must show; "as_expected": whether it
did). The script exits 1 when any step did not show what it must.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = "tunableop_results%d.csv"
BUDGET = {"PYTORCH_TUNABLEOP_MAX_TUNING_DURATION_MS": "10", "PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS": "20"}
SLOW = re.compile(r"skip slow instance id=\d+, (?P<op>\S+)\((?P<params>[^)]*)\) (?P<solution>\S+)")
PROFILED = re.compile(
    r"tuning iters (?P<iters>\d+) \[(?P<ms>[0-9.e+-]+) ms\] instance id=\d+, (?P<op>\S+)\((?P<params>[^)]*)\) (?P<solution>\S+)"
)
SLOWER_BY = 1.15  # a doctored solution at least this much slower than the tuned one: far past the gate's 3%
PLANTED_EVERY = 10  # the planted slower solution: one extra GEMM every 10 tuned calls, 10% more work
PLANTED_SLOWER = f"""
\"\"\"Planted by benchmarks/tunable_acceptance.py: the tuned path runs one extra GEMM every
{PLANTED_EVERY} calls, as a tuned solution 10% slower than the default would.\"\"\"
from rocm_validate.workloads import tunableop

_switched = tunableop.TunableOpSession.switched


def _slower(on, fn):
    call = _switched(on, fn)
    if not on:
        return call
    count = [0]

    def slower():
        count[0] += 1
        if count[0] % {PLANTED_EVERY} == 0:
            call()
        return call()

    return slower


tunableop.TunableOpSession.switched = staticmethod(_slower)
"""


def job(device: str) -> None:
    """The GEMMs a BERT-L pretraining job at batch 48 x 512 runs, and the perf suite's benchmark
    GEMMs, each once under TunableOp (the environment turns it on)."""
    import torch
    import torch.nn.functional as F

    from rocm_validate.workloads.shapes import GEMM_BENCHMARKS

    target = torch.device(f"cuda:{device}")
    torch.cuda.set_device(target)
    tokens, hidden, ffn = 48 * 512, 1024, 4096
    with torch.no_grad():
        for out_features, in_features in ((3 * hidden, hidden), (hidden, hidden), (ffn, hidden), (hidden, ffn)):
            w = torch.randn(out_features, in_features, device=target, dtype=torch.bfloat16)
            b = torch.randn(out_features, device=target, dtype=torch.bfloat16)
            F.linear(torch.randn(tokens, in_features, device=target, dtype=torch.bfloat16), w, b)
        q = torch.randn(48 * 16, 512, 64, device=target, dtype=torch.bfloat16)
        torch.bmm(q, q.transpose(1, 2))
        for dtype in (torch.bfloat16, torch.float16):
            for case in GEMM_BENCHMARKS:
                m, n, k = case.full
                torch.matmul(
                    torch.randn(m, k, device=target, dtype=dtype), torch.randn(k, n, device=target, dtype=dtype)
                )
    torch.cuda.synchronize()


def run(command: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    return {
        "command": " ".join(command),
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "log": str(log),
    }


def pytest_step(
    out: Path, name: str, device: str, suite_args: list[str], results_file: Path, plugin: str | None = None
) -> dict[str, Any]:
    report = out / f"{name}.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *suite_args,
        f"--rocm-device={device}",
        f"--rocm-tunableop-file={results_file}",
        f"--rocm-report={report}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTORCH_TUNABLEOP_")}
    if plugin:  # a module written into `out`, loaded into the run
        command += ["-p", plugin]
        env["PYTHONPATH"] = os.pathsep.join([str(out), env.get("PYTHONPATH", "")])
    step = run(command, env, out / f"{name}.log")
    if report.exists():
        data = json.loads(report.read_text())
        step["tests"] = [{k: t.get(k) for k in ("nodeid", "outcome", "category", "message")} for t in data["tests"]]
        step["metrics"] = {
            m["name"]: {"value": m["value"], "unit": m["unit"], "verdict": m["verdict"]} for m in data["metrics"]
        }
    return step


def outcomes(step: dict[str, Any], keyword: str = "") -> dict[str, int]:
    counts: dict[str, int] = {}
    for test in step.get("tests", []):
        if keyword in test["nodeid"]:
            counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    return counts


def doctored(
    source: Path,
    target: Path,
    replace: dict[tuple[str, str], str] | None = None,
    validator: tuple[str, str] | None = None,
) -> Path:
    """A copy of a results file with one validator's value or some entries' solutions changed."""
    lines = []
    for line in source.read_text().splitlines():
        parts = line.split(",")
        if validator and parts[:2] == ["Validator", validator[0]]:
            parts[2] = validator[1]
        elif replace and (parts[0], parts[1]) in replace:
            parts[2] = replace[(parts[0], parts[1])]
        lines.append(",".join(parts))
    target.write_text("\n".join(lines) + "\n")
    return target


def slow_solutions(log: str) -> dict[tuple[str, str], tuple[str, float]]:
    """Per GEMM key, the slowest solution TunableOp's verbose log shows: one it skipped as more
    than twice as slow as the best so far (duration unknown: inf), else the slowest it profiled
    (its approximate ms per call)."""
    slowest: dict[tuple[str, str], tuple[str, float]] = {}
    for found in SLOW.finditer(log):
        slowest[(found["op"], found["params"])] = (found["solution"], float("inf"))
    for found in PROFILED.finditer(log):
        key, per_call = (found["op"], found["params"]), float(found["ms"]) / max(int(found["iters"]), 1)
        if slowest.get(key, ("", -1.0))[1] < per_call:
            slowest[key] = (found["solution"], per_call)
    return slowest


def slower_entry(log: str, results: Path) -> tuple[tuple[str, str], str] | None:
    """The largest reproducible GEMM of the file with a solution at least SLOWER_BY x its tuned time."""
    from rocm_validate.workloads.tunableop_results import entry_gemm, parse_results

    slowest = slow_solutions(log)
    usable = []
    for entry in parse_results(results.read_text()).entries:
        gemm = entry_gemm(entry)
        if isinstance(gemm, str) or entry.key not in slowest:
            continue
        solution, per_call = slowest[entry.key]
        if solution != entry.solution and (entry.time_ms is None or per_call >= SLOWER_BY * entry.time_ms):
            usable.append((gemm.batch * gemm.m * gemm.n * gemm.k, entry.key, solution))
    if not usable:
        return None
    _, key, solution = max(usable)
    return key, solution


def planted_slower(out: Path, device: str, results: Path) -> dict[str, Any]:
    """The perf suite with a slower tuned solution planted (no slower one exists to doctor a file
    with): every timed entry and benchmark GEMM must fail as slower than the default, named."""
    (out / "planted_slower.py").write_text(PLANTED_SLOWER)
    step = pytest_step(
        out, "slower", device, ["suites/perf/test_tunable_gemm.py", "--rocm-suite=perf"], results, "planted_slower"
    )
    ran = [t for t in step.get("tests", []) if t["outcome"] in ("passed", "failed")]
    caught = [
        t
        for t in ran
        if t["outcome"] == "failed" and t["category"] == "performance" and "slower" in (t["message"] or "")
    ]
    step["doctored"] = None
    step["why_planted"] = (
        "the job's tuning log shows no solution slower than the tuned one for any entry (on CUDA, TunableOp's only "
        "GEMM solution is cuBLAS's Default), so no results file can be doctored; the slower solution is planted"
    )
    step["planted"] = f"one extra GEMM every {PLANTED_EVERY} tuned calls (10% more work)"
    step["caught"] = f"{len(caught)} of {len(ran)}"
    step["expected"] = "the perf suite fails every timed test as slower than the default, naming the GEMM"
    step["as_expected"] = bool(ran) and len(caught) == len(ran)
    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the results files, reports and summary")
    parser.add_argument("--device", default="0", help="the GPU index (default 0)")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # step 1, in its own process
    args = parser.parse_args(argv)
    if args.job:
        job(args.device)
        return 0
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_TUNABLEOP_")},
        "PYTORCH_TUNABLEOP_ENABLED": "1",
        "PYTORCH_TUNABLEOP_TUNING": "1",
        "PYTORCH_TUNABLEOP_FILENAME": str(out / RESULTS),
        "PYTORCH_TUNABLEOP_VERBOSE": "3",
        "PYTORCH_TUNABLEOP_VERBOSE_FILENAME": "out",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        **BUDGET,
    }
    summary["job"] = run(
        [sys.executable, str(Path(__file__).resolve()), "--job", "--out", str(out), "--device", args.device],
        env,
        out / "job.log",
    )
    results = out / RESULTS.replace("%d", args.device)
    summary["job"]["results_file"] = str(results) if results.exists() else None
    summary["job"]["expected"] = "TunableOp wrote its results file"
    summary["job"]["as_expected"] = results.exists()
    if not results.exists():
        (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        print(f"the job wrote no {results}; see {out / 'job.log'}")
        return 1
    summary["job"]["entries"] = [line for line in results.read_text().splitlines() if not line.startswith("Validator")]

    correctness = pytest_step(out, "correctness", args.device, ["suites/correctness/test_tunable.py"], results)
    correctness["expected"] = (
        "every test passes: the file is used, its entries and the suite's tuned GEMMs match float64"
    )
    correctness["as_expected"] = correctness["exit"] == 0 and not outcomes(correctness).get("failed")
    summary["correctness"] = correctness

    perf = pytest_step(
        out,
        "perf",
        args.device,
        [
            "suites/perf/test_tunable_gemm.py",
            "--rocm-suite=perf",
            "--update-baselines",
            f"--rocm-baselines={out / 'baselines'}",
        ],
        results,
    )
    perf["expected"] = "every test passes; the speedups are recorded"
    perf["as_expected"] = perf["exit"] == 0 and not outcomes(perf).get("failed")
    perf["speedups"] = {
        name: m["value"] for name, m in perf.get("metrics", {}).items() if name.startswith("gemm.tunableop")
    }
    summary["perf"] = perf

    stale = doctored(results, out / "stale_results0.csv", validator=("PT_VERSION", "0.0.0+another-stack"))
    reads = run(
        [
            sys.executable,
            "-c",
            f"import torch.cuda.tunable as t; t.enable(True); print('read_file', t.read_file({str(stale)!r}))",
        ],
        {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_TUNABLEOP_")},
        out / "stale_read.log",
    )
    stale_step = pytest_step(out, "stale", args.device, ["suites/correctness/test_tunable.py", "-k", "is_used"], stale)
    stale_step["torch_read_file"] = "read_file False" in Path(reads["log"]).read_text()
    failed = [t for t in stale_step.get("tests", []) if t["outcome"] == "failed"]
    stale_step["expected"] = (
        "torch rejects the file; the suite fails it as configuration, saying TunableOp will ignore it"
    )
    stale_step["as_expected"] = bool(
        stale_step["torch_read_file"]
        and failed
        and failed[0]["category"] == "configuration"
        and "will ignore" in (failed[0]["message"] or "")
    )
    summary["stale"] = stale_step

    log = (out / "job.log").read_text()
    choice = slower_entry(log, results)
    if choice is None:
        summary["slower"] = planted_slower(out, args.device, results)
    else:
        key, solution = choice
        slow = doctored(results, out / "slower_results0.csv", replace={key: solution})
        slower = pytest_step(
            out,
            "slower",
            args.device,
            ["suites/perf/test_tunable_gemm.py", "-k", "results_file", "--rocm-suite=perf"],
            slow,
        )
        failed = [t for t in slower.get("tests", []) if t["outcome"] == "failed"]
        slower["doctored"] = {"entry": ",".join(key), "solution": solution}
        slower["expected"] = "the perf suite fails the doctored entry as slower than the default, naming it"
        slower["as_expected"] = bool(
            failed and key[1] in (failed[0]["message"] or "") and "slower" in failed[0]["message"]
        )
        summary["slower"] = slower

    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    for name, step in summary.items():
        print(f"{name:12} {'as expected' if step.get('as_expected') else 'NOT AS EXPECTED'}: {step.get('expected')}")
    print(f"speedups: {json.dumps(summary['perf'].get('speedups', {}), indent=1)}")
    print(f"summary: {out / 'summary.json'}")
    return 0 if all(step.get("as_expected") for step in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
