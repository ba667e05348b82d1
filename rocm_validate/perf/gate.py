"""The gate: is a measurement worse than its baseline by more than noise can explain?

A metric may move by `allowed = min(cap, max(floor, k x combined noise))`, where the combined
noise is the root-sum-square of the baseline's and this run's relative round-to-round noise.
The floor covers run-to-run drift that one run cannot see in itself (clocks, power, placement);
the cap keeps the gate able to catch a real regression however noisy a run was: every gated
metric's band stays below 10%. Thresholds are small objects whose `fails()` returns a message,
as pytest-benchmark's are. Which threshold a metric gets is a visible table, overridable per
metric pattern from the `rocm_perf_thresholds` ini lines.
"""

from __future__ import annotations

import fnmatch
import math
import shlex
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from rocm_validate.core.options import THRESHOLD_FORMS
from rocm_validate.perf.attribution import attribute
from rocm_validate.perf.stats import combined_noise, relative_noise
from rocm_validate.results.metrics import Metric, format_number

UPDATE_COMMAND = "pytest --rocm-suite=perf --update-baselines"


@dataclass(frozen=True)
class Threshold:
    """How far a metric may move: max(floor, k x noise), at most cap (fractions of the baseline)."""

    floor: float = 0.03
    k: float = 3.0
    cap: float = 0.08
    informational: str = ""  # when set, the reason this metric is shown but never fails

    def __post_init__(self) -> None:
        if not (0 <= self.floor <= self.cap < 1):
            raise ValueError(f"thresholds need 0 <= floor <= cap < 1, found floor={self.floor:g} cap={self.cap:g}")
        if not (self.k > 0 and math.isfinite(self.k)):
            raise ValueError(f"k must be a positive number, found {self.k:g}")

    def allowed(self, noise: float) -> float:
        return min(self.cap, max(self.floor, self.k * noise))

    def noise_limit(self) -> float:
        """The largest own-run noise whose k-fold still fits under the cap."""
        return self.cap / self.k

    def describe(self, noise: float) -> str:
        """'5.0% = max(floor 4.0%, 3 x noise 1.7%)' (and 'capped at 8.0%' when the cap bites)."""
        text = f"{self.allowed(noise):.1%} = max(floor {self.floor:.1%}, {self.k:g} x noise {noise:.2%})"
        return text + (f", capped at {self.cap:.1%}" if self.k * noise > self.cap else "")


@dataclass(frozen=True)
class ThresholdRule:
    """Metric names matching `pattern` (fnmatch) on `backend` (or any) get `threshold`."""

    pattern: str
    threshold: Threshold
    backend: str | None = None

    def matches(self, name: str, backend: str) -> bool:
        return (self.backend is None or self.backend == backend) and fnmatch.fnmatchcase(name, self.pattern)


# First match wins. Floors come from run-to-run spreads measured on an H100 (see docs/perf.md):
# copy 0.06%, SDPA 1%, mid-size GEMMs 2-8%; the 8192^3 GEMM needs a settled clock to stay inside.
DEFAULT_RULES: tuple[ThresholdRule, ...] = (
    ThresholdRule("*.compile_seconds", Threshold(informational="compile time depends on the Inductor cache and host load")),
    ThresholdRule("*", Threshold(floor=0.25, k=3.0, cap=0.6), backend="cpu"),
    ThresholdRule("launch.*", Threshold(floor=0.10, k=3.0, cap=0.30)),
    ThresholdRule("*.peak_memory", Threshold(floor=0.02, k=3.0, cap=0.05)),
    ThresholdRule("gemm.*.8192x8192x8192", Threshold(floor=0.05, k=3.0, cap=0.08)),
    ThresholdRule("gemm.*", Threshold(floor=0.04, k=3.0, cap=0.08)),
    # Pinned host transfers share the host's PCIe and memory with other tenants, so they move
    # about 8% between runs on a shared VM while each run's own noise says 1-3% (docs/perf.md).
    # The floor covers that spread; the cap still sits under a 10% loss.
    ThresholdRule("copy.*.pinned.*", Threshold(floor=0.08, k=3.0, cap=0.085)),
    ThresholdRule("copy.*", Threshold(floor=0.02, k=3.0, cap=0.08)),
    ThresholdRule("*", Threshold(floor=0.03, k=3.0, cap=0.08)),
)



