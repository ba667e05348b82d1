"""The gate: is a measurement worse than its baseline by more than noise can explain?

A metric may move by `allowed = min(cap, max(min_band, noise_multiple x combined noise))`, where the combined
noise is the root-sum-square of the baseline's and this run's relative round-to-round noise.
The min_band covers run-to-run drift that one run cannot see in itself (clocks, power, placement);
the cap keeps the gate able to catch a real regression however noisy a run was: every gated
metric's band stays below 10%. Thresholds are small objects whose `fails()` returns a message,
as pytest-benchmark's are. Which threshold a metric gets is a visible table, overridable per
metric pattern from the `rocm_perf_thresholds` ini lines.

Two refinements make the band the spread a comparison really faces (docs/perf.md, "Detection
power"):

* a baseline folded from three or more recording runs (`--update-baselines` repeated on one
  stack) carries its between-run spread, and the gate uses it in place of the within-window
  noise, which on a power-capped GPU is mostly clock oscillation;
* a compute-bound metric (`per_clock` rules: GEMMs, SDPA, training steps) whose window or
  baseline sat at the power or thermal cap is judged per clock cycle (throughput / mean clock
  over the window), so a clock excursion is not taken for a regression and a slower kernel still
  shows. With the clock measured on both sides the clock part of run-to-run drift is seen, so
  the smaller `clock_min_band` applies.

Every judgement states the smallest slowdown it catches 95% of the time (`detectable`); a
host-side metric (`detect_limit`) that cannot catch a 10% change here is shown, not gated.
"""

from __future__ import annotations

import fnmatch
import math
import shlex
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocm_validate.perf.attribution import attribute
from rocm_validate.perf.stats import combined_noise, relative_noise
from rocm_validate.results.metrics import Metric, Verdict, format_number
from rocm_validate.results.sizes import parse_size

# The forms of a `rocm_perf_thresholds` line (the ini key the perf plugin declares).
THRESHOLD_FORMS = (
    "PATTERN [min_band=FRACTION] [noise_multiple=NUMBER] [cap=FRACTION] [clock_min_band=FRACTION] [per_clock=yes|no] "
    "[detect=FRACTION|none] [backend=rocm|cuda|cpu] [info=REASON]"
)
# The keys these settings had before one word meant one thing (docs/extending.md, "Words"):
# still read, so an ini file written for them keeps working.
FORMER_KEYS = {"floor": "min_band", "k": "noise_multiple", "clock_floor": "clock_min_band"}
SETTINGS = ("min_band", "noise_multiple", "cap", "clock_min_band", "per_clock", "detect", "backend", "info")


@dataclass(frozen=True)
class Threshold:
    """How far a metric may move: max(min_band, noise_multiple x noise), at most cap (fractions of the baseline)."""

    min_band: float = 0.03
    noise_multiple: float = 3.0
    cap: float = 0.08
    informational: str = ""  # when set, the reason this metric is shown but never fails
    per_clock: bool = False  # compute-bound: judged per clock cycle when the device sat at its power cap
    clock_bound: bool = True  # per clock in both directions; False: only a clock lower than at baseline is discounted
    clock_min_band: float | None = None  # the min_band when both windows' clocks were measured (default: min_band)
    detect_limit: float | None = None  # host-side: informational when it cannot catch a change this large
    peers: bool = True  # compared across the GPUs of a node (False: differences there are the host's, not the GPU's)

    def __post_init__(self) -> None:
        if not (0 <= self.min_band <= self.cap < 1):
            raise ValueError(
                f"thresholds need 0 <= min_band <= cap < 1, found min_band={self.min_band:g} cap={self.cap:g}"
            )
        if not (self.noise_multiple > 0 and math.isfinite(self.noise_multiple)):
            raise ValueError(f"noise_multiple must be a positive number, found {self.noise_multiple:g}")
        if self.clock_min_band is not None and not (0 <= self.clock_min_band <= self.min_band):
            raise ValueError(
                "thresholds need 0 <= clock_min_band <= min_band, "
                f"found clock_min_band={self.clock_min_band:g} min_band={self.min_band:g}"
            )
        if self.detect_limit is not None and not (0 < self.detect_limit < 1):
            raise ValueError(f"detect must be a fraction between 0 and 1 (or none), found {self.detect_limit:g}")

    def min_band_for(self, clocks_known: bool) -> float:
        return self.clock_min_band if clocks_known and self.clock_min_band is not None else self.min_band

    def allowed(self, noise: float, clocks_known: bool = False) -> float:
        return min(self.cap, max(self.min_band_for(clocks_known), self.noise_multiple * noise))

    def noise_limit(self) -> float:
        """The largest own-run noise whose noise_multiple-fold still fits under the cap."""
        return self.cap / self.noise_multiple

    def describe(self, noise: float, clocks_known: bool = False) -> str:
        """'5.0% = max(min band 4.0%, 3 x noise 1.7%)' (and 'capped at 8.0%' when the cap bites)."""
        band = self.min_band_for(clocks_known)
        allowed = self.allowed(noise, clocks_known)
        text = f"{allowed:.1%} = max(min band {band:.1%}, {self.noise_multiple:g} x noise {noise:.2%})"
        return text + (f", capped at {self.cap:.1%}" if self.noise_multiple * noise > self.cap else "")


