"""What a run leaves behind: the metrics table, the JSON report and its schemas, device summaries."""

from __future__ import annotations

import os
import platform
import re
import shlex
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from rocm_validate import __version__
from rocm_validate.platform.devices import VISIBILITY_VARIABLES, DeviceInfo
from rocm_validate.results.known_defects import Matched
from rocm_validate.results.metrics import GpuRef, Metric, format_number
from rocm_validate.results.triage import CATEGORIES, CheckRecord

_NUMBER = {"type": ["number", "null"]}
_STRING = {"type": ["string", "null"]}
_INTEGER = {"type": ["integer", "null"]}

DEVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["backend", "index", "name", "arch", "device_key", "fp8_formats", "errors"],
    "properties": {
        "backend": {"enum": ["rocm", "cuda", "cpu"]},
        "index": _INTEGER,
        "name": {"type": "string"},
        "arch": {"type": "string"},
        "device_key": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
        "arch_features": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "compute_units": _INTEGER,
        "memory_bytes": _INTEGER,
        "l2_cache_bytes": _INTEGER,
        "last_level_cache_bytes": _INTEGER,
        "max_clock_mhz": _INTEGER,
        "max_memory_clock_mhz": _INTEGER,
        "driver_version": _STRING,
        "runtime_version": _STRING,
        "torch_version": _STRING,
        "collective_library": _STRING,
        "collective_version": _STRING,
        "libraries": {"type": "object", "additionalProperties": {"type": "string"}},
        "compute_partition": _STRING,
        "memory_partition": _STRING,
        "visibility": {"type": "object", "additionalProperties": {"type": "string"}},
        "fp8_formats": {"type": "array", "items": {"type": "string"}},
        "scaled_mm": {"type": "boolean"},
        "attention_backends": {"type": "array", "items": {"type": "string"}},
        "flash_attention": {"type": "boolean"},
        "mem_efficient_attention": {"type": "boolean"},
        "preferred_blas": _STRING,
        "pci_bus_id": _STRING,
        "uuid": _STRING,
        "sources": {"type": "array", "items": {"type": "string"}},
        "errors": {"type": "array", "items": {"type": "string"}},
    },
}

DEVICES_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate devices",
    "type": "object",
    "required": ["schema", "devices"],
    "properties": {
        "schema": {"const": "rocm-validate/devices/1"},
        "devices": {"type": "array", "items": DEVICE_SCHEMA},
    },
}

GPU_REF_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["index"],
    "properties": {"index": {"type": "integer"}, "pci_bus_id": _STRING, "uuid": _STRING, "device_key": _STRING},
}

METRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "value", "unit", "better", "verdict"],
    "properties": {
        "name": {"type": "string"},
        "value": _NUMBER,
        "unit": {"type": "string"},
        "better": {"enum": ["higher", "lower"]},
        "baseline": _NUMBER,
        "ratio": _NUMBER,
        "detectable": _NUMBER,
        "peak": _NUMBER,
        "percent_of_peak": _NUMBER,
        "verdict": {"type": "string"},
        "message": {"type": "string"},
        "gpu": GPU_REF_SCHEMA,
    },
}

# One GPU's metric against the median of the same metric on its peers (results/peers.py).
PEER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "subject", "value", "median", "peers", "ratio", "verdict"],
    "properties": {
        "name": {"type": "string"},
        "subject": {"type": "string"},
        "gpu": GPU_REF_SCHEMA,
        "value": {"type": "number"},
        "median": {"type": "number"},
        "peers": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "allowed": _NUMBER,
        "verdict": {"enum": ["pass", "below-peers"]},
        "message": {"type": "string"},
    },
}

# A whole-node run: every selected device, its pinning and its own test counts.
NODE_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["gpus"],
    "properties": {
        "workers": {"type": "integer"},
        "gpus": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["device", "summary"],
                "properties": {
                    "device": DEVICE_SCHEMA,
                    "pinning": _STRING,
                    "summary": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
            },
        },
    },
}

# A preflight check's findings about the host (rocm_validate.preflight.checks.Finding) travel as
# this user property, a JSON list, as a correctness test's margins travel as NUMERICS_PROPERTY.
WORK_PROPERTY = "rocm_work"  # a test's kind of work (rocm_validate.node.work), in its reports' user properties
FINDINGS_PROPERTY = "rocm_findings"
FINDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["check", "status", "expected", "found", "source"],
    "properties": {
        "check": {"type": "string"},
        "status": {"enum": ["pass", "warn", "fail", "skip"]},
        "expected": {"type": "string"},
        "found": {"type": "string"},
        "source": {"type": "string"},
        "subject": {"type": "string"},
    },
}

