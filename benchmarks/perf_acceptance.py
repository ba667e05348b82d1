"""The perf suite's acceptance benchmarks, one step per command (each fits a 10-minute slot):

    python benchmarks/perf_acceptance.py record --dir DIR [--runs 2]   # fresh baselines in DIR/baselines, runs folded
    python benchmarks/perf_acceptance.py aa --dir DIR [--runs 3]       # reruns against them: zero failures
    python benchmarks/perf_acceptance.py detect --dir DIR [--baselines B]  # re-judge the A/A runs at x1.05 and x1.10
    python benchmarks/perf_acceptance.py crossval --dir DIR [--reports R1 R2 ...]  # each run against the others folded
    python benchmarks/perf_acceptance.py fold --dir DIR --reports R1 R2 ... --out FOLDER [--onto B --drop 'sdpa.*']  # baselines from run reports
    python benchmarks/perf_acceptance.py summary --dir DIR --out benchmarks/results/acceptance-<key>.json

Arguments after `--` go to pytest (e.g. `-- -k "not compiled"`, `--rocm-device=1`). Every pytest
run keeps its report (DIR/<step>.json) and prints its wall time.

`detect` needs no GPU: the gate is a pure function of a measurement and a baseline, so each A/A
run's measurements are judged again, with the project's own gate, against every throughput
baseline scaled by 1.05 and by 1.10 (a stack 5% / 10% slower than the one recorded). Every gated
GPU-bound throughput must fail at both scales. It judges against DIR/baselines and, with
`--baselines`, against another folder too (the committed baselines, recorded on another VM), and
states each metric's detectable change under the current gate and under the gate as it was before
clock-aware judging and folded runs ("before": no per-clock basis, no clock floor, no run spread).
`crossval` is the A/A test with folded baselines: each run's report is judged against a baseline
folded, by the project's own `decide_update`, from every other run given (leave one out), at x1
(no failure allowed) and at x1.05 / x1.10 (every gated GPU-bound throughput must fail). `fold`
writes such a baseline folder from reports, as repeated `--update-baselines` runs would have.
Reports recorded before the window clock's standard deviation was (`sd_mhz`) get the current
per-clock noise estimate with the deviation approximated as a quarter of the readings' range.
Exit status 1 when a step's criterion fails.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocm_validate.perf import gate
from rocm_validate.perf.baselines import BaselineEntry, decide_update, stored_clock
from rocm_validate.perf.stats import per_clock_noise_estimate
from rocm_validate.platform.clocks import mean_clock_error
from rocm_validate.results import jsonfile
from rocm_validate.results.metrics import Metric
from rocm_validate.results.report import metric_title

DETECTION_SCALES = (1.05, 1.10)
FAILING = ("regressed", "mismatch", "invalid", "below-floor")
SUMMARY_SCHEMA: dict[str, Any] = {"title": "perf acceptance", "type": "object", "required": ["steps"]}


def run_pytest(directory: Path, step: str, baselines: Path, extra: list[str]) -> tuple[int, dict[str, Any], float]:
    """One perf-suite run; returns its exit status, its rocm-validate report and its wall time."""
    report = directory / f"{step}.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--rocm-suite=perf",
        f"--rocm-baselines={baselines}",
        f"--rocm-report={report}",
        "-p",
        "no:cacheprovider",
        "-q",
        *extra,
    ]
    print("$ " + shlex.join(command), flush=True)
    started = time.perf_counter()
    status = subprocess.run(command, check=False).returncode
    wall = time.perf_counter() - started
    print(f"{step}: exit {status}, {wall:.0f} s wall", flush=True)
    return status, json.loads(report.read_text()), wall


def must_catch(metric: Metric, threshold: gate.Threshold) -> bool:
    """A gated GPU-bound throughput: higher is better, a rate, neither informational nor host-side."""
    return (
        metric.better == "higher"
        and metric.unit.endswith("/s")
        and not threshold.informational
        and threshold.detect_limit is None
    )


def legacy(threshold: gate.Threshold, reference: gate.Baseline) -> tuple[gate.Threshold, gate.Baseline]:
    """The gate as it was before clock-aware judging and folded runs, for the 'before' column."""
    return (
        replace(threshold, per_clock=False, clock_min_band=None, detect_limit=None),
        replace(reference, runs=(), window_clock_mhz=None, capped_share=None, per_clock_dispersion=None),
    )


def rejudge(
    report: dict[str, Any], baselines: dict[str, Any], scale: float, old_gate: bool = False
) -> dict[str, dict[str, Any]]:
    """Every metric of a report judged again against `baselines` (entries by name) x `scale`;
    keyed by name, with ' [GPU i]' for a whole-node run's per-GPU metrics."""
    backend = (report.get("device") or {}).get("backend", "cuda")
    judged = {}
    for data in report["metrics"]:
        entry = baselines.get(data["name"])
        if entry is None or data.get("value") is None:
            continue
        metric = Metric.from_dict(data)
        threshold = gate.threshold_for(metric.name, backend)
        reference = gate.baseline_from_entry(entry).scaled(scale)
        if old_gate:
            threshold, reference = legacy(threshold, reference)
        judgement = gate.judge(metric, reference, threshold, "acceptance", "(re-record the acceptance baseline)")
        judged[metric_title(metric)] = {
            "verdict": judgement.verdict,
            "ratio": judgement.ratio,
            "allowed": judgement.allowed,
            "detectable": judgement.detectable,
            "basis": judgement.basis,
            "must_catch": must_catch(metric, threshold),
        }
    return judged