def message_bytes(name: str) -> int | None:
    """The message size a metric name ends with ('collective.all_reduce.8ranks.16mib' -> 16 MiB), else None."""
    try:
        return parse_size(name.rsplit(".", 1)[-1])
    except ValueError:
        return None


@dataclass(frozen=True)
class ThresholdRule:
    """Metric names matching `pattern` (fnmatch) on `backend` (or any) get `threshold`; with
    `below_bytes`, only names ending in a message size smaller than that."""

    pattern: str
    threshold: Threshold
    backend: str | None = None
    below_bytes: int | None = None

    def matches(self, name: str, backend: str) -> bool:
        if self.below_bytes is not None:
            size = message_bytes(name)
            if size is None or size >= self.below_bytes:
                return False
        return (self.backend is None or self.backend == backend) and fnmatch.fnmatchcase(name, self.pattern)


# First match wins. Min bands come from run-to-run spreads measured on an H100 (see docs/perf.md):
# copy 0.06%, SDPA 1%, mid-size GEMMs 2-8%; the 8192^3 GEMM needs a settled clock to stay inside.
HOST_DETECT_LIMIT = 0.10  # a host-side metric that cannot catch a 10% change is shown, not gated
# Collectives below this size are paced by launch latency and the library's protocol choice, not
# by the link: on 2 x H200 over NVLink their bus bandwidth moved by up to 54% (1 MiB) and 14%
# (16 MiB) between four runs, a 1 MiB all_gather by 48% with its own rounds within 3%; from
# 256 MiB up, by at most 2.5% (docs/perf.md). They are shown, and the large sizes gate the interconnect.
LATENCY_BOUND_BELOW_BYTES = 256 * 1024**2
LATENCY_BOUND = "latency-bound message size: moves by up to 54% between runs; the sizes from 256 MiB gate the link"
_GEMM: dict[str, Any] = dict(per_clock=True, clock_min_band=0.025)

