"""The perf suite's acceptance benchmarks, one step per command (each fits a 10-minute slot):

    python benchmarks/perf_acceptance.py record --dir DIR    # fresh baselines in DIR/baselines
    python benchmarks/perf_acceptance.py aa --dir DIR        # three reruns against them: zero failures
    python benchmarks/perf_acceptance.py detect --dir DIR    # every throughput baseline x1.10: every one fails
    python benchmarks/perf_acceptance.py summary --dir DIR --out benchmarks/results/acceptance-<key>.json

Arguments after `--` go to pytest (e.g. `-- -k "not compiled"`, `--rocm-device=1`). Every step
keeps its pytest report (DIR/<step>.json) and prints the wall time of each pytest run; `summary`
gathers them into one JSON file worth committing. Exit status 1 when a step's criterion fails.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rocm_validate.results import jsonfile

DETECTION_SCALE = 1.10
SUMMARY_SCHEMA: dict[str, Any] = {"title": "perf acceptance", "type": "object", "required": ["steps"]}


def run_pytest(directory: Path, step: str, baselines: Path, extra: list[str]) -> tuple[int, dict[str, Any], float]:
    """One perf-suite run; returns its exit status, its rocm-validate report and its wall time."""
    report = directory / f"{step}.json"
    command = [
        sys.executable, "-m", "pytest", "--rocm-suite=perf", f"--rocm-baselines={baselines}", f"--rocm-report={report}",
        "-p", "no:cacheprovider", "-q", *extra,
    ]
    print("$ " + shlex.join(command), flush=True)
    started = time.perf_counter()
    status = subprocess.run(command, check=False).returncode
    wall = time.perf_counter() - started
    print(f"{step}: exit {status}, {wall:.0f} s wall", flush=True)
    return status, json.loads(report.read_text()), wall


def _gated_throughputs(report: dict[str, Any]) -> list[str]:
    """Higher-is-better metrics that the gate judges (not informational)."""
    return [
        m["name"]
        for m in report["metrics"]
        if m["better"] == "higher" and not (m.get("extra") or {}).get("gate", {}).get("informational")
    ]


def _step_record(directory: Path, extra: list[str]) -> bool:
    status, report, wall = run_pytest(directory, "record", directory / "baselines", ["--update-baselines", *extra])
    refused = [m["name"] for m in report["metrics"] if m["verdict"] not in ("updated", "kept")]
    print(f"record: {len(report['metrics'])} metrics, not recorded: {refused or 'none'}; wall {wall:.0f} s")
    return status == 0 and not refused


def _step_aa(directory: Path, extra: list[str], runs: int) -> bool:
    failures = 0
    for index in range(1, runs + 1):
        status, report, _ = run_pytest(directory, f"aa{index}", directory / "baselines", extra)
        failed = [f"{m['name']} ({m['verdict']}, ratio {m['ratio']})" for m in report["metrics"] if m["verdict"] in ("regressed", "mismatch", "invalid")]
        failures += len(failed) + (status != 0)
        print(f"aa{index}: {len(failed)} failed metrics {failed}")
    return failures == 0


def _step_detect(directory: Path, extra: list[str]) -> bool:
    record = json.loads((directory / "record.json").read_text())
    source = next((directory / "baselines").glob("*.json"))
    data = json.loads(source.read_text())
    scaled = [name for name in _gated_throughputs(record) if name in data["metrics"]]
    for name in scaled:
        data["metrics"][name]["value"] *= DETECTION_SCALE
    target = directory / "scaled"
    target.mkdir(exist_ok=True)
    (target / source.name).write_text(jsonfile.dumps(data))
    _, report, _ = run_pytest(directory, "detect", target, extra)
    verdicts = {m["name"]: m["verdict"] for m in report["metrics"]}
    missed = [name for name in scaled if verdicts.get(name) != "regressed"]
    print(f"detect: {len(scaled) - len(missed)} of {len(scaled)} scaled throughputs failed; missed: {missed or 'none'}")
    return not missed


def _step_summary(directory: Path, out: Path) -> bool:
    steps = {}
    for report_path in sorted(directory.glob("*.json")):
        report = json.loads(report_path.read_text())
        steps[report_path.stem] = {
            "exit_status": report["exit_status"],
            "duration_s": round(sum(t["duration_s"] for t in report["tests"]), 1),
            "metrics": {m["name"]: {k: m.get(k) for k in ("value", "unit", "baseline", "ratio", "threshold", "verdict")} for m in report["metrics"]},
        }
    device = next((json.loads(p.read_text())["device"] for p in sorted(directory.glob("*.json"))), None)
    jsonfile.write_json(out, {"device": device, "steps": steps}, SUMMARY_SCHEMA)
    print(f"summary: {len(steps)} steps written to {out}")
    return True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("record", "aa", "detect", "summary"))
    parser.add_argument("--dir", type=Path, required=True, help="working folder (baselines and reports)")
    parser.add_argument("--runs", type=int, default=3, help="A/A reruns (default 3)")
    parser.add_argument("--out", type=Path, help="summary: the JSON file to write")
    args = parser.parse_args(own)
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.step == "record":
        ok = _step_record(args.dir, extra)
    elif args.step == "aa":
        ok = _step_aa(args.dir, extra, args.runs)
    elif args.step == "detect":
        ok = _step_detect(args.dir, extra)
    else:
        if args.out is None:
            parser.error("summary needs --out PATH")
        ok = _step_summary(args.dir, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
