"""The real perf suite on the CPU, as CI runs it: record baselines, then gate against them
with some baselines scaled up 1000x. Every scaled metric must regress and every other one must
pass. CPU timings on a shared machine are too noisy to gate at GPU thresholds, so the run widens
the CPU band from the ini (the GPU defaults are tested in test_perf_gate.py). The gate run takes
only the GEMM and copy tests: their scaled and unscaled metrics are enough."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOOSE_CPU_BAND = "rocm_perf_thresholds=* backend=cpu floor=0.9 cap=0.95 k=1"


def _run(pytester: pytest.Pytester, report: str, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest(
        str(REPO / "suites" / "perf"),
        f"--rootdir={REPO}",
        "--rocm-suite=perf",
        "--rocm-device=cpu",
        f"--rocm-baselines={pytester.path / 'baselines'}",
        f"--rocm-report={pytester.path / report}",
        "-o",
        LOOSE_CPU_BAND,
        "-p",
        "no:cacheprovider",
        *args,
    )
    return result, json.loads((pytester.path / report).read_text())


def test_the_cpu_perf_suite_records_baselines_then_catches_exactly_the_scaled_ones(pytester: pytest.Pytester) -> None:
    result, report = _run(pytester, "record.json", "--update-baselines", "--rocm-perf-window=0.5")
    assert result.ret == 0, result.stdout.str()[-3000:]
    metrics = report["metrics"]
    assert len(metrics) >= 15 and {m["verdict"] for m in metrics} == {"updated"}, result.stdout.str()[-3000:]
    assert {m["name"].split(".")[0] for m in metrics} == {"gemm", "sdpa", "copy", "train"}

    path = pytester.path / "baselines" / f"{report['device']['device_key']}.json"
    data = json.loads(path.read_text())
    scaled = {name for name in data["metrics"] if name.startswith(("gemm.fp32.", "copy."))}
    for name in scaled:
        data["metrics"][name]["value"] *= 1000
    path.write_text(json.dumps(data))

    result, report = _run(pytester, "gate.json", "-k", "gemm and (fp32 or bf16) or copy")
    verdicts = {m["name"]: m["verdict"] for m in report["metrics"]}
    assert result.ret == 1, result.stdout.str()[-3000:]
    assert {n for n, v in verdicts.items() if v == "regressed"} == scaled, result.stdout.str()[-3000:]
    assert {v for n, v in verdicts.items() if n not in scaled} <= {"pass", "improved"}, result.stdout.str()[-3000:]


NOISY_ON_A_BUSY_HOST = """
import itertools
import time

calls = itertools.count()


def test_a_busy_host(perf):
    def work():
        # the host keeps getting busy: every third stretch of 20 calls runs four times slower
        time.sleep(0.0004 * (4 if (next(calls) // 20) % 3 == 0 else 1))

    perf.throughput("copy.busy_host", perf.measure(work), 1e6, "GB/s")
"""


def test_update_baselines_on_a_busy_cpu_refuses_the_noisy_metric_by_default(pytester):
    pytester.makeini("[pytest]\n")
    pytester.mkdir("suites")
    pytester.mkdir("suites/perf")
    (pytester.path / "suites" / "perf" / "test_busy.py").write_text(NOISY_ON_A_BUSY_HOST)
    result = pytester.runpytest(
        "--rocm-suite=perf", "--rocm-device=cpu", "--update-baselines", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*copy.busy_host: not recorded: this run's round-to-round noise * exceeds 20.00%*rerun on an idle device*",
            "rocm-validate baselines refused as too noisy: 1",
            "  copy.busy_host: new, *",
        ]
    )
    assert not list((pytester.path / "baselines").glob("*.json")), "a refused metric must not create a baseline file"