DEFAULT_RULES: tuple[ThresholdRule, ...] = (
    ThresholdRule(
        "*.compile_seconds", Threshold(informational="compile time depends on the Inductor cache and host load")
    ),
    ThresholdRule("*", Threshold(min_band=0.25, noise_multiple=3.0, cap=0.6), backend="cpu"),
    ThresholdRule("collective.*", Threshold(informational=LATENCY_BOUND), below_bytes=LATENCY_BOUND_BELOW_BYTES),
    ThresholdRule("collective.*", Threshold(min_band=0.05, noise_multiple=3.0, cap=0.08)),
    # Launch latencies are host timings: between the two workers of one 2 x H200 VM they differed
    # by 35% with the CPU cores each ran on, so they are not compared across GPUs.
    ThresholdRule(
        "launch.*", Threshold(min_band=0.10, noise_multiple=3.0, cap=0.30, detect_limit=HOST_DETECT_LIMIT, peers=False)
    ),
    ThresholdRule("*.peak_memory", Threshold(min_band=0.02, noise_multiple=3.0, cap=0.05)),
    ThresholdRule("gemm.*.8192x8192x8192", Threshold(min_band=0.05, noise_multiple=3.0, cap=0.08, **_GEMM)),
    ThresholdRule("gemm.*", Threshold(min_band=0.04, noise_multiple=3.0, cap=0.08, **_GEMM)),
    # Pinned host transfers share the host's PCIe and memory with other tenants: they moved about
    # 8% between runs on one shared VM, and a fresh H100 VM read 0.87 of the committed baseline
    # with its own rounds within 1.4% (docs/perf.md). A band that covers that cannot catch a 10%
    # loss, so they are shown, not gated, unless the ini gates them ('copy.*.pinned.* detect=none').
    ThresholdRule(
        "copy.*.pinned.*", Threshold(min_band=0.15, noise_multiple=3.0, cap=0.2, detect_limit=HOST_DETECT_LIMIT)
    ),
    ThresholdRule("copy.*", Threshold(min_band=0.02, noise_multiple=3.0, cap=0.08)),
    # Peer-to-peer copies between two GPUs: the default band, stated so the family is known here.
    ThresholdRule("p2p.*", Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08)),
    ThresholdRule("sdpa.*", Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08, per_clock=True)),
    ThresholdRule(
        "train.*",
        Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08, per_clock=True, clock_min_band=0.02, clock_bound=False),
    ),
    ThresholdRule("*", Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08)),
)


def metric_families(rules: Iterable[ThresholdRule] = DEFAULT_RULES) -> tuple[str, ...]:
    """The metric families the suites record, from the rules that give a family its band
    ('gemm.*' -> 'gemm'): a new family states its band here, and every table that checks metric
    names (user floors) knows it from then on."""
    found = (rule.pattern.removesuffix(".*") for rule in rules)
    return tuple(dict.fromkeys(f for f in found if f and "." not in f and "*" not in f))


def parse_rule(line: str, base: Iterable[ThresholdRule] = DEFAULT_RULES) -> ThresholdRule:
    """'gemm.bf16.* min_band=0.05 cap=0.08' -> a rule; unnamed fields come from the rule `base`
    would otherwise give the pattern. Raises ValueError naming the bad part."""
    words = shlex.split(line)
    if not words or "=" in words[0]:
        raise ValueError(f"expected a metric pattern first; accepted: {THRESHOLD_FORMS}")
    pattern, settings, written = words[0], {}, {}
    for word in words[1:]:
        given, sep, value = word.partition("=")
        key = FORMER_KEYS.get(given, given)
        if not sep or key not in SETTINGS:
            raise ValueError(f"{word!r} is not a setting; accepted: {THRESHOLD_FORMS}")
        settings[key], written[key] = value, given
    backend = settings.pop("backend", None)
    if backend is not None and backend not in ("rocm", "cuda", "cpu"):
        raise ValueError(f"backend={backend!r}: expected rocm, cuda or cpu")
    inherited = threshold_for(pattern, backend or "rocm", base)
    changes: dict[str, Any] = {}
    for key in ("min_band", "noise_multiple", "cap", "clock_min_band"):
        if key in settings:
            try:
                changes[key] = float(settings[key])
            except ValueError:
                raise ValueError(f"{written[key]}={settings[key]!r}: expected a number such as 0.05") from None
    if "per_clock" in settings:
        if settings["per_clock"] not in ("yes", "no"):
            raise ValueError(f"per_clock={settings['per_clock']!r}: expected yes or no")
        changes["per_clock"] = settings["per_clock"] == "yes"
    if "detect" in settings:
        try:
            changes["detect_limit"] = None if settings["detect"] == "none" else float(settings["detect"])
        except ValueError:
            raise ValueError(f"detect={settings['detect']!r}: expected a fraction such as 0.10, or none") from None
    if "min_band" in changes and "clock_min_band" not in changes:
        changes["clock_min_band"] = None  # the user's min_band holds whether or not clocks were measured
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


