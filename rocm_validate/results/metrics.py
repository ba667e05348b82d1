"""Metric records: what a test measured, and the verdict a gate gave it.

A test records metrics through the `record_rocm_metric` fixture. They travel to the controller
(also from pytest-xdist workers) as JUnit-compatible user properties named `rocm_metric.<name>`
whose value is the metric as compact JSON, so the JUnit XML carries them too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

__all__ = ["GpuRef", "Metric", "Verdict"]

PROPERTY_PREFIX = "rocm_metric."
NUMERICS_PROPERTY = "rocm_numerics"  # a correctness test's checks and their margins, as JSON
BETTER = ("higher", "lower")


class Verdict(str, Enum):
    """Every verdict a metric, a peer comparison or a convergence check can carry. A member is
    its word (`Verdict.PASS == "pass"`), so reports, JUnit and JSON show the word itself."""

    RECORDED = "recorded"  # measured and recorded, not gated (record_rocm_metric)
    INVALID = "invalid"  # the measurement produced no finite (or positive) number
    # the perf gate against a baseline
    PASS = "pass"
    IMPROVED = "improved"  # better than the baseline beyond its band: time to re-record
    REGRESSED = "regressed"
    MISMATCH = "mismatch"  # the baseline measures another unit or direction
    INFORMATIONAL = "informational"  # shown, never gated
    NO_BASELINE = "no-baseline"
    # the perf gate against the SKU's floor (or ceiling) where there is no baseline
    FLOOR_PASS = "floor-pass"
    BELOW_FLOOR = "below-floor"
    # --update-baselines
    UPDATED = "updated"  # written
    FOLDED = "folded"  # folded into this stack's runs of the entry
    NOISY = "noisy"  # refused: too noisy to record
    REFUSED = "refused"  # refused: a regression (--rocm-accept-regressions records it)
    NOT_RECORDED = "not-recorded"  # the test failed, or the write did
    # each GPU against the median of its peers (whole-node runs)
    BELOW_PEERS = "below-peers"
    # a convergence run set against its RCPs
    TOO_FAST = "too-fast"
    TOO_SLOW = "too-slow"
    NOT_CONVERGED = "not-converged"
    NO_VERDICT = "no-verdict"  # MLPerf's RCP checker failed the set for another reason

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class GpuRef:
    """Which GPU of a whole-node run a metric or test outcome belongs to: its index (as the run
    chose it, --rocm-device), PCI address and UUID where known, and its device key (its SKU)."""

    index: int
    pci_bus_id: str | None = None
    uuid: str | None = None
    device_key: str | None = None

    @property
    def label(self) -> str:
        """'GPU 5 (BDF 0000:c1:00.0)', the way messages name a GPU."""
        return f"GPU {self.index}" + (f" (BDF {self.pci_bus_id})" if self.pci_bus_id else "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuRef:
        return cls(**{k: v for k, v in data.items() if k in {f.name for f in fields(cls)}})


@dataclass(frozen=True)
class Metric:
    """One measurement and, once gated, its verdict against a baseline."""

    name: str
    value: float
    unit: str
    better: str = "higher"
    nodeid: str = ""
    suite: str | None = None
    work: float | None = None  # the work the value is a rate of (FLOP, bytes, samples), if any
    work_unit: str | None = None
    peak: float | None = None  # datasheet peak in the same unit as value
    dispersion: float | None = None  # relative spread of the samples (IQR / median), if measured
    samples: int | None = None
    baseline: float | None = None
    ratio: float | None = None  # value / baseline
    threshold: float | None = None  # the worst ratio that still passes (or best, for 'lower')
    detectable: float | None = None  # the smallest change the gate catches 95% of the time (fraction)
    verdict: Verdict = Verdict.RECORDED
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    gpu: GpuRef | None = None  # the GPU it was measured on, in a whole-node run

    def __post_init__(self) -> None:
        if self.better not in BETTER:
            raise ValueError(f"metric {self.name!r}: better must be 'higher' or 'lower', found {self.better!r}")
        if not isinstance(self.value, (int, float)) or isinstance(self.value, bool):
            raise TypeError(f"metric {self.name!r}: value must be a number, found {type(self.value).__name__}")
        object.__setattr__(self, "verdict", Verdict(self.verdict))  # a word from JSON, or a typo: ValueError

    @property
    def percent_of_peak(self) -> float | None:
        if self.peak is None or self.peak <= 0 or not math.isfinite(self.value):
            return None
        return 100.0 * self.value / self.peak

    def with_verdict(self, verdict: Verdict, message: str = "", **changes: Any) -> Metric:
        return replace(self, verdict=verdict, message=message, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["percent_of_peak"] = self.percent_of_peak
        return {k: _json_number(v) for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Metric:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if isinstance(values.get("gpu"), Mapping):
            values["gpu"] = GpuRef.from_dict(values["gpu"])
        return cls(**values)

    def to_property(self) -> tuple[str, str]:
        """(name, value) for item.user_properties: survives xdist and lands in JUnit XML."""
        return PROPERTY_PREFIX + self.name, json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)


def _json_number(value: Any) -> Any:
    """NaN and infinities are not JSON; a non-finite measurement is stored as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metrics_from_properties(properties: list[tuple[str, Any]]) -> list[Metric]:
    """The metrics among a report's user properties, in recording order."""
    found = []
    for name, value in properties:
        if isinstance(name, str) and name.startswith(PROPERTY_PREFIX) and isinstance(value, str):
            data = json.loads(value)
            if data.get("value") is None:
                data["value"] = math.nan
            found.append(Metric.from_dict(data))
    return found


def replace_properties(properties: list[tuple[str, Any]], metrics: list[Metric]) -> None:
    """Put `metrics` in place of the metric properties of `properties` (in place)."""
    properties[:] = [(n, v) for n, v in properties if not (isinstance(n, str) and n.startswith(PROPERTY_PREFIX))]
    properties.extend(m.to_property() for m in metrics)


def readable(metric: Metric) -> str:
    """One line a person reads in JUnit XML: '688.4 TFLOP/s; pass; 1.012 x baseline 680.2'."""
    parts = [f"{format_number(metric.value)} {metric.unit}", metric.verdict.value]
    if metric.ratio is not None and metric.baseline is not None:
        parts.append(f"{metric.ratio:.3f} x baseline {format_number(metric.baseline)}")
    if metric.percent_of_peak is not None:
        parts.append(f"{metric.percent_of_peak:.1f}% of peak")
    return "; ".join(parts)


def format_number(value: float | None, digits: int = 4) -> str:
    """Four significant digits, the precision a throughput figure deserves."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"
