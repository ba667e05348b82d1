"""The real perf suite on the CPU, as CI runs it: record baselines, then gate against them
with half the baselines scaled up 1000x. Every scaled metric must regress and every other one
must pass. CPU timings on a shared machine are too noisy to gate at GPU thresholds, so the
run widens the CPU band from the ini (the GPU defaults are tested in test_perf_gate.py).
The gate run takes only the GEMM and copy tests: their scaled and unscaled metrics are enough."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOSE_CPU_BAND = "rocm_perf_thresholds=* backend=cpu floor=0.9 cap=0.95 k=1"


def _pytest(tmp_path: Path, report: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    command = [
        sys.executable, "-m", "pytest", "suites/perf", "--rocm-suite=perf", "--rocm-device=cpu",
        f"--rocm-baselines={tmp_path / 'baselines'}", f"--rocm-report={tmp_path / report}",
        "-o", LOOSE_CPU_BAND, "-p", "no:cacheprovider", "-q", *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    return done, json.loads((tmp_path / report).read_text())


def test_the_cpu_perf_suite_records_baselines_then_catches_exactly_the_scaled_ones(tmp_path: Path) -> None:
    done, report = _pytest(tmp_path, "record.json", "--update-baselines", "--rocm-perf-window=0.5")
    assert done.returncode == 0, done.stdout[-3000:]
    metrics = report["metrics"]
    assert len(metrics) >= 15 and {m["verdict"] for m in metrics} == {"updated"}, done.stdout[-3000:]
    assert {m["name"].split(".")[0] for m in metrics} == {"gemm", "sdpa", "copy", "train"}

    path = tmp_path / "baselines" / f"{report['device']['device_key']}.json"
    data = json.loads(path.read_text())
    scaled = {name for name in data["metrics"] if name.startswith(("gemm.fp32.", "copy."))}
    for name in scaled:
        data["metrics"][name]["value"] *= 1000
    path.write_text(json.dumps(data))

    done, report = _pytest(tmp_path, "gate.json", "-k", "gemm and (fp32 or bf16) or copy")
    verdicts = {m["name"]: m["verdict"] for m in report["metrics"]}
    assert done.returncode == 1, done.stdout[-3000:]
    assert {n for n, v in verdicts.items() if v == "regressed"} == scaled, done.stdout[-3000:]
    assert {v for n, v in verdicts.items() if n not in scaled} <= {"pass", "improved"}, done.stdout[-3000:]