def noise_band(name: str, backend: str, rules: Iterable[ThresholdRule] = ()) -> Callable[..., tuple[float, str] | None]:
    """How far (a fraction) two measurements of `name` on `backend` may differ before the
    difference is more than noise, as a function of each one's relative spread (IQR / median,
    None where unmeasured): the baseline gate's band, with how it was derived. It returns None for
    an informational metric or one not compared across GPUs (host timings). The peer comparison
    inside a node, the bandwidth dips and the fleet's node-against-median comparison all use it."""
    threshold = threshold_for(name, backend, rules)

    def band(*dispersions: float | None) -> tuple[float, str] | None:
        if threshold.informational or not threshold.peers:
            return None
        noise = combined_noise(*(relative_noise(d) for d in dispersions))
        return threshold.allowed(noise), threshold.describe(noise)

    return band


# The gate uses a baseline's between-run spread once this many recording runs are folded in.
MIN_RUNS_FOR_SPREAD = 3
# A window counts as power-managed when at least this share of its clock readings were capped.
CAPPED_SHARE = 0.25
# One-sided z for 95% power: a slowdown of allowed + Z_POWER x noise fails 95% of the time.
Z_POWER = 1.645


@dataclass(frozen=True)
class RunPoint:
    """One folded recording run: its figure and its window's mean clock."""

    value: float
    clock_mhz: float | None = None


@dataclass(frozen=True)
class Baseline:
    """What a metric is compared with: a stored baseline's value, spread and recording clocks."""

    value: float
    unit: str
    better: str
    dispersion: float | None = None
    clock_mhz: float | None = None  # the clock sampled after the recording (older files: the only one)
    window_clock_mhz: float | None = None  # mean clock over the recorded window(s)
    capped_share: float | None = None
    per_clock_dispersion: float | None = None
    runs: tuple[RunPoint, ...] = ()

    def scaled(self, factor: float) -> Baseline:
        """The same baseline with every figure multiplied by `factor` (acceptance runs)."""
        return replace(
            self, value=self.value * factor, runs=tuple(replace(r, value=r.value * factor) for r in self.runs)
        )

    def per_clock(self) -> float | None:
        """Figure per MHz: the median over folded runs with clocks, else value / window clock."""
        with_clock = [r.value / r.clock_mhz for r in self.runs if r.clock_mhz]
        if len(with_clock) >= MIN_RUNS_FOR_SPREAD:
            return statistics.median(with_clock)
        return self.value / self.window_clock_mhz if self.window_clock_mhz else None

    def run_spread(self, per_clock: bool) -> tuple[float, int] | None:
        """(relative standard deviation between folded runs, runs) of the figure, with enough runs."""
        values = (
            [r.value / r.clock_mhz for r in self.runs if r.clock_mhz] if per_clock else [r.value for r in self.runs]
        )
        if len(values) < MIN_RUNS_FOR_SPREAD:
            return None
        return statistics.stdev(values) / statistics.fmean(values), len(values)


@dataclass(frozen=True)
class Judgement:
    """The gate's decision on one metric."""

    verdict: Verdict  # pass, regressed, improved, informational, no-baseline, mismatch, floor-pass, below-floor
    message: str
    ratio: float | None = None
    bound: float | None = None  # worst ratio that passes (lowest for 'higher', highest for 'lower')
    allowed: float | None = None
    noise: float | None = None
    basis: str = "throughput"  # what was compared: "throughput" (the figure) or "per-clock"
    throughput_ratio: float | None = None  # the plain figure's ratio, when another basis gated
    detectable: float | None = None  # the smallest change that fails 95% of the time
    category: str | None = None  # a failure's triage category (rocm_validate.results.triage)
    fix: str | None = None  # what to fix, for a failure of the run's inputs (a baseline in another unit)
    gpus: tuple[int, ...] = ()  # the GPUs a regression is blamed on (attribution.HELD_BACK_KEY)

    @property
    def fails(self) -> bool:
        return self.verdict in (Verdict.REGRESSED, Verdict.MISMATCH, Verdict.BELOW_FLOOR)

    def details(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "allowed": self.allowed,
            "noise": self.noise,
            "basis": self.basis,
            "detectable": self.detectable,
        }
        if self.throughput_ratio is not None:
            data["throughput_ratio"] = self.throughput_ratio
        return data