def parse_rule(line: str, base: Iterable[ThresholdRule] = DEFAULT_RULES) -> ThresholdRule:
    """'gemm.bf16.* floor=0.05 cap=0.08' -> a rule; unnamed fields come from the rule `base`
    would otherwise give the pattern. Raises ValueError naming the bad part."""
    words = shlex.split(line)
    if not words or "=" in words[0]:
        raise ValueError(f"expected a metric pattern first; accepted: {THRESHOLD_FORMS}")
    pattern, settings = words[0], {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in ("floor", "k", "cap", "backend", "info"):
            raise ValueError(f"{word!r} is not a setting; accepted: {THRESHOLD_FORMS}")
        settings[key] = value
    backend = settings.pop("backend", None)
    if backend is not None and backend not in ("rocm", "cuda", "cpu"):
        raise ValueError(f"backend={backend!r}: expected rocm, cuda or cpu")
    inherited = threshold_for(pattern, backend or "rocm", base)
    changes: dict[str, Any] = {}
    for key in ("floor", "k", "cap"):
        if key in settings:
            try:
                changes[key] = float(settings[key])
            except ValueError:
                raise ValueError(f"{key}={settings[key]!r}: expected a number such as 0.05") from None
    if "info" in settings:
        changes["informational"] = settings["info"] or "marked informational in rocm_perf_thresholds"
    return ThresholdRule(pattern, replace(inherited, **changes), backend)


def parse_rules(lines: Iterable[str]) -> tuple[ThresholdRule, ...]:
    """Ini lines (blank lines and '#' comments skipped) -> rules that come before the defaults."""
    rules = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            rules.append(parse_rule(text))
        except ValueError as exc:
            raise ValueError(f"line {number} {text!r}: {exc}") from None
    return tuple(rules)


def threshold_for(name: str, backend: str, rules: Iterable[ThresholdRule] = DEFAULT_RULES) -> Threshold:
    """The first rule matching the metric name on this backend, else the defaults' catch-all."""
    for rule in (*rules, *DEFAULT_RULES):
        if rule.matches(name, backend):
            return rule.threshold
    return Threshold()


@dataclass(frozen=True)
class Reference:
    """What a metric is compared with: a stored baseline's value, spread and recording clocks."""

    value: float
    unit: str
    better: str
    dispersion: float | None = None
    clock_mhz: float | None = None


@dataclass(frozen=True)
class Judgement:
    """The gate's decision on one metric."""

    verdict: str  # pass, regressed, improved, informational, no-baseline, mismatch
    message: str
    ratio: float | None = None
    bound: float | None = None  # worst ratio that passes (lowest for 'higher', highest for 'lower')
    allowed: float | None = None
    noise: float | None = None
    category: str | None = None  # a failure's triage category (rocm_validate.results.triage)

    @property
    def fails(self) -> bool:
        return self.verdict in ("regressed", "mismatch")

    def details(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "noise": self.noise}


def _peak_note(metric: Metric) -> str:
    percent = metric.percent_of_peak
    if percent is None:
        return ""
    return f"; {percent:.1f}% of the {format_number(metric.peak)} {metric.unit} datasheet peak"


def judge(
    metric: Metric, reference: Reference | None, threshold: Threshold, device_key: str, update_command: str = UPDATE_COMMAND
) -> Judgement:
    """Compare `metric` with its baseline under `threshold`. Pure; the message says everything
    a reader needs (value, baseline, ratio, allowed band and where it came from, % of peak), a
    regression's cause with its evidence (rocm_validate.perf.attribution), and `update_command`,
    the command that re-records it (not after contention or throttling: such a run must not become
    the baseline). The metric's name is not repeated: every place that shows a message puts the
    name before it."""
    if reference is None:
        if threshold.informational:
            return Judgement("informational", f"informational ({threshold.informational}); no baseline on {device_key} yet")
        return Judgement("no-baseline", f"no baseline on {device_key}; run {update_command}")
    if (reference.unit, reference.better) != (metric.unit, metric.better):
        return Judgement(
            "mismatch",
            f"the baseline is in {reference.unit} ({reference.better} is better) but this run "
            f"measures {metric.unit} ({metric.better} is better); re-record it with {update_command}",
            category="environment",
        )
    noise = combined_noise(relative_noise(reference.dispersion), relative_noise(metric.dispersion))
    allowed = threshold.allowed(noise)
    ratio = metric.value / reference.value
    higher = metric.better == "higher"
    bound = 1 - allowed if higher else 1 + allowed
    worse = ratio < bound if higher else ratio > bound
    better = ratio > 1 + allowed if higher else ratio < 1 - allowed
    change = abs(ratio - 1)
    summary = (
        f"{format_number(metric.value)} {metric.unit} vs baseline {format_number(reference.value)} "
        f"(ratio {ratio:.3f}, allowed {threshold.describe(noise)})"
    )
    base = dict(ratio=ratio, bound=bound, allowed=allowed, noise=noise)
    if threshold.informational:
        return Judgement("informational", f"informational ({threshold.informational}): {summary}", **base)
    if worse:
        direction = "slower" if metric.unit.endswith("/s") else "worse"
        cause = attribute(metric.name, metric.extra.get("telemetry") or {}, reference.clock_mhz, change)
        update = f". If this is expected, re-record with {update_command}" if cause.category == "performance" else ""
        return Judgement(
            "regressed",
            f"regressed: {change:.1%} {direction}, {summary}{_peak_note(metric)}{cause.note}{update}",
            category=cause.category,
            **base,
        )
    if better:
        return Judgement(
            "improved",
            f"{change:.1%} better than baseline, beyond the band: {summary}. If this is the new normal, "
            f"record it with {update_command}",
            **base,
        )
    return Judgement("pass", "", **base)


def noisy_run_note(metric: Metric, threshold: Threshold) -> str:
    """A warning for a run whose own spread exceeds what the gate can absorb ('' when quiet)."""
    own = relative_noise(metric.dispersion)
    if threshold.informational or own <= threshold.noise_limit():
        return ""
    return (
        f"this run was noisy: round-to-round noise {own:.2%} exceeds {threshold.noise_limit():.2%} "
        f"(cap {threshold.cap:.1%} / k {threshold.k:g}); check for other work on the device"
    )


def reference_from_entry(entry: Mapping[str, Any]) -> Reference:
    """A baseline file entry -> the Reference the gate compares with."""
    provenance = entry.get("provenance") or {}
    return Reference(
        value=float(entry["value"]),
        unit=str(entry["unit"]),
        better=str(entry["better"]),
        dispersion=entry.get("dispersion"),
        clock_mhz=(provenance.get("telemetry") or {}).get("clock_mhz"),
    )