REPORT_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate report",
    "type": "object",
    "required": ["schema", "created", "command", "device", "environment", "settings", "summary", "tests", "metrics"],
    "properties": {
        "schema": {"const": "rocm-validate/report/1"},
        "created": {"type": "string"},
        "command": {"type": "string"},
        "exit_status": {"type": "integer"},
        "device": {"anyOf": [DEVICE_SCHEMA, {"type": "null"}]},
        "environment": {"type": "object"},
        "settings": {"type": "object"},
        "summary": {"type": "object", "additionalProperties": {"type": "integer"}},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["nodeid", "outcome", "duration_s"],
                "properties": {
                    "nodeid": {"type": "string"},
                    "suite": _STRING,
                    "outcome": {"enum": ["passed", "failed", "skipped", "error", "xfailed", "xpassed", "known-defect"]},
                    "duration_s": {"type": "number"},
                    "message": {"type": "string"},
                    "metrics": {"type": "array", "items": METRIC_SCHEMA},
                    "numerics": {"type": "array", "items": {"type": "object", "required": ["check", "passed"]}},
                    "category": {"enum": [*CATEGORIES, None]},
                    "fix": _STRING,
                    "blamed_gpus": {"type": "array", "items": {"type": "integer"}},
                    "findings": {"type": "array", "items": FINDING_SCHEMA},
                    "gpu": GPU_REF_SCHEMA,
                    "work": {"enum": ["per-gpu", "shared", "node-wide", None]},
                    "known_defect": {
                        "type": ["object", "null"],
                        "required": ["id", "library", "workaround", "reproduced"],
                    },
                },
            },
        },
        "metrics": {"type": "array", "items": METRIC_SCHEMA},
        "verdict": {"type": "string"},
        "node": NODE_SCHEMA,
        "peers": {"type": "array", "items": PEER_SCHEMA},
    },
}


FAILING_OUTCOMES = ("failed", "error", "xpassed")


def on_gpu(text: str, gpu: GpuRef | None) -> str:
    """`text` with its GPU in a whole-node run: 'gemm.bf16.8192x8192x8192 [GPU 3]'."""
    return text if gpu is None else f"{text} [GPU {gpu.index}]"


@dataclass
class TestResult:
    """The outcome of one test across its setup, call and teardown phases."""

    nodeid: str
    suite: str | None = None
    outcome: str = "passed"
    duration_s: float = 0.0
    message: str = ""
    metrics: list[Metric] = field(default_factory=list)
    numerics: list[dict[str, Any]] = field(default_factory=list)  # each check's margins (correctness)
    category: str | None = None  # why it failed (rocm_validate.results.triage); None unless failed
    fix: str | None = None  # what to fix, where the failed check said (a configuration failure's action)
    blamed_gpus: tuple[int, ...] = ()  # the GPUs a failed node-wide test points at (triage.BLAME_PROPERTY)
    findings: list[dict[str, Any]] = field(default_factory=list)  # preflight facts about the host
    gpu: GpuRef | None = None  # the GPU it ran on, in a whole-node run
    work: str | None = None  # 'per-gpu', 'shared' or 'node-wide' (rocm_validate.node.work)
    started: float | None = None  # epoch seconds its first phase began (for where the run's time went)
    stopped: float | None = None  # epoch seconds its last phase ended
    known_defect: Matched | None = None  # the known-defect entry it matched (core.known_defects)

    @property
    def title(self) -> str:
        """The test id, with its GPU in a whole-node run: 'suites/perf/test_gemm.py::test_x [GPU 3]'."""
        return on_gpu(self.nodeid, self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "suite": self.suite,
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 6),
            "message": self.message,
            "metrics": [m.to_dict() for m in self.metrics],
            "numerics": self.numerics,
            "category": self.category,
            "fix": self.fix,
            "blamed_gpus": list(self.blamed_gpus),
            "findings": self.findings,
            "gpu": None if self.gpu is None else asdict(self.gpu),
            "work": self.work,
            "known_defect": None if self.known_defect is None else self.known_defect.to_dict(),
        }

    @property
    def failed(self) -> bool:
        """Failed, errored or passed a strict xfail: every outcome that fails the run."""
        return self.outcome in FAILING_OUTCOMES


def device_summary(device: DeviceInfo) -> str:
    """'NVIDIA H100 80GB HBM3 (cuda:0, sm_90, key nvidia-h100-80gb-hbm3-sm90)'."""
    parts = [device.torch_device, *([device.arch] if device.is_gpu else []), f"key {device.device_key}"]
    if device.compute_partition or device.memory_partition:
        parts.append("/".join(p for p in (device.compute_partition, device.memory_partition) if p))
    return f"{device.name} ({', '.join(parts)})"