def _window_clock(metric: Metric) -> Mapping[str, Any]:
    return metric.extra.get("clock") or {}


def _peak_note(metric: Metric) -> str:
    percent = metric.percent_of_peak
    if percent is None:
        return ""
    return f"; {percent:.1f}% of the {format_number(metric.peak)} {metric.unit} datasheet peak"


@dataclass(frozen=True)
class _Basis:
    """What a comparison compares: the figures, the noises, and whether clocks were measured."""

    name: str
    now: float
    then: float
    own_dispersion: float | None
    base_dispersion: float | None
    clocks_known: bool
    note: str = ""


def _bases(metric: Metric, baseline: Baseline, threshold: Threshold) -> list[_Basis]:
    """What the metric may be compared on: its figure always; for a per-clock metric whose window
    or baseline sat at the power cap, with clocks known on both sides, also per clock cycle; for a
    metric that is not wholly `clock_bound` (a training step, partly bound by memory and launches),
    only when the clock is not higher now than at baseline: such a step does not speed up in step
    with a clock that rose, so dividing by it would read as a regression (the H100's eager Llama
    steps: throughput 1.012, per clock 0.979, with the clock 3.5% higher than at baseline). The
    smaller clock_min_band applies where the clock part of run-to-run drift is seen: per clock, with
    both clocks known and no cap, or with the spread of three or more folded runs."""
    window = _window_clock(metric)
    now_mhz, then_mhz = window.get("mean_mhz"), baseline.window_clock_mhz
    clocks_known = bool(now_mhz and then_mhz) and threshold.per_clock
    capped = max(window.get("capped_share") or 0.0, baseline.capped_share or 0.0) >= CAPPED_SHARE
    spread_known = baseline.run_spread(per_clock=False) is not None
    bases = [
        _Basis(
            "throughput",
            metric.value,
            baseline.value,
            metric.dispersion,
            baseline.dispersion,
            clocks_known and (not capped or spread_known),
        )
    ]
    baseline_per_clock = baseline.per_clock()
    if (
        clocks_known
        and now_mhz is not None
        and then_mhz is not None
        and capped
        and baseline_per_clock
        and metric.better == "higher"
        and (threshold.clock_bound or now_mhz <= then_mhz)
    ):
        bases.append(
            _Basis(
                "per-clock",
                metric.value / now_mhz,
                baseline_per_clock,
                window.get("per_clock_dispersion"),
                baseline.per_clock_dispersion,
                True,
                f"judged per clock cycle (the device sat at its power or thermal cap): mean clock {now_mhz:.0f} MHz now "
                f"vs {then_mhz:.0f} MHz at baseline, throughput ratio {metric.value / baseline.value:.3f}",
            )
        )
    return bases


def _noise(basis: _Basis, baseline: Baseline) -> float:
    """The relative noise of the comparison. With folded runs: the between-run spread (a new run
    deviates from the stack's mean at least as much as the runs did, plus the error of their
    median); else the root-sum-square of both windows' own noise."""
    own = relative_noise(basis.own_dispersion)
    spread = baseline.run_spread(basis.name == "per-clock")
    if spread is not None:
        between, runs = spread
        return combined_noise(between * math.sqrt(math.pi / (2 * runs)), max(between, own))
    return combined_noise(relative_noise(basis.base_dispersion), own)


def detectable_change(allowed: float, noise: float) -> float:
    """The smallest slowdown that fails 95% of the time: the band plus 1.645 sd of the noise."""
    return allowed + Z_POWER * noise


