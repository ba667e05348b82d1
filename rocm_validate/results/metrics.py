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

__all__ = ["GateRecord", "GpuRef", "Metric", "Verdict"]

PROPERTY_PREFIX = "rocm_metric."
NUMERICS_PROPERTY = "rocm_numerics"  # a correctness test's checks and their margins, as JSON
BETTER = ("higher", "lower")
GATE_KEY = "gate"  # the key of a metric's GateRecord in its `extra` on disk


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
class GateRecord:
    """What the perf gate recorded on a metric: the band it allowed, the SKU's floor where one
    applied, and what judged it. On disk it is the metric's `extra.gate` object, under the keys
    of `_GATE_KEYS` (the report's format, which the fleet reads from old reports too)."""

    min_band: float  # the band's smallest width, a fraction of the baseline
    noise_multiple: float  # the band is this many times the measured noise
    band_cap: float  # the band's largest width, a fraction of the baseline
    informational: str = ""  # when set, the reason the metric is shown but never fails
    sku_floor: float | None = None  # the SKU's floor (or ceiling) the metric was held to, if any
    sku_floor_source: str | None = None
    sku_floor_verdict: Verdict | None = None
    gated_by: str | None = None  # 'baseline', 'floor' or 'none'; None: the metric was never judged
    allowed: float | None = None  # the band's width this time (fraction)
    noise: float | None = None
    basis: str = "throughput"  # what was compared: 'throughput' (the figure) or 'per-clock'
    detectable: float | None = None
    throughput_ratio: float | None = None  # the plain figure's ratio, when another basis gated
    accepted_regression: bool = False  # --rocm-accept-regressions recorded it: its entry starts over

    def __post_init__(self) -> None:
        if self.sku_floor_verdict is not None:
            object.__setattr__(self, "sku_floor_verdict", Verdict(self.sku_floor_verdict))

    @property
    def judged(self) -> bool:
        return self.gated_by is not None

    def to_dict(self) -> dict[str, Any]:
        """The `extra.gate` object as reports carry it: judged figures only once judged, the
        floor's three keys only with a floor, optional flags only when set."""
        data: dict[str, Any] = {"floor": self.min_band, "k": self.noise_multiple, "cap": self.band_cap}
        if self.informational:
            data["informational"] = self.informational
        if self.sku_floor is not None:
            data.update(floor_value=self.sku_floor, floor_source=self.sku_floor_source)
            data["floor_verdict"] = None if self.sku_floor_verdict is None else self.sku_floor_verdict.value
        if self.judged:
            data.update(allowed=self.allowed, noise=self.noise, basis=self.basis, detectable=self.detectable)
            if self.throughput_ratio is not None:
                data["throughput_ratio"] = self.throughput_ratio
            data["gated_by"] = self.gated_by
        if self.accepted_regression:
            data["accepted_regression"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateRecord:
        return cls(**{name: data[key] for key, name in _GATE_KEYS.items() if key in data})


# A GateRecord's keys on disk (`extra.gate`) -> its fields; min_band and noise_multiple keep the
# keys they were first written with, "floor" and "k" (docs/extending.md, "Words").
_GATE_KEYS = {
    "floor": "min_band",
    "k": "noise_multiple",
    "cap": "band_cap",
    "informational": "informational",
    "floor_value": "sku_floor",
    "floor_source": "sku_floor_source",
    "floor_verdict": "sku_floor_verdict",
    "gated_by": "gated_by",
    "allowed": "allowed",
    "noise": "noise",
    "basis": "basis",
    "detectable": "detectable",
    "throughput_ratio": "throughput_ratio",
    "accepted_regression": "accepted_regression",
}


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
    gate: GateRecord | None = None  # what the perf gate recorded on it (`extra.gate` on disk)

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
        del data["gate"]
        if self.gate is not None:
            data["extra"] = {**data["extra"], GATE_KEY: self.gate.to_dict()}
        data["percent_of_peak"] = self.percent_of_peak
        return {k: _json_number(v) for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Metric:
        names = {f.name for f in fields(cls)} - {"gate"}  # the gate travels in `extra`
        values = {k: v for k, v in data.items() if k in names}
        if isinstance(values.get("gpu"), Mapping):
            values["gpu"] = GpuRef.from_dict(values["gpu"])
        extra = values.get("extra")
        if isinstance(extra, Mapping) and isinstance(extra.get(GATE_KEY), Mapping):
            values["gate"] = GateRecord.from_dict(extra[GATE_KEY])
            values["extra"] = {k: v for k, v in extra.items() if k != GATE_KEY}
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
