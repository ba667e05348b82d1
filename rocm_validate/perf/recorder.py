"""What perf tests hold: a per-process `PerfContext` (device, plan, thresholds, baseline store,
telemetry) and a per-test `PerfRecorder` that measures, builds metrics, gates them and
attaches them to the test.

Gating happens as each metric is recorded; failures and missing baselines are collected on the
item and turned into one failure (or skip) after the test body returns, so every metric of a
test is measured and shown even when the first one regressed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from rocm_validate.core import requirements
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.commands import Commands
from rocm_validate.core.options import STRICT_FLAG, Settings
from rocm_validate.core.requirements import not_validated
from rocm_validate.errors import BaselineError
from rocm_validate.perf import gate
from rocm_validate.perf.attribution import held_back
from rocm_validate.perf.baselines import (
    NAME_PATTERN,
    BaselineEntry,
    BaselineStore,
    decide_update,
    stored_clock,
)
from rocm_validate.perf.floors import FloorTable
from rocm_validate.perf.stats import (
    SampleSummary,
    paired_ratios,
    per_clock_noise_estimate,
    relative_noise,
)
from rocm_validate.perf.timing import (
    Clock,
    Rotation,
    Timing,
    TimingPlan,
    cache_defeat_bytes,
    default_plan,
    rotation_count,
    stall_note,
)
from rocm_validate.platform import peaks
from rocm_validate.platform.clocks import ClockSampler, ClockWindow, clock_window
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.platform.processes import HostLoadMeter
from rocm_validate.results.metrics import GateRecord, Metric, Verdict, format_number
from rocm_validate.results.triage import combine

if TYPE_CHECKING:
    import torch

    from rocm_validate.core.fixtures import MetricRecorder
    from rocm_validate.platform.telemetry import Telemetry

T = TypeVar("T")

# Throughput units: the factor a rate in work-units per second is divided by, and the work unit.
THROUGHPUT_UNITS: dict[str, tuple[float, str]] = {
    "TFLOP/s": (1e12, "FLOP"),
    "GB/s": (1e9, "B"),
    "samples/s": (1.0, "samples"),
    "tokens/s": (1.0, "tokens"),
}
LATENCY_UNITS: dict[str, float] = {"us": 1e6, "ms": 1e3, "s": 1.0}
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class PerfSettings:
    """The perf suite's own options, resolved once."""

    window_factor: float = 1.0
    rules: tuple[gate.ThresholdRule, ...] = ()
    benchmark_json: Path | None = None
    floors_dir: Path | None = None  # --rocm-floors


@dataclass(frozen=True)
class Measurement:
    """A timing, the device's operating point around it, and its clock over the window."""

    timing: Timing
    telemetry: Mapping[str, Any]
    clock: ClockWindow | None = None

    def clock_details(self) -> dict[str, Any] | None:
        """The window's clock for a metric's `extra`, with the noise of the figure per clock cycle:
        the smaller of two estimates that each bound it. Block by block (block times x block
        clocks) removes the clock swings of a sustained GEMM; but a block of a few long rounds
        (training steps, attention) has only a few dozen clock readings, whose own scatter then
        dominates (7-10% on an H100 for a 2-layer Llama step whose times agree within 1%), so the
        other estimate is the figure's own noise plus the error of the window's mean clock."""
        if self.clock is None:
            return None
        details = self.clock.to_dict()
        block = None
        if self.clock.block_mhz is not None and len(self.clock.block_mhz) == len(self.timing.summary.block_means):
            block = self.timing.summary.per_clock_dispersion(self.clock.block_mhz, self.timing.sustained)
        details["per_clock_dispersion"] = per_clock_noise_estimate(self.timing.dispersion, self.clock.mean_error, block)
        return details


