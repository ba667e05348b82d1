"""Triage acceptance on a GPU, in one command (about 5 minutes on an H100, under 8):

    python benchmarks/triage_acceptance.py --dir DIR [--out benchmarks/results/triage-<key>.json]

1. contended: the perf suite's GEMMs and copies against the committed baselines while a second
   process runs a bf16 GEMM loop on the same GPU: every regressed metric must be `contention`
   and name that process's pid;
2. clean: the same tests without it: no failure;
3. preflight: the host checks, reporting the machine's facts (skips say why);
4. repeatability: the extended-level GEMM / attention repeatability (60 s each on a GPU) and the
   memory pattern test: they pass, and each workload ran within 10% of its stated time
   (run with --rocm-level=extended).

Each step's pytest report is DIR/<step>.json; DIR/triage-acceptance.json (and --out) sums them up
with each criterion's outcome. Arguments after `--` go to every pytest run (e.g. --rocm-device=1).
Exit status 1 when a criterion fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STATED_SECONDS = 60.0  # rocm_validate.correctness.repeatability.SUSTAINED_SECONDS["extended"]
PERF_TESTS = "gemm or bandwidth"  # suites/perf/test_gemm.py and test_bandwidth.py: GEMMs and copies
TIME_SLACK = 0.10

# The second process: a bf16 GEMM loop on the GPU until it is stopped (or an hour passes).
LOADER = """
import os, sys, time, torch
device = torch.device(sys.argv[1])
a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda device: None)
for _ in range(3):
    a @ b
sync(device)
with open(sys.argv[2], "w") as ready:
    ready.write(str(os.getpid()))
deadline = time.monotonic() + 3600
while time.monotonic() < deadline:
    for _ in range(20):
        a @ b
    sync(device)
"""


def run_pytest(directory: Path, step: str, args: list[str], extra: list[str]) -> tuple[int, dict[str, Any], float]:
    """One pytest run in the repository; returns its exit status, its report and its wall time."""
    report = directory / f"{step}.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *args,
        f"--rocm-report={report}",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        *extra,
    ]
    print("$ " + shlex.join(command), flush=True)
    started = time.perf_counter()
    status = subprocess.run(command, cwd=REPO, check=False).returncode
    wall = time.perf_counter() - started
    print(f"{step}: exit {status}, {wall:.0f} s wall", flush=True)
    return status, json.loads(report.read_text()) if report.exists() else {}, wall


def start_loader(directory: Path, device: str) -> subprocess.Popen[bytes]:
    """Start the GEMM loop and wait until it runs on the GPU."""
    ready = directory / "loader.pid"
    ready.unlink(missing_ok=True)
    loader = subprocess.Popen([sys.executable, "-c", LOADER, device, str(ready)])
    deadline = time.monotonic() + 120
    while not ready.exists():
        if loader.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the loader did not start (exit {loader.poll()})")
        time.sleep(0.5)
    print(f"loader: pid {loader.pid} running a bf16 GEMM loop on {device}", flush=True)
    return loader


def _failed(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in report.get("tests", []) if t["outcome"] in ("failed", "error")]


def judge_contended(report: dict[str, Any], pid: int) -> dict[str, Any]:
    """Every regressed metric attributed to contention, naming the loader's pid."""
    regressed = [m for m in report.get("metrics", []) if m["verdict"] == "regressed"]
    wrong = [
        m["name"]
        for m in regressed
        if (m.get("extra") or {}).get("attribution") != "contention" or f"pid {pid} " not in m["message"]
    ]
    categories = sorted({t["category"] for t in _failed(report)})
    return {
        "regressed": len(regressed),
        "metrics": len(report.get("metrics", [])),
        "not_attributed_to_the_loader": wrong,
        "test_categories": categories,
        "verdict": report.get("verdict"),
        "ok": bool(regressed) and not wrong and categories == ["contention"],
    }


def judge_repeatability(report: dict[str, Any], seconds: float) -> dict[str, Any]:
    ran = {m["name"]: m["value"] for m in report.get("metrics", [])}
    durations = {n: v for n, v in ran.items() if n.endswith(".seconds")}
    late = {n: v for n, v in durations.items() if v > seconds * (1 + TIME_SLACK)}
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report.get("tests", [])}
    return {
        "outcomes": outcomes,
        "metrics": ran,
        "late": late,
        "ok": bool(outcomes) and set(outcomes.values()) == {"passed"} and len(durations) == 2 and not late,
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="working folder for the reports")
    parser.add_argument(
        "--device", default="cuda:0", help="the GPU the loader runs on (default cuda:0: the one the suites validate)"
    )
    parser.add_argument(
        "--out", type=Path, help="also write the summary here (e.g. benchmarks/results/triage-<device key>.json)"
    )
    args = parser.parse_args(own)
    args.dir.mkdir(parents=True, exist_ok=True)
    perf = ["--rocm-suite=perf", "-k", PERF_TESTS]
    steps: dict[str, Any] = {}

    loader = start_loader(args.dir, args.device)
    try:
        status, report, wall = run_pytest(args.dir, "contended", perf, extra)
    finally:
        loader.terminate()
        loader.wait(timeout=60)
    steps["contended"] = {
        "exit_status": status,
        "wall_s": round(wall, 1),
        "loader_pid": loader.pid,
        **judge_contended(report, loader.pid),
    }

    status, report, wall = run_pytest(args.dir, "clean", perf, extra)
    steps["clean"] = {
        "exit_status": status,
        "wall_s": round(wall, 1),
        "failed": [t["nodeid"] for t in _failed(report)],
        "verdict": report.get("verdict"),
        "ok": status == 0,
    }

    status, report, wall = run_pytest(args.dir, "preflight", ["--rocm-suite=preflight"], extra)
    findings = [f for t in report.get("tests", []) for f in t.get("findings", [])]
    steps["preflight"] = {
        "exit_status": status,
        "wall_s": round(wall, 1),
        "findings": findings,
        "verdict": report.get("verdict"),
        "ok": bool(report.get("tests")) and wall < 120,
    }

    level = ["--rocm-level=extended"]
    status, report, wall = run_pytest(
        args.dir, "repeatability", ["--rocm-suite=correctness", "-k", "repeatability or memory_pattern", *level], extra
    )
    steps["repeatability"] = {
        "exit_status": status,
        "wall_s": round(wall, 1),
        "stated_seconds": STATED_SECONDS,
        **judge_repeatability(report, STATED_SECONDS),
    }

    summary = {"device": report.get("device"), "steps": steps, "ok": all(s["ok"] for s in steps.values())}
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    (args.dir / "triage-acceptance.json").write_text(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    for name, step in steps.items():
        print(
            f"{name}: {'ok' if step['ok'] else 'FAILED'} (exit {step['exit_status']}, {step['wall_s']} s)", flush=True
        )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