def software_items(backend: str, torch: str | None, runtime: str | None, driver: str | None) -> list[str]:
    """['torch 2.11.0+cu130', 'CUDA 13.0', 'driver 580.159.04']: the software a rollout changes."""
    name = {"rocm": "HIP", "cuda": "CUDA"}.get(backend)
    items = [f"torch {torch}"]
    if name:
        items.append(f"{name} {runtime or 'unknown'}")
    if driver:
        items.append(f"driver {driver}")
    return items


def stack_summary(device: DeviceInfo) -> str:
    items = software_items(device.backend, device.torch_version, device.runtime_version, device.driver_version)
    if device.fp8_formats:
        items.append("fp8 " + "/".join(device.fp8_formats))
    if device.preferred_blas:
        items.append(f"blas {device.preferred_blas}")
    return ", ".join(items)


_COLUMNS = ("metric", "value", "unit", "baseline", "ratio", "detects", "% peak", "verdict")


def metrics_in_order(results: Iterable[TestResult]) -> list[Metric]:
    """Every metric of `results`, ordered by test id, then GPU, so xdist runs list them alike."""
    ordered = sorted(results, key=lambda r: (r.nodeid, -1 if r.gpu is None else r.gpu.index))
    return [m for r in ordered for m in r.metrics]


def metric_title(metric: Metric) -> str:
    """The metric's name, with its GPU in a whole-node run: 'gemm.bf16.8192x8192x8192 [GPU 3]'."""
    return on_gpu(metric.name, metric.gpu)


def metric_rows(metrics: Iterable[Metric]) -> list[tuple[str, ...]]:
    return [
        (
            metric_title(m),
            format_number(m.value),
            m.unit,
            format_number(m.baseline),
            "-" if m.ratio is None else f"{m.ratio:.3f}",
            "-" if m.detectable is None else f"{m.detectable:.1%}",
            "-" if m.percent_of_peak is None else f"{m.percent_of_peak:.1f}",
            m.verdict,
        )
        for m in metrics
    ]


def metrics_table(metrics: list[Metric]) -> list[str]:
    """A plain aligned table, one metric a row, followed by the messages that explain verdicts."""
    rows = [_COLUMNS, *metric_rows(metrics)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i in (0, 2, 7) else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{metric_title(m)}: {m.message}" for m in metrics if m.message]
    return lines + ([""] + notes if notes else [])


# The node's name in a fleet, first set first: ROCM_VALIDATE_HOST (a launcher's choice; the
# Kubernetes Job sets it to the pod's spec.nodeName, since a pod's own host name is the pod's),
# then Slurm's name for the node (the name `scontrol update NodeName=... State=DRAIN` takes).
HOST_VARIABLES = ("ROCM_VALIDATE_HOST", "SLURMD_NODENAME")


def host_name() -> str:
    """The name `rocm-validate fleet` and a drain list know this node by (see HOST_VARIABLES),
    else the machine's host name."""
    return next((os.environ[v].strip() for v in HOST_VARIABLES if os.environ.get(v, "").strip()), platform.node())


def environment() -> dict[str, Any]:
    """Interpreter, platform, key package versions, the variables that steer GPU libraries and the
    node's name in a fleet (`host`)."""
    packages = {}
    for name in (
        "torch",
        "transformers",
        "numpy",
        "pytest",
        "hypothesis",
        "pytest-benchmark",
        "mlperf-logging",
        "triton",
    ):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    steering = [
        *VISIBILITY_VARIABLES,
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "TORCH_ROCM_FA_PREFER_CK",
        "PYTORCH_TUNABLEOP_ENABLED",
    ]
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "host": host_name(),
        "rocm_validate": __version__,
        "packages": packages,
        "variables": {name: os.environ[name] for name in steering if name in os.environ},
    }


def outcome_counts(results: Iterable[TestResult]) -> dict[str, int]:
    """{'passed': 250, 'skipped': 15, ...} over `results`."""
    return dict(Counter(result.outcome for result in results))


