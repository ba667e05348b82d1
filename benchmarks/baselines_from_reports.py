"""Fold what recording runs recorded into a baselines file, from their JSON reports.

    python benchmarks/baselines_from_reports.py BASELINES_FOLDER COMMIT REPORT.json...

For when a `--update-baselines` run's baselines file could not be brought back from the machine it
ran on (the device tool returns at most 8 files), but its JSON report (`--rocm-report`) could: each
metric the run recorded (verdict `updated` or `folded` in the report) is folded into the device's
file in the reports' order, as the run itself folded it (`perf/baselines.py` `fold`: the same
device and stack fold, another stack starts over). Refusals (noisy, regressed) stay unrecorded, as
the run decided. COMMIT names the tree that ran (the provenance's `git_commit`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocm_validate.perf.baselines import (
    BaselineEntry,
    BaselineStore,
    UpdateDecision,
    fold,
    same_stack,
    stored_clock,
)
from rocm_validate.results import jsonfile
from rocm_validate.results.metrics import Verdict
from rocm_validate.results.report import REPORT_SCHEMA

RECORDED = {Verdict.UPDATED.value, Verdict.FOLDED.value}


def provenance(report: Mapping[str, Any], commit: str) -> dict[str, Any]:
    """The provenance the recording run wrote (perf/recorder.py `provenance`), from its report."""
    device = report["device"]
    runtime = {"rocm": "HIP", "cuda": "CUDA"}.get(device.get("backend"))
    version = device.get("runtime_version")
    return {
        "date": report["created"],
        "device_name": device["name"],
        "torch": device.get("torch_version"),
        "runtime": f"{runtime} {version}" if runtime and version else None,
        "driver": device.get("driver_version"),
        "libraries": dict(device.get("libraries") or {}),
        "git_commit": commit,
        "telemetry": None,
    }


def decide(old: Mapping[str, Any] | None, new: BaselineEntry) -> UpdateDecision:
    """What the run did with a measurement it recorded: fold into the same stack's entry, else start over."""
    same_unit = old is not None and (old["unit"], old["better"]) == (new.unit, new.better)
    if old is not None and same_unit and same_stack(old.get("provenance") or {}, new.provenance):
        return UpdateDecision("write", Verdict.FOLDED, "folded", fold(old, new))
    return UpdateDecision("write", Verdict.UPDATED, "recorded", replace(new, runs=(new.run(),)))


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    folder, commit, reports = Path(argv[0]), argv[1], [Path(p) for p in argv[2:]]
    for path in reports:
        report = jsonfile.read_json(path, REPORT_SCHEMA, fix="use the JSON report of a recording run")
        store = BaselineStore(folder, report["device"]["device_key"], "pytest --update-baselines")
        origin = provenance(report, commit)
        folded = 0
        for metric in report["metrics"]:
            if metric["verdict"] not in RECORDED:
                continue
            entry = BaselineEntry(
                value=metric["value"],
                unit=metric["unit"],
                better=metric["better"],
                dispersion=metric["dispersion"],
                samples=metric["samples"],
                provenance=origin,
                clock=stored_clock((metric.get("extra") or {}).get("clock")),
            )
            store.update(metric["name"], entry, decide)
            folded += 1
        print(f"{path}: {folded} recorded measurements folded into {store.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