def _baseline_entries(folder: Path, device_key: str) -> dict[str, Any]:
    path = folder / f"{device_key}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no baselines for {device_key} there")
    return json.loads(path.read_text())["metrics"]


def _step_record(directory: Path, extra: list[str], runs: int) -> bool:
    ok = True
    for index in range(1, runs + 1):
        status, report, wall = run_pytest(
            directory, f"record{index}", directory / "baselines", ["--update-baselines", *extra]
        )
        refused = [m["name"] for m in report["metrics"] if m["verdict"] not in ("updated", "folded")]
        print(f"record{index}: {len(report['metrics'])} metrics, not recorded: {refused or 'none'}; wall {wall:.0f} s")
        ok = ok and status == 0 and not refused
    return ok


def _aa_reports(directory: Path) -> list[Path]:
    return sorted(directory.glob("aa[0-9]*.json"))


def _step_aa(directory: Path, extra: list[str], runs: int) -> bool:
    failures = 0
    start = len(_aa_reports(directory)) + 1
    for index in range(start, start + runs):
        status, report, _ = run_pytest(directory, f"aa{index}", directory / "baselines", extra)
        failed = [
            f"{m['name']} ({m['verdict']}, ratio {m['ratio']})" for m in report["metrics"] if m["verdict"] in FAILING
        ]
        failures += len(failed) + (status != 0)
        print(f"aa{index}: {len(failed)} failed metrics {failed}")
    return failures == 0


def detection(directory: Path, folders: dict[str, Path]) -> dict[str, Any]:
    """Each A/A report judged against each baseline folder at x1 and every detection scale, by
    the current gate and the old one."""
    results: dict[str, Any] = {}
    for label, folder in folders.items():
        for report_path in _aa_reports(directory):
            report = json.loads(report_path.read_text())
            entries = _baseline_entries(folder, report["device"]["device_key"])
            for scale in (1.0, *DETECTION_SCALES):
                for old_gate in (False, True):
                    key = f"{label}/{report_path.stem}/x{scale:g}/{'before' if old_gate else 'now'}"
                    results[key] = rejudge(report, entries, scale, old_gate)
    return results


def _judge_detection(results: dict[str, Any]) -> bool:
    ok = True
    for key, judged in sorted(results.items()):
        _label, _run, scale, which = key.split("/")
        must = {name: j for name, j in judged.items() if j["must_catch"]}
        if scale == "x1":
            false = sorted(name for name, j in must.items() if j["verdict"] in FAILING)
            print(f"{key}: A/A, {len(false)} false failures of {len(must)} {false or ''}")
            ok = ok and (which == "before" or not false)
        else:
            missed = sorted(
                f"{name} ({j['ratio']:.3f} vs band {1 - j['allowed']:.3f})"
                for name, j in must.items()
                if j["verdict"] not in FAILING
            )
            print(f"{key}: caught {len(must) - len(missed)} of {len(must)}; missed: {missed or 'none'}")
            ok = ok and (which == "before" or not missed)
    return ok


