"""Node reports for the fleet's tests: real ones, from actually running the suites on the CPU
(once per test session, shared by pytest-xdist workers), and synthetic fleets derived from them:
renamed hosts, a GPU's description, metrics scaled, checks failed, a report corrupted.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
# A few fast checks of each kind on the CPU: bf16 GEMMs against float64 (correctness), the square
# GEMMs of every dtype and the device copy (perf, recorded without baselines).
SELECTION = "(test_gemm and bfloat16) or (test_gemm_throughput and square) or test_device_copy"
# The lent H100 as `rocm-validate devices --json` described it (docs/measurements/h100-devices.json).
H100 = json.loads((ROOT / "docs" / "measurements" / "h100-devices.json").read_text())["devices"][0]

Report = dict[str, Any]


def suites_command(folder: Path, host: str) -> list[str]:
    """`pytest --rocm-device=cpu --rocm-suite=correctness,perf -k SELECTION --rocm-report=<host>.json`."""
    baselines = folder / "baselines"
    baselines.mkdir(exist_ok=True)
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rocm-device=cpu",
        "--rocm-suite=correctness,perf",
        f"--rocm-baselines={baselines}",
        f"--rocm-report={folder / f'{host}.json'}",
        "-k",
        SELECTION,
        "suites",
    ]


def real_reports(tmp_path_factory: pytest.TempPathFactory, hosts: Iterable[str] = ("cpu-a", "cpu-b")) -> list[Path]:
    """Real CPU reports, one per host, each from the suites run in a fresh process with the node's
    name given as a launcher gives it (ROCM_VALIDATE_HOST). Made once per session even under
    pytest-xdist: the workers' base temporary folders share the session's folder, and take turns
    under a lock. One run at a time, on one thread: the other worker's timing tests share the CPUs."""
    session = tmp_path_factory.getbasetemp()
    shared = (session.parent if os.environ.get("PYTEST_XDIST_WORKER") else session) / "fleet-real-reports"
    shared.mkdir(exist_ok=True)
    paths = [shared / f"{host}.json" for host in hosts]
    with FileLock(str(shared / ".lock")):
        for host, path in zip(hosts, paths):
            if path.is_file():
                continue
            command = suites_command(shared, host)
            environment = {**os.environ, "ROCM_VALIDATE_HOST": host, "OMP_NUM_THREADS": "1"}
            environment.pop("PYTEST_XDIST_WORKER", None)
            done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
            assert path.is_file(), f"no report from {' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return paths


def load(path: Path) -> Report:
    return json.loads(path.read_text())


def _metrics(report: Report) -> Iterable[dict[str, Any]]:
    yield from report["metrics"]
    for test in report["tests"]:
        yield from test["metrics"]


def with_host(report: Report, host: str) -> Report:
    changed = copy.deepcopy(report)
    changed["environment"]["host"] = host
    return changed


def as_gpu(report: Report, **device: Any) -> Report:
    """The same report as if an H100 node had written it, its measurements quiet (no other work
    on the host), so the GPU's bands apply."""
    changed = copy.deepcopy(report)
    changed["device"] = {**H100, **device}
    for metric in _metrics(changed):
        metric.get("extra", {}).pop("telemetry", None)
    return changed


def scaled(report: Report, prefix: str, factor: float) -> Report:
    """Every metric whose name starts with `prefix` times `factor`."""
    changed = copy.deepcopy(report)
    for metric in _metrics(changed):
        if metric["name"].startswith(prefix):
            metric["value"] *= factor
    return changed


def jittered(report: Report, seed: int, spread: float = 0.005) -> Report:
    """Every metric moved by up to +-`spread`, as runs of one stack on healthy nodes differ."""
    rng = random.Random(seed)
    changed = copy.deepcopy(report)
    factors: dict[str, float] = {}
    for metric in _metrics(changed):
        metric["value"] *= factors.setdefault(metric["name"], 1 + rng.uniform(-spread, spread))
    return changed


def failing(report: Report, check: str, category: str = "numerics") -> Report:
    """`check` (a test id of the report) failed with `category`."""
    changed = copy.deepcopy(report)
    tests = [t for t in changed["tests"] if t["nodeid"] == check]
    assert tests, f"{check} is not in the report"
    for test in tests:
        test.update(outcome="failed", category=category, message=f"AssertionError: planted {category} failure")
    changed["exit_status"] = 1
    return changed


def passed_checks(report: Report) -> list[str]:
    return sorted({t["nodeid"] for t in report["tests"] if t["outcome"] == "passed"})


def with_other_process(report: Report, prefix: str, process: str = "python3", pid: int = 4242) -> Report:
    """Another process seen on the GPU while the metrics starting with `prefix` were measured."""
    changed = copy.deepcopy(report)
    seen = {"processes": [{"pid": pid, "name": process, "memory_bytes": 2 * 1024**3}]}
    for metric in _metrics(changed):
        if metric["name"].startswith(prefix):
            metric.setdefault("extra", {})["telemetry"] = {"processes": {"before": seen, "after": seen}}
    return changed


def write_fleet(folder: Path, reports: dict[str, Report]) -> Path:
    """Each report as <host>.json in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for host, report in reports.items():
        (folder / f"{host}.json").write_text(json.dumps(report))
    return folder


def synthetic_fleet(
    template: Report, count: int, change: dict[int, Callable[[Report], Report]] | None = None
) -> dict[str, Report]:
    """`count` healthy GPU nodes node-0..node-N from one real report (jittered apart), with
    `change[i]` applied to node i."""
    base = as_gpu(template)
    fleet = {}
    for index in range(count):
        report = jittered(with_host(base, f"node-{index}"), seed=index)
        fleet[f"node-{index}"] = (change or {}).get(index, lambda r: r)(report)
    return fleet