@dataclass
class ItemPerfState:
    """What the gate decided for one test's metrics, turned into its outcome after the call."""

    names: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)  # each failure's triage category
    fixes: list[str] = field(default_factory=list)  # what to fix, for failures of the run's inputs
    blamed: list[tuple[int, ...]] = field(default_factory=list)  # each failure's GPUs (a node-wide step's)

    def fail(self, message: str, category: str, fix: str | None = None, gpus: tuple[int, ...] = ()) -> None:
        """One failed metric: its message, category, the fix it names and the GPUs it is blamed on."""
        self.failures.append(message)
        self.categories.append(category)
        self.fixes += [fix] if fix else []
        self.blamed.append(gpus)

    def verdict(self) -> tuple[str, tuple[int, ...]]:
        """The test's category and the GPUs it blames: every GPU a failure blamed when each failure
        blamed some; else the failures that blamed none decide, the node's (an unexplained loss is
        never hidden behind a GPU that held another metric back)."""
        unblamed = [c for c, gpus in zip(self.categories, self.blamed, strict=True) if not gpus]
        if unblamed:
            return combine(unblamed) or "performance", ()
        return combine(self.categories) or "performance", tuple(sorted({i for gpus in self.blamed for i in gpus}))


ITEM_STATE_KEY = pytest.StashKey[ItemPerfState]()


def missing_message(names: Sequence[str], device_key: str, update_command: str) -> str:
    """'no baseline for <metric> on <device key>; run pytest --rocm-suite=perf --update-baselines'."""
    return f"no baseline for {', '.join(names)} on {device_key}; run {update_command}"


def raise_outcome(state: ItemPerfState, device_key: str, update_command: str) -> None:
    """Fail on any regression (or a regression refused by --update-baselines), as the category
    its evidence shows (contention, throttling, performance; a baseline in another unit is the
    run's configuration); else skip as not validated when a baseline is missing (under
    --rocm-strict a configuration failure: the device's baselines were never recorded)."""
    __tracebackhide__ = True
    if state.failures:
        fixes = "; ".join(dict.fromkeys(state.fixes)) or None
        category, gpus = state.verdict()
        fail_as(category, "\n".join(state.failures), fixes, gpus)
    if state.missing:
        not_validated(
            missing_message(state.missing, device_key, update_command),
            category="configuration",
            fix=f"record this device's baselines with {update_command}, or run without {STRICT_FLAG}",
        )


class PerfContext:
    """Everything perf tests of one process share."""

    def __init__(self, settings: Settings, perf: PerfSettings, device: DeviceInfo) -> None:
        self.settings = settings
        self.perf = perf
        self.device = device
        self.commands = Commands(settings, device)
        self.update_command = self.commands.record()
        self.store = BaselineStore(
            settings.baselines_dir, device.device_key, self.update_command, aliases=device.key_aliases
        )
        self.floors = FloorTable(device, perf.floors_dir)
        self.scale = "full" if device.is_gpu else "tiny"
        self.recorded: dict[str, str] = {}  # metric name -> nodeid, to catch two tests sharing a name
        self._telemetry: Telemetry | None = None
        self._commit: str | None = None

    def plan(self, **changes: Any) -> TimingPlan:
        """The device's default plan with a test's changes, its window scaled by --rocm-perf-window."""
        return replace(default_plan(self.device.backend), **changes).with_window(self.perf.window_factor)

    def require_memory(self, gib: float) -> None:
        """Skip, saying need vs found, when full-size work needs more device memory than there is."""
        __tracebackhide__ = True
        reason = requirements.requires_memory(self.device, gib) if self.scale == "full" else None
        if reason:
            pytest.skip(reason)

    @property
    def telemetry(self) -> Telemetry:
        """Clock / temperature / power readings for the device (opened on first use)."""
        if self._telemetry is None:
            from rocm_validate.platform.telemetry import open_telemetry

            self._telemetry = open_telemetry(self.device)
        return self._telemetry

    def threshold(self, name: str) -> gate.Threshold:
        return gate.threshold_for(name, self.device.backend, self.perf.rules)

    def baseline(self, name: str) -> gate.Baseline | None:
        try:
            entry = self.store.entry(name)
        except BaselineError as exc:
            pytest.fail(str(exc), pytrace=False)
        return None if entry is None else gate.baseline_from_entry(entry)

    def commit(self) -> str:
        """The project's git commit (with '-dirty'), from pytest-benchmark's own collector."""
        if self._commit is None:
            from pytest_benchmark.utils import get_commit_info

            info = get_commit_info()
            self._commit = f"{info['id']}{'-dirty' if info.get('dirty') else ''}"
        return self._commit

    def provenance(self, metric: Metric) -> dict[str, Any]:
        """Where a baseline came from: date, software stack, commit and the clocks it ran at."""
        runtime = {"rocm": "HIP", "cuda": "CUDA"}.get(self.device.backend)
        telemetry = (metric.extra.get("telemetry") or {}).get("after")
        return {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "device_name": self.device.name,
            "torch": self.device.torch_version,
            "runtime": f"{runtime} {self.device.runtime_version}" if runtime and self.device.runtime_version else None,
            "driver": self.device.driver_version,
            "libraries": dict(self.device.libraries),
            "git_commit": self.commit(),
            "telemetry": telemetry,
        }

    def write_baseline(self, metric: Metric) -> Metric:
        """--update-baselines for one metric of a passed test: write, fold or refuse, and say which."""
        entry = BaselineEntry(
            value=metric.value,
            unit=metric.unit,
            better=metric.better,
            dispersion=metric.dispersion,
            samples=metric.samples,
            provenance=self.provenance(metric),
            clock=stored_clock(metric.extra.get("clock")),
        )
        threshold = self.threshold(metric.name)
        record = metric.gate
        own = relative_noise(gate.gated_dispersion(metric, record.basis if record else "throughput"))
        start_over = record is not None and record.accepted_regression
        try:
            decision = self.store.update(
                metric.name, entry, lambda old, new: decide_update(None if start_over else old, new, threshold, own)
            )
        except BaselineError as exc:
            return metric.with_verdict(Verdict.NOT_RECORDED, str(exc))
        return metric.with_verdict(decision.verdict, decision.message)

    def close(self) -> None:
        if self._telemetry is not None:
            self._telemetry.close()