def _step_detect(directory: Path, committed: Path | None) -> bool:
    folders = {"fresh": directory / "baselines", **({"committed": committed} if committed else {})}
    results = detection(directory, folders)
    jsonfile.write_json(directory / "detection.json", {"steps": results}, SUMMARY_SCHEMA)
    return _judge_detection(results)


def updated_clock_noise(data: dict[str, Any]) -> dict[str, Any]:
    """A report metric with the current per-clock noise estimate (see Measurement.clock_details);
    for reports without the clock's standard deviation it is approximated from the range."""
    clock = (data.get("extra") or {}).get("clock")
    if not clock or not clock.get("readings") or data.get("dispersion") is None:
        return data
    sd = clock.get("sd_mhz", (clock["max_mhz"] - clock["min_mhz"]) / 4)
    mean_error = mean_clock_error(sd, clock["mean_mhz"], clock["readings"])
    clock = {
        **clock,
        "per_clock_dispersion": per_clock_noise_estimate(
            data["dispersion"], mean_error, clock.get("per_clock_dispersion")
        ),
    }
    return {**data, "extra": {**data["extra"], "clock": clock}}


def _provenance(device: dict[str, Any], created: str) -> dict[str, Any]:
    """What PerfContext.provenance records, from a report's device."""
    runtime = {"rocm": "HIP", "cuda": "CUDA"}.get(device.get("backend", ""))
    return {
        "date": created,
        "device_name": device.get("name"),
        "torch": device.get("torch_version"),
        "runtime": f"{runtime} {device['runtime_version']}" if runtime and device.get("runtime_version") else None,
        "driver": device.get("driver_version"),
        "libraries": dict(device.get("libraries") or {}),
        "git_commit": None,
        "telemetry": None,
    }