def build_report(
    settings: dict[str, Any],
    device: DeviceInfo | None,
    results: list[TestResult],
    command: list[str],
    exit_status: int,
    verdict: str | None = None,
    node: dict[str, Any] | None = None,
    peers: list[dict[str, Any]] | None = None,
    time: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report; `node` (whole-node runs: the GPUs and their counts) and `peers` (each GPU's
    metrics against its peers' median) are added by whole-node runs; `time` says where the run's
    time went against its level's budget (rocm_validate.node.budget)."""
    summary = outcome_counts(results)
    return {
        "schema": "rocm-validate/report/1",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(command),
        "exit_status": int(exit_status),
        "device": device.to_dict() if device is not None else None,
        "environment": environment(),
        "settings": dict(settings),
        "summary": summary,
        "tests": [r.to_dict() for r in results],
        "metrics": [m.to_dict() for r in results for m in r.metrics],
        **({"verdict": verdict} if verdict is not None else {}),
        "node": node,
        "peers": list(peers or []),
        **({"time": time} if time is not None else {}),
    }


_SKIP_PREFIX = re.compile(r"^(Skipped: |[\w.]*NotValidated: )")


def _skip_reason(message: str) -> str:
    """'Skipped: needs a GPU, found cpu (Xeon)' -> 'needs a GPU, found cpu (Xeon)'; a not-validated
    skip's exception name goes too."""
    return _SKIP_PREFIX.sub("", message).strip()


def suite_summary_lines(results: Iterable[TestResult], top: int = 5) -> list[str]:
    """One line per suite that ran, skips counted as not validated, then the commonest skip reasons.

    'rocm-validate correctness: 250 passed, 0 failed, 15 skipped (not validated)'
    """
    by_suite: dict[str, list[TestResult]] = {}
    for result in results:
        if result.suite:
            by_suite.setdefault(result.suite, []).append(result)
    lines = []
    for suite in sorted(by_suite):
        outcomes = [r.outcome for r in by_suite[suite]]
        failed = sum(outcomes.count(o) for o in FAILING_OUTCOMES)
        categories = Counter(r.category for r in by_suite[suite] if r.failed and r.category)
        why = f" ({', '.join(f'{c}: {categories[c]}' for c in CATEGORIES if categories[c])})" if categories else ""
        line = (
            f"rocm-validate {suite}: {outcomes.count('passed')} passed, {failed} failed{why}, "
            f"{outcomes.count('skipped')} skipped (not validated)"
        )
        if outcomes.count("xfailed"):
            line += f", {outcomes.count('xfailed')} xfailed"
        if outcomes.count("known-defect"):
            line += f", {outcomes.count('known-defect')} known-defect"
        lines.append(line)
        lines.extend(known_defect_lines(by_suite[suite]))
        reasons = Counter(_skip_reason(r.message) for r in by_suite[suite] if r.outcome == "skipped")
        for reason, count in reasons.most_common(top):
            lines.append(f"  {count} skipped: {reason}")
        if len(reasons) > top:
            lines.append(f"  ... {len(reasons) - top} more skip reasons (pytest -rs lists every one)")
    return lines


def known_defect_lines(results: Iterable[TestResult]) -> list[str]:
    """Each known defect the results matched, once: '  2 known-defect: <id> (cudnn 9.19.0): workaround: ...',
    and '  <id> no longer reproduces (...): remove it' for one whose tests passed."""
    reproduced = Counter(r.known_defect for r in results if r.known_defect and r.outcome == "known-defect")
    fixed = {r.known_defect for r in results if r.known_defect and not r.known_defect.reproduced}
    lines = [
        f"  {n} known-defect: {k.label}: workaround: {k.workaround}" for k, n in sorted(reproduced.items(), key=str)
    ]
    return lines + [
        f"  {k.id} no longer reproduces ({k.library}): remove it from the known-defects table"
        for k in sorted(fixed, key=str)
    ]


def check_records(
    results: Iterable[TestResult], gpu: int | None, node_gpus: Sequence[GpuRef] = (), bdf: str | None = None
) -> list[CheckRecord]:
    """The triage verdict's input from this run's results: every test that ran (skips validated
    nothing) on its own GPU in a whole-node run, else on the run's GPU (`gpu`, None for the CPU);
    preflight checks are the host's; a node-wide test of a whole-node run (`node_gpus`) ran on
    every one of its GPUs (a collective, a verdict pooling every GPU's share), and its failure is
    every GPU's unless it blamed some of them (`blamed_gpus`): then it failed on those and passed on
    the others (blamed indices outside the node are left out; none left: every GPU's). `bdf` is the
    run's GPU's PCI address (a single-GPU run's results carry none of their own)."""
    addresses: dict[int | None, str | None] = {ref.index: ref.pci_bus_id for ref in node_gpus}

    def where(result: TestResult) -> list[int | None]:
        if result.suite == "preflight":
            return [None]
        if result.gpu is not None:
            return [result.gpu.index]
        return list(addresses) if result.work == "node-wide" and addresses else [gpu]

    def failed_on(result: TestResult, index: int | None) -> bool:
        blamed = set(result.blamed_gpus) & set(addresses) if result.gpu is None else set()
        return result.failed and (not blamed or index in blamed)

    return [
        CheckRecord(
            index,
            r.nodeid,
            (r.category or "crash") if failed_on(r, index) else None,
            r.suite,
            r.fix,
            r.gpu.pci_bus_id if r.gpu is not None else (bdf if index == gpu else addresses.get(index)),
            r.known_defect.label if r.known_defect else None,
            bool(r.known_defect and r.known_defect.reproduced),
        )
        for r in results
        if r.outcome not in ("skipped", "xfailed")
        for index in where(r)
    ]