def _window_clock(readings: Sequence[Any], timing: Timing, power_cap_w: float | None) -> ClockWindow | None:
    if not readings or timing.window_host is None:
        return None
    start, end = timing.window_host
    return clock_window(readings, start, end, power_cap_w, timing.block_spans())


class PerfRecorder:
    """The `perf` fixture: measure work, then record it as a gated metric of this test."""

    def __init__(
        self,
        context: PerfContext,
        item: pytest.Item,
        metrics: MetricRecorder,
        torch_device: Callable[[], torch.device],
    ) -> None:
        self.context = context
        self._item = item
        self._metrics = metrics
        self._torch_device = torch_device
        self.state = item.stash.setdefault(ITEM_STATE_KEY, ItemPerfState())

    @property
    def device(self) -> DeviceInfo:
        return self.context.device

    @property
    def scale(self) -> str:
        """'full' on a GPU (real model sizes), 'tiny' on the CPU (CI-sized)."""
        return self.context.scale

    def rotation(self, make_set: Callable[[int], T], set_bytes: int) -> Rotation[T]:
        """Operand sets, built by make_set(i), enough that together they exceed every cache."""
        defeat = cache_defeat_bytes(self.device.l2_cache_bytes, self.device.last_level_cache_bytes)
        return Rotation([make_set(i) for i in range(rotation_count(set_bytes, defeat))])

    def _telemetry(self) -> dict[str, Any] | None:
        sample = self.context.telemetry.sample()
        return None if sample is None else sample.to_dict()

    def _processes(self) -> dict[str, Any]:
        """The other processes on the device now, for the regression's attribution."""
        return self.context.telemetry.processes().to_dict()

    def measure_interleaved(
        self, fns: Mapping[str, Callable[[], Any]], clock: Clock | None = None, **plan: Any
    ) -> dict[str, Measurement]:
        """Time functions in alternating rounds; `plan` changes TimingPlan fields (window_s=2.0, ...)."""
        from rocm_validate.perf.timing import clock_for, measure_interleaved

        host = HostLoadMeter().start()
        before, processes_before = self._telemetry(), self._processes()
        source = self.context.telemetry
        sampler = ClockSampler(source.clock_reading).start() if self.device.is_gpu and before is not None else None
        try:
            timings = measure_interleaved(fns, self.context.plan(**plan), clock or clock_for(self._torch_device()))
        finally:
            readings = sampler.stop() if sampler is not None else []
        telemetry = {
            "source": source.source,
            "reason": source.reason,
            "before": before,
            "after": self._telemetry(),
            # what else ran meanwhile (rocm_validate.perf.attribution reads these)
            "processes": {"before": processes_before, "after": self._processes()},
            "host": host.finish().to_dict(),
            "host_bound": not self.device.is_gpu,
        }
        if sampler is not None and sampler.error:
            telemetry["clock_sampler"] = sampler.error
        return {
            name: Measurement(timing, telemetry, _window_clock(readings, timing, source.power_cap_w))
            for name, timing in timings.items()
        }

    def measure(self, fn: Callable[[], Any], clock: Clock | None = None, **plan: Any) -> Measurement:
        """Warm up and time `fn` (see rocm_validate.perf.timing); `plan` changes TimingPlan fields."""
        return self.measure_interleaved({"": fn}, clock, **plan)[""]

    def throughput(self, name: str, measured: Measurement, work: float, unit: str, peak: str | None = None) -> Metric:
        """Record `work` (per call, in the unit's work unit) over the measured window as a rate."""
        if unit not in THROUGHPUT_UNITS:
            raise ValueError(f"{name}: unknown throughput unit {unit!r}; known: {', '.join(THROUGHPUT_UNITS)}")
        divisor, work_unit = THROUGHPUT_UNITS[unit]
        return self._timed(
            name, measured, measured.timing.rate(work) / divisor, unit, "higher", peak, work=work, work_unit=work_unit
        )

    def latency(self, name: str, measured: Measurement, unit: str = "us") -> Metric:
        """Record the mean time per call over the measured window (lower is better)."""
        if unit not in LATENCY_UNITS:
            raise ValueError(f"{name}: unknown latency unit {unit!r}; known: {', '.join(LATENCY_UNITS)}")
        return self._timed(name, measured, measured.timing.summary.mean * LATENCY_UNITS[unit], unit, "lower", None)

    def speedup(self, name: str, candidate: Measurement, default: Measurement) -> Metric:
        """Record how many times faster `candidate` ran than the `default` path (eager, bf16, the
        untuned GEMM), measured interleaved: the ratio of total times, with the spread of
        round-by-round ratios as its noise."""
        ratios = paired_ratios(default.timing.summary.seconds, candidate.timing.summary.seconds)
        spread = SampleSummary(ratios, 1)
        value = default.timing.summary.mean / candidate.timing.summary.mean
        extra = {
            # the report's key for the default path's timing keeps the name it was written with
            "timing": {"candidate": candidate.timing.details(), "reference": default.timing.details()},
            "telemetry": dict(candidate.telemetry),
        }
        return self.record(name, value, "x", "higher", dispersion=spread.dispersion, samples=len(ratios), extra=extra)

    def _timed(
        self, name: str, measured: Measurement, value: float, unit: str, better: str, peak: str | None, **work: Any
    ) -> Metric:
        timing = measured.timing
        extra = {"timing": timing.details(), "telemetry": dict(measured.telemetry)}
        clock = measured.clock_details()
        if clock is not None:
            extra["clock"] = clock
        return self.record(
            name,
            value,
            unit,
            better,
            dispersion=timing.dispersion,
            samples=timing.summary.rounds,
            peak=peaks.peak_for(self.device, peak) if peak else None,
            extra=extra,
            **work,
        )

    def record(
        self,
        name: str,
        value: float,
        unit: str,
        better: str,
        *,
        dispersion: float | None = None,
        samples: int | None = None,
        extra: Mapping[str, Any] | None = None,
        **details: Any,
    ) -> Metric:
        """Record any value (peak memory, a ratio, seconds) as a gated metric of this test."""
        __tracebackhide__ = True
        if not _NAME.match(name):
            raise ValueError(f"metric name {name!r} must match {NAME_PATTERN} (lower case, digits, . _ + -)")
        if name in self.state.names or self.context.recorded.get(name, self._item.nodeid) != self._item.nodeid:
            raise ValueError(f"metric {name} is recorded twice (also by {self.context.recorded.get(name)})")
        self.context.recorded[name] = self._item.nodeid
        self.state.names.add(name)
        metric = self._metrics.build(
            name,
            value,
            unit,
            better,
            suite="perf",
            dispersion=dispersion,
            samples=samples,
            extra=dict(extra or {}),
            **details,
        )
        metric = self._gated(metric)
        self._metrics.add(metric)
        return metric

    def _gated(self, metric: Metric) -> Metric:
        threshold = self.context.threshold(metric.name)
        record = GateRecord(
            threshold.min_band, threshold.noise_multiple, threshold.cap, informational=threshold.informational
        )
        if not math.isfinite(metric.value) or metric.value <= 0:
            message = f"{metric.name} measured {metric.value}: the measurement produced no positive finite number"
            self.state.fail(message, "crash")
            return metric.with_verdict(Verdict.INVALID, message, gate=record)
        baseline = self.context.baseline(metric.name)
        update_command = self.context.update_command
        judgement = gate.judge(metric, baseline, threshold, self.device.device_key, update_command)
        floor = None if threshold.informational else self.context.floors.floor(metric.name)
        gated_by = "baseline" if baseline is not None else "none"
        if floor is not None:
            floor_judgement = gate.judge_floor(metric, floor, self.device.device_key, update_command)
            record = replace(
                record, sku_floor=floor.value, sku_floor_source=floor.source, sku_floor_verdict=floor_judgement.verdict
            )
            if baseline is None:
                judgement, gated_by = floor_judgement, "floor"
            elif floor_judgement.fails and not judgement.fails:
                judgement = floor_judgement  # inside the baseline's band, yet below what the SKU must reach
        record = replace(
            record,
            gated_by=gated_by,
            allowed=judgement.allowed,
            noise=judgement.noise,
            basis=judgement.basis,
            detectable=judgement.detectable,
            throughput_ratio=judgement.throughput_ratio,
        )
        changes: dict[str, Any] = {
            "baseline": baseline.value if baseline else None,
            "ratio": judgement.ratio if baseline is not None or floor is None else None,
            "threshold": judgement.bound if baseline is not None else None,
            "detectable": judgement.detectable,
            "gate": record,
        }
        if self.context.settings.update_baselines:
            slowed = held_back(metric.extra.get("telemetry") or {})
            if slowed is not None:  # never a baseline, even under --rocm-accept-regressions: it is one GPU's
                held = (
                    f"refused: measured while one GPU held the step back ({slowed.why}); not written. Drain or fix "
                    "that GPU, then record again"
                )
                self.state.fail(f"{metric.name}: {held}", "hardware", gpus=slowed.gpus)
                return metric.with_verdict(Verdict.REFUSED, held, **changes)
            refused = self._refusal(metric, baseline, judgement)
            if refused is not None:
                self.state.fail(f"{metric.name}: {refused}", "performance")
                return metric.with_verdict(Verdict.REFUSED, refused, **changes)
            if judgement.verdict in (Verdict.REGRESSED, Verdict.BELOW_FLOOR):  # accepted: start the entry's runs over
                changes["gate"] = replace(record, accepted_regression=True)
            return metric.with_verdict(Verdict.RECORDED, "", **changes)
        noisy = gate.noisy_run_note(metric, threshold, gate.gated_dispersion(metric, judgement.basis))
        stalled = stall_note(metric.extra.get("timing") or {})
        message = "; ".join(m for m in (judgement.message, noisy, stalled) if m)
        if judgement.verdict == Verdict.FLOOR_PASS:
            return metric.with_verdict(judgement.verdict, message, **changes)
        if judgement.fails:
            self.state.fail(
                f"{metric.name}: {judgement.message}",
                judgement.category or "performance",
                judgement.fix,
                judgement.gpus,
            )
            changes["extra"] = {**metric.extra, "attribution": judgement.category}
        elif judgement.verdict == Verdict.NO_BASELINE:
            self.state.missing.append(metric.name)
        return metric.with_verdict(judgement.verdict, message, **changes)

    def _refusal(self, metric: Metric, baseline: gate.Baseline | None, judgement: gate.Judgement) -> str | None:
        """Why --update-baselines must not record `metric` (None when it may): it regressed beyond
        its baseline's band, or it is below its SKU's floor (unless --rocm-accept-regressions)."""
        if judgement.verdict == Verdict.BELOW_FLOOR:
            found = judgement.message.removeprefix("below the floor: ").removeprefix("above the ceiling: ")
            return self.context.commands.refusal(found, ["perf"])
        if (
            judgement.verdict != Verdict.REGRESSED
            or baseline is None
            or judgement.ratio is None
            or judgement.allowed is None
        ):
            return None
        return self.context.commands.refusal(
            f"{format_number(baseline.value)} -> {format_number(metric.value)} {metric.unit} "
            f"({judgement.ratio - 1:+.1%}) is worse than the baseline beyond its band ({judgement.allowed:.1%})",
            ["perf"],
        )
