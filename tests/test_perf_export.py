"""pytest-benchmark export: entries pytest-benchmark's own tools read, untimed metrics kept aside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocm_validate.perf.benchmark_json import (
    BENCHMARK_SCHEMA,
    benchmark_document,
    benchmark_entry,
)
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing
from rocm_validate.results import jsonfile
from rocm_validate.results.metrics import Metric


def timed_metric() -> Metric:
    timing = Timing(SampleSummary((0.0015, 0.0016, 0.0015), calls=4), "device-events", 0.3, True)
    return Metric(
        name="gemm.bf16.8192x8192x8192",
        value=731.0,
        unit="TFLOP/s",
        nodeid="suites/perf/test_gemm.py::test_gemm_throughput[bf16-square-8192]",
        baseline=720.0,
        ratio=731.0 / 720.0,
        verdict="pass",
        extra={"timing": timing.details()},
    )


def test_a_timed_metric_becomes_a_pytest_benchmark_entry_with_its_verdict() -> None:
    entry = benchmark_entry(timed_metric())
    assert entry is not None
    assert entry["fullname"].endswith("::gemm.bf16.8192x8192x8192")
    assert entry["stats"]["rounds"] == 3 and entry["stats"]["iterations"] == 4
    assert entry["extra_info"]["verdict"] == "pass" and entry["extra_info"]["unit"] == "TFLOP/s"


def test_an_untimed_metric_is_listed_apart_not_dropped() -> None:
    memory = Metric(name="train.bert-large.eager.peak_memory", value=31.2, unit="GiB", better="lower")
    assert benchmark_entry(memory) is None
    document = benchmark_document([timed_metric(), memory], None, {"node": "n"}, {"id": "abc"})
    assert [b["name"] for b in document["benchmarks"]] == ["gemm.bf16.8192x8192x8192"]
    assert document["rocm_validate"]["untimed_metrics"][0]["name"] == "train.bert-large.eager.peak_memory"


def test_pytest_benchmark_compare_reads_the_exported_file(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.json"
    jsonfile.write_json(
        path, benchmark_document([timed_metric()], None, {"node": "n"}, {"id": "abc"}), BENCHMARK_SCHEMA
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "gemm.bf16.8192x8192x8192" in done.stdout and "Rounds" in done.stdout