def fold_reports(
    reports: list[dict[str, Any]], start: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Baseline entries folded from the passing metrics of `reports`, in order, by decide_update,
    onto the entries `start` (none: a new file)."""
    entries: dict[str, dict[str, Any]] = dict(start or {})
    for report in reports:
        backend = report["device"]["backend"]
        for data in map(updated_clock_noise, report["metrics"]):
            if (
                data["verdict"] in FAILING
                or data["verdict"] in ("invalid", "refused", "noisy")
                or data.get("value") is None
            ):
                continue
            clock = (data.get("extra") or {}).get("clock") or {}
            entry = BaselineEntry(
                data["value"],
                data["unit"],
                data["better"],
                data.get("dispersion"),
                data.get("samples"),
                _provenance(report["device"], report["created"]),
                stored_clock(clock),
            )
            decision = decide_update(entries.get(data["name"]), entry, gate.threshold_for(data["name"], backend))
            if decision.action == "write" and decision.entry is not None:
                entries[data["name"]] = decision.entry.to_dict()
    return entries


def _judge_report(
    report: dict[str, Any], entries: dict[str, Any], scale: float, old_gate: bool = False
) -> dict[str, dict[str, Any]]:
    return rejudge({**report, "metrics": [updated_clock_noise(m) for m in report["metrics"]]}, entries, scale, old_gate)


def _step_crossval(directory: Path, reports: list[Path]) -> bool:
    loaded = [json.loads(p.read_text()) for p in reports]
    results: dict[str, Any] = {}
    for index, path in enumerate(reports):
        others = [r for i, r in enumerate(loaded) if i != index]
        entries = fold_reports(others)
        for scale in (1.0, *DETECTION_SCALES):
            for old_gate in (False, True):
                key = f"crossval/{path.stem}/x{scale:g}/{'before' if old_gate else 'now'}"
                results[key] = _judge_report(loaded[index], entries, scale, old_gate)
    jsonfile.write_json(directory / "crossval.json", {"steps": results}, SUMMARY_SCHEMA)
    return _judge_detection(results)


def _step_fold(reports: list[Path], out: Path, onto: Path | None, drop: list[str]) -> bool:
    loaded = [json.loads(p.read_text()) for p in reports]
    key = loaded[0]["device"]["device_key"]
    start = _baseline_entries(onto, key) if onto else {}
    dropped = sorted(name for name in start if any(fnmatch.fnmatchcase(name, pattern) for pattern in drop))
    start = {name: entry for name, entry in start.items() if name not in dropped}
    if dropped:
        print(f"fold: {len(dropped)} entries dropped before folding (measured differently now): {', '.join(dropped)}")
    data = {"schema": "rocm-validate/baselines/1", "device_key": key, "metrics": fold_reports(loaded, start)}
    from rocm_validate.perf.baselines import BASELINES_SCHEMA

    out.mkdir(parents=True, exist_ok=True)
    jsonfile.write_json(out / f"{key}.json", data, BASELINES_SCHEMA)
    print(f"fold: {len(data['metrics'])} metrics from {len(loaded)} runs written to {out / f'{key}.json'}")
    return True


def _step_summary(directory: Path, out: Path) -> bool:
    steps = {}
    for report_path in sorted(directory.glob("*.json")):
        report = json.loads(report_path.read_text())
        if report.get("schema") != "rocm-validate/report/1":
            continue  # detection.json, or an earlier summary
        steps[report_path.stem] = {
            "exit_status": report["exit_status"],
            "duration_s": round(sum(t["duration_s"] for t in report["tests"]), 1),
            "metrics": {
                m["name"]: {
                    **{
                        k: m.get(k)
                        for k in ("value", "unit", "baseline", "ratio", "threshold", "detectable", "verdict")
                    },
                    "basis": (m.get("extra") or {}).get("gate", {}).get("basis"),
                    "clock_mhz": (m.get("extra") or {}).get("clock", {}).get("mean_mhz"),
                    "capped_share": (m.get("extra") or {}).get("clock", {}).get("capped_share"),
                }
                for m in report["metrics"]
            },
        }
    detected: dict[str, Any] = {}
    for name in ("detection.json", "crossval.json"):
        if (directory / name).exists():
            detected.update(json.loads((directory / name).read_text())["steps"])
    device = next((json.loads(p.read_text())["device"] for p in sorted(directory.glob("aa*.json"))), None)
    jsonfile.write_json(out, {"device": device, "steps": steps, "detection": detected}, SUMMARY_SCHEMA)
    print(f"summary: {len(steps)} runs and {len(detected)} detection judgements written to {out}")
    return True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("record", "aa", "detect", "crossval", "fold", "summary"))
    parser.add_argument("--dir", type=Path, required=True, help="working folder (baselines and reports)")
    parser.add_argument(
        "--runs", type=int, default=None, help="record: runs folded (default 2); aa: reruns (default 3)"
    )
    parser.add_argument(
        "--baselines", type=Path, help="detect: another baselines folder to judge against (the committed one)"
    )
    parser.add_argument("--out", type=Path, help="summary: the JSON file to write; fold: the baselines folder")
    parser.add_argument(
        "--reports", type=Path, nargs="+", help="crossval / fold: run reports (default: DIR's record and aa runs)"
    )
    parser.add_argument(
        "--onto", type=Path, help="fold: the baselines folder whose entries the runs fold onto (default: none)"
    )
    parser.add_argument(
        "--drop",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="fold: --onto entries to drop first (a changed measurement)",
    )
    args = parser.parse_args(own)
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.step == "record":
        ok = _step_record(args.dir, extra, args.runs or 2)
    elif args.step == "aa":
        ok = _step_aa(args.dir, extra, args.runs or 3)
    elif args.step == "detect":
        ok = _step_detect(args.dir, args.baselines)
    elif args.step in ("crossval", "fold"):
        reports = args.reports or sorted(args.dir.glob("record[0-9]*.json")) + _aa_reports(args.dir)
        if args.step == "crossval":
            ok = _step_crossval(args.dir, reports)
        elif args.out is None:
            parser.error("fold needs --out FOLDER")
        else:
            ok = _step_fold(reports, args.out, args.onto, args.drop)
    else:
        if args.out is None:
            parser.error("summary needs --out PATH")
        ok = _step_summary(args.dir, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
