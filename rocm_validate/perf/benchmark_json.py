"""`--rocm-benchmark-json`: the run's timed metrics as pytest-benchmark JSON.

Dashboards that plot pytest-benchmark history (github-action-benchmark's `pytest` tool,
`pytest-benchmark compare`) read `benchmarks[].stats`; those stats are computed by
pytest-benchmark's own `Stats` over seconds per call, and machine and commit information come
from pytest-benchmark's own collectors, so the file means exactly what those tools expect.
`ops` (calls per second) rises with throughput and falls with latency, as they assume.
Each entry's `extra_info` carries the metric as rocm-validate reports it (value, unit, baseline,
verdict, % of peak); metrics that are not timings (peak memory, speedups) have no stats and are
listed under the extra top-level key `rocm_validate`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.results.metrics import Metric

_EXTRA_FIELDS = (
    "value",
    "unit",
    "better",
    "baseline",
    "ratio",
    "threshold",
    "verdict",
    "peak",
    "percent_of_peak",
    "work",
    "work_unit",
)


def benchmark_entry(metric: Metric) -> dict[str, Any] | None:
    """One pytest-benchmark `benchmarks[]` entry, or None for a metric without timing stats."""
    timing = metric.extra.get("timing") or {}
    stats = timing.get("stats")
    if not stats:
        return None
    described = metric.to_dict()
    return {
        "group": metric.nodeid.split("::", 1)[0] or None,
        "name": metric.name,
        "fullname": f"{metric.nodeid}::{metric.name}",
        "params": None,
        "param": None,
        "extra_info": {key: described[key] for key in _EXTRA_FIELDS},
        "options": {
            "timer": timing.get("method"),
            "min_rounds": timing.get("rounds"),
            "warmup": timing.get("warmup_s"),
            "max_time": timing.get("window_s"),
            "disable_gc": False,
        },
        "stats": dict(stats),
    }


def benchmark_document(
    metrics: Iterable[Metric],
    device: DeviceInfo | None,
    machine_info: dict[str, Any],
    commit_info: dict[str, Any],
) -> dict[str, Any]:
    """The whole file: pytest-benchmark's top-level keys, plus the untimed metrics under `rocm_validate`."""
    import pytest_benchmark

    metrics = list(metrics)
    entries = [e for e in (benchmark_entry(m) for m in metrics) if e is not None]
    return {
        "machine_info": {**machine_info, "gpu": device.to_dict() if device is not None else None},
        "commit_info": commit_info,
        "benchmarks": entries,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": pytest_benchmark.__version__,
        "rocm_validate": {"untimed_metrics": [m.to_dict() for m in metrics if benchmark_entry(m) is None]},
    }


def collect_machine_and_commit() -> tuple[dict[str, Any], dict[str, Any]]:
    """pytest-benchmark's own machine and commit descriptions (it keys history by them)."""
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
    from pytest_benchmark.utils import get_commit_info

    return pytest_benchmark_generate_machine_info(), get_commit_info()


BENCHMARK_SCHEMA: dict[str, Any] = {
    "title": "pytest-benchmark",
    "type": "object",
    "required": ["machine_info", "commit_info", "benchmarks", "datetime", "version"],
    "properties": {
        "benchmarks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "fullname", "stats"],
                "properties": {
                    "stats": {
                        "type": "object",
                        "required": ["min", "max", "mean", "stddev", "median", "iqr", "ops", "rounds", "iterations"],
                    }
                },
            },
        }
    },
}