def _too_blunt(threshold: Threshold, detectable: float) -> str:
    """The informational note for a host-side metric that cannot catch `detect_limit` ('' if it can)."""
    if threshold.detect_limit is None or detectable <= threshold.detect_limit:
        return ""
    return (
        f"host-side metric shown, not gated: it can only catch a change of {detectable:.0%} on this node "
        f"(a gated metric must catch {threshold.detect_limit:.0%}); to gate it anyway, add the line "
        f"'<pattern> detect=none' to rocm_perf_thresholds"
    )


def judge(
    metric: Metric,
    baseline: Baseline | None,
    threshold: Threshold,
    device_key: str,
    update_command: str,
) -> Judgement:
    """Compare `metric` with its baseline under `threshold`. Pure; the message says everything
    a reader needs (value, baseline, ratio, allowed band and where it came from, what was
    compared, % of peak), a regression's cause with its evidence (rocm_validate.perf.attribution),
    and `update_command`, the command that re-records it (not after contention or throttling: such
    a run must not become the baseline). The metric's name is not repeated: every place that shows
    a message puts the name before it."""
    if baseline is None:
        own = relative_noise(metric.dispersion)
        detectable = detectable_change(threshold.allowed(own), own * math.sqrt(2))
        if threshold.informational:
            return Judgement(
                Verdict.INFORMATIONAL, f"informational ({threshold.informational}); no baseline on {device_key} yet"
            )
        return Judgement(
            Verdict.NO_BASELINE, f"no baseline on {device_key}; run {update_command}", detectable=detectable
        )
    if (baseline.unit, baseline.better) != (metric.unit, metric.better):
        return Judgement(
            Verdict.MISMATCH,
            f"the baseline is in {baseline.unit} ({baseline.better} is better) but this run "
            f"measures {metric.unit} ({metric.better} is better); re-record it with {update_command}",
            category="configuration",
            fix=f"re-record the baselines whose unit or direction changed with {update_command}",
        )
    # The basis with the narrower band, decided before the ratio is looked at: per clock cycle for
    # a kernel the clock paces, throughput for a step bound by launches or memory.
    judged = []
    for index, option in enumerate(_bases(metric, baseline, threshold)):
        option_noise = _noise(option, baseline)
        judged.append((threshold.allowed(option_noise, option.clocks_known), -index, option_noise, option))
    allowed, _, noise, basis = min(judged, key=lambda item: item[:2])
    if len(judged) > 1 and basis.name == "throughput":
        per_clock_band = judged[1][0]
        basis = replace(
            basis,
            note=f"judged on throughput: its band ({allowed:.1%}) is narrower than per clock cycle ({per_clock_band:.1%})",
        )
    detectable = detectable_change(allowed, noise)
    ratio = basis.now / basis.then
    higher = metric.better == "higher"
    bound = 1 - allowed if higher else 1 + allowed
    worse = ratio < bound if higher else ratio > bound
    better = ratio > 1 + allowed if higher else ratio < 1 - allowed
    change = abs(ratio - 1)
    compared = "; " + basis.note if basis.note else ""
    summary = (
        f"{format_number(metric.value)} {metric.unit} vs baseline {format_number(baseline.value)} "
        f"(ratio {ratio:.3f}, allowed {threshold.describe(noise, basis.clocks_known)}{compared}; "
        f"catches a {detectable:.1%} change)"
    )
    base: dict[str, Any] = dict(
        ratio=ratio,
        bound=bound,
        allowed=allowed,
        noise=noise,
        basis=basis.name,
        detectable=detectable,
        throughput_ratio=metric.value / baseline.value if basis.name != "throughput" else None,
    )
    blunt = _too_blunt(threshold, detectable)
    if threshold.informational or blunt:
        why = blunt or f"informational ({threshold.informational})"
        return Judgement(Verdict.INFORMATIONAL, f"{why}: {summary}", **base)
    if worse:
        direction = "slower" if metric.unit.endswith("/s") else "worse"
        per = " per clock cycle" if basis.name == "per-clock" else ""
        window = _window_clock(metric)
        cause = attribute(
            metric.name,
            metric.extra.get("telemetry") or {},
            baseline.clock_mhz,
            change,
            window=(window.get("mean_mhz"), baseline.window_clock_mhz, tuple(window.get("reasons") or ())),
            per_clock=basis.name == "per-clock",
        )
        update = f". If this is expected, re-record with {update_command}" if cause.category == "performance" else ""
        return Judgement(
            Verdict.REGRESSED,
            f"regressed: {change:.1%} {direction}{per}, {summary}{_peak_note(metric)}{cause.note}{update}",
            category=cause.category,
            gpus=cause.gpus,
            **base,
        )
    if better:
        return Judgement(
            Verdict.IMPROVED,
            f"{change:.1%} better than baseline, beyond the band: {summary}. If this is the new normal, "
            f"record it with {update_command}",
            **base,
        )
    return Judgement(Verdict.PASS, "", **base)


def judge_floor(metric: Metric, floor: Any, device_key: str, update_command: str) -> Judgement:
    """Compare `metric` with the least its SKU may measure (`floors.Floor`), or, for a
    lower-is-better metric, the most (a ceiling: peak memory). Pure; 'floor-pass' or
    'below-floor' (worse than the floor or ceiling), the message naming its source."""
    ratio = metric.value / floor.value
    kind = getattr(floor, "kind", "floor")
    summary = f"{format_number(metric.value)} {metric.unit} vs the {kind} {format_number(floor.value)} (ratio {ratio:.3f}; {floor.source})"
    if (floor.unit, getattr(floor, "better", "higher")) != (metric.unit, metric.better):
        return Judgement(
            Verdict.MISMATCH,
            f"the {kind} is in {floor.unit} but this run measures {metric.unit} ({metric.better} is better)",
            category="configuration",
            fix=f"give each {kind} the unit its metric is measured in ({floor.source})",
        )
    if ratio < 1 if metric.better == "higher" else ratio > 1:
        where = "below the floor" if kind == "floor" else "above the ceiling"
        return Judgement(
            Verdict.BELOW_FLOOR,
            f"{where}: {summary}{_peak_note(metric)}. This SKU should be within it on any healthy node; "
            f"check the node (clocks, other processes, the driver) before recording a baseline with {update_command}",
            ratio=ratio,
            bound=1.0,
        )
    return Judgement(
        Verdict.FLOOR_PASS, f"no baseline on {device_key} yet; gated by the {kind}: {summary}", ratio=ratio, bound=1.0
    )


def noisy_run_note(metric: Metric, threshold: Threshold, dispersion: float | None = None) -> str:
    """A warning for a run whose own spread exceeds what the gate can absorb ('' when quiet).
    `dispersion` is the spread of the figure that gated (per clock cycle, when it was)."""
    own = relative_noise(metric.dispersion if dispersion is None else dispersion)
    if threshold.informational or own <= threshold.noise_limit():
        return ""
    return (
        f"this run was noisy: round-to-round noise {own:.2%} exceeds {threshold.noise_limit():.2%} "
        f"(cap {threshold.cap:.1%} / noise_multiple {threshold.noise_multiple:g}); check for other work on the device"
    )


def gated_dispersion(metric: Metric, basis: str) -> float | None:
    """The own-window spread of the figure compared on `basis` (a Judgement's)."""
    if basis == "per-clock":
        return _window_clock(metric).get("per_clock_dispersion")
    return metric.dispersion


def baseline_from_entry(entry: Mapping[str, Any]) -> Baseline:
    """A baseline file entry -> the Baseline the gate compares with."""
    provenance = entry.get("provenance") or {}
    clock = entry.get("clock") or {}
    return Baseline(
        value=float(entry["value"]),
        unit=str(entry["unit"]),
        better=str(entry["better"]),
        dispersion=entry.get("dispersion"),
        clock_mhz=(provenance.get("telemetry") or {}).get("clock_mhz"),
        window_clock_mhz=clock.get("mean_mhz"),
        capped_share=clock.get("capped_share"),
        per_clock_dispersion=clock.get("per_clock_dispersion"),
        runs=tuple(RunPoint(float(r["value"]), r.get("clock_mhz")) for r in entry.get("runs") or ()),
    )
