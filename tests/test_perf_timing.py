"""Timing engine and statistics: pure rules, and measurement against a virtual clock whose
time only moves when the measured function says so (so every expected number is exact, and
the warm-up's wall-clock limits are virtual too)."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest

from rocm_validate.perf import timing
from rocm_validate.perf.stats import (
    SampleSummary,
    combined_noise,
    paired_ratios,
    relative_noise,
)
from rocm_validate.perf.timing import Rotation, TimingPlan

MIB = 1024 * 1024


class VirtualClock:
    """Marks read a counter that the measured functions advance."""

    method = "virtual"

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def mark(self) -> float:
        return self.now

    def synchronize(self) -> None:
        return None

    def seconds_between(self, start: float, end: float) -> float:
        return end - start


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    """A virtual clock that also drives the engine's wall-clock limits, so runs are exact."""
    virtual = VirtualClock()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: virtual.now))
    return virtual


QUICK = TimingPlan(
    warmup_min_s=0.0, warmup_max_s=0.05, steady_tolerance=0.01, window_s=0.1, round_s=0.005, min_rounds=4, max_rounds=50
)


def test_a_summary_reports_the_window_total_and_the_mean_per_call() -> None:
    summary = SampleSummary((0.001, 0.002, 0.003), calls=10)
    assert summary.total_seconds == pytest.approx(0.06)
    assert summary.total_calls == 30
    assert summary.mean == pytest.approx(0.002)
    assert summary.median == 0.002


def test_dispersion_is_iqr_over_median_as_pytest_benchmark_computes_the_iqr() -> None:
    summary = SampleSummary((1.0, 2.0, 3.0, 4.0), calls=1)
    stats = summary.benchmark_stats()
    assert (stats["q1"], stats["q3"]) == (1.5, 3.5)
    assert summary.dispersion == pytest.approx(2.0 / 2.5)
    assert summary.noise == pytest.approx(0.8 / 1.349)


def test_dispersion_comes_from_block_means_so_fast_alternation_averages_out() -> None:
    alternating = tuple(0.0015 if i % 2 else 0.0018 for i in range(64))  # power-cap flip-flop, 64 rounds
    summary = SampleSummary(alternating, calls=4)
    assert _iqr_over_median(alternating) > 0.15  # single rounds spread ~18%
    assert summary.dispersion < 1e-9  # every 8-round block has the same mean


def test_a_drift_across_the_window_shows_in_the_block_dispersion() -> None:
    drifting = tuple(0.001 * (1 + 0.01 * i) for i in range(64))
    assert SampleSummary(drifting, calls=1).dispersion > 0.2


def test_a_sustained_average_takes_the_noise_of_its_window_mean() -> None:
    slow_cycle = tuple(0.0015 if (i // 12) % 2 else 0.0018 for i in range(64))  # flips every 12 rounds
    summary = SampleSummary(slow_cycle, calls=4)
    assert summary.dispersion > 0.05
    assert summary.mean_dispersion == pytest.approx(summary.dispersion / 8**0.5)


def test_only_sustained_timings_report_the_window_mean_dispersion() -> None:
    from rocm_validate.perf.timing import Timing

    summary = SampleSummary(tuple(0.0015 if (i // 12) % 2 else 0.0018 for i in range(64)), calls=4)
    plain = Timing(summary, "device-events", 0.5, True)
    sustained = Timing(summary, "device-events", 2.0, True, sustained=True)
    assert plain.dispersion == summary.dispersion and sustained.dispersion == summary.mean_dispersion


def _iqr_over_median(values: tuple[float, ...]) -> float:
    ordered = sorted(values)
    quarter = len(ordered) // 4
    return (ordered[-quarter] - ordered[quarter]) / ordered[len(ordered) // 2]


def test_benchmark_stats_carry_every_pytest_benchmark_field_and_the_iterations() -> None:
    from pytest_benchmark.stats import Stats

    stats = SampleSummary((0.5, 0.25), calls=4).benchmark_stats()
    assert set(Stats.fields) | {"iterations"} == set(stats)
    assert stats["iterations"] == 4
    assert stats["ops"] == pytest.approx(2 / 0.75)


def test_a_summary_rejects_non_positive_or_non_finite_rounds() -> None:
    for bad in ((), (0.0,), (math.nan,), (-1.0,)):
        with pytest.raises(ValueError):
            SampleSummary(bad, calls=1)


def test_noise_of_a_comparison_adds_in_quadrature_and_unknown_spread_is_zero() -> None:
    assert combined_noise(0.03, 0.04) == pytest.approx(0.05)
    assert relative_noise(None) == 0.0
    assert paired_ratios((2.0, 4.0), (1.0, 2.0)) == (2.0, 2.0)
    with pytest.raises(ValueError):
        paired_ratios((1.0,), (1.0, 2.0))


def test_calls_are_batched_until_a_round_lasts_the_target() -> None:
    assert timing.calls_per_round(0.001, 0.005) == 5
    assert timing.calls_per_round(0.02, 0.005) == 1
    assert timing.calls_per_round(0.0, 0.005) == 100_000


def test_the_round_count_fills_the_window_within_the_plans_bounds() -> None:
    assert timing.round_count(0.01, QUICK) == 10
    assert timing.round_count(1.0, QUICK) == QUICK.min_rounds
    assert timing.round_count(1e-6, QUICK) == QUICK.max_rounds


def test_a_rate_is_steady_only_when_three_windows_agree() -> None:
    assert timing.is_steady([100, 100.5, 100.2], 0.01)
    assert not timing.is_steady([100, 101, 102], 0.01), "a slow drift is not a plateau"
    assert not timing.is_steady([100, 100], 0.01)


def test_the_cache_defeat_exceeds_twice_the_largest_cache() -> None:
    assert timing.cache_defeat_bytes(4 * MIB, 256 * MIB) == 512 * MIB  # MI300X: Infinity Cache
    assert timing.cache_defeat_bytes(50 * MIB, 50 * MIB) == 100 * MIB  # H100: L2
    assert timing.cache_defeat_bytes(None, None) == 64 * MIB


def test_rotation_covers_the_defeat_size_and_cycles_through_every_set() -> None:
    assert timing.rotation_count(200 * MIB, 512 * MIB) == 3
    assert timing.rotation_count(1024 * MIB, 512 * MIB) == 1
    assert timing.rotation_count(1, 512 * MIB) == 16
    rotation = Rotation(["a", "b", "c"])
    assert [rotation.next() for _ in range(5)] == ["a", "b", "c", "a", "b"]


def test_a_plan_rejects_impossible_bounds() -> None:
    with pytest.raises(ValueError):
        TimingPlan(0.5, 0.1, 0.01, 1.0, 0.01, 1, 10)
    with pytest.raises(ValueError):
        TimingPlan(0.0, 0.1, 0.01, 1.0, 0.01, 5, 2)


def test_scaling_the_window_scales_warm_up_limit_too() -> None:
    scaled = QUICK.with_window(2.0)
    assert (scaled.window_s, scaled.warmup_max_s) == (0.2, 0.1)


def test_throughput_is_total_work_over_total_time_not_a_mean_of_rates(clock: VirtualClock) -> None:
    durations = itertools.cycle([0.001, 0.003])
    measured = timing.measure(lambda: clock.advance(next(durations)), QUICK, clock)
    summary = measured.summary
    assert measured.rate(1.0) == pytest.approx(summary.total_calls / summary.total_seconds)
    mean_of_rates = sum(1 / s for s in summary.seconds) / summary.rounds
    assert measured.rate(1.0) < mean_of_rates, "the mean of per-round rates is biased high"


def test_measurement_counts_only_the_measured_window(clock: VirtualClock) -> None:
    measured = timing.measure(lambda: clock.advance(0.002), QUICK, clock)
    assert measured.summary.calls == 3  # 3 x 2 ms reaches the 5 ms round
    assert measured.summary.rounds == timing.round_count(0.006, QUICK)
    assert measured.summary.seconds == pytest.approx((0.002,) * measured.summary.rounds)


def test_warm_up_that_never_settles_says_so(clock: VirtualClock) -> None:
    state = {"seconds": 0.001}

    def slowing() -> None:
        state["seconds"] *= 1.05
        clock.advance(state["seconds"])

    measured = timing.measure(slowing, QUICK, clock)
    assert not measured.warmup_steady
    assert measured.details()["warmup_steady"] is False


def test_interleaved_functions_alternate_round_by_round(clock: VirtualClock) -> None:
    order: list[str] = []
    plan = TimingPlan(0.0, 0.05, 0.01, 0.01, 0.001, 3, 3)

    def make(name: str, seconds: float):
        def run() -> None:
            order.append(name)
            clock.advance(seconds)

        return run

    timings = timing.measure_interleaved({"a": make("a", 0.001), "b": make("b", 0.002)}, plan, clock)
    assert order[-2:] == ["a", "b"] and order[-4:-2] == ["a", "b"]
    assert timings["a"].summary.mean == pytest.approx(0.001)
    assert timings["b"].summary.mean == pytest.approx(0.002)


def test_the_host_clock_times_real_cpu_work() -> None:
    total = []
    measured = timing.measure(lambda: total.append(sum(range(2000))), QUICK, timing.HostClock())
    assert measured.method == "host-clock"
    assert 0 < measured.summary.mean < 0.01
    assert measured.rate(2000) > 0


def test_a_round_far_slower_than_the_rest_is_a_stall() -> None:
    rounds = [0.150, 0.151, 0.152, 0.150, 0.149, 0.151, 0.153, 0.150, 0.152, 0.151, 0.150, 0.223]
    assert timing.stall_rounds(rounds) == (11,)


def test_a_slow_round_within_a_fifth_of_the_median_is_not_a_stall() -> None:
    rounds = [0.100] * 11 + [0.119]
    assert timing.stall_rounds(rounds) == ()


def test_slowness_in_more_than_a_tenth_of_the_rounds_is_the_works_own() -> None:
    rounds = [0.100] * 10 + [0.200] * 2  # 2 of 12 rounds: more than a tenth
    assert timing.stall_rounds(rounds) == ()


def test_a_short_window_has_no_stalls_left_out() -> None:
    assert timing.stall_rounds([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5]) == ()


def test_a_uniformly_slower_kernel_is_never_trimmed_back_to_its_old_speed(clock: VirtualClock) -> None:
    fast = timing.measure(lambda: clock.advance(0.002), QUICK, clock)
    slow = timing.measure(lambda: clock.advance(0.0021), QUICK, clock)
    assert slow.rate(1.0) / fast.rate(1.0) == pytest.approx(1 / 1.05)
    assert slow.stalls == ()


def _stalling(clock: VirtualClock, seconds: float, every: int, stall: float):
    calls = itertools.count()

    def run() -> None:
        clock.advance(seconds * (stall if next(calls) % every == every - 1 else 1.0))

    return run


STEPS = TimingPlan(0.0, 0.05, 0.5, 2.0, 0.001, 10, 40)  # one call per round, like a training step


def test_a_stalled_step_is_left_out_of_the_rate_and_reported(clock: VirtualClock) -> None:
    measured = timing.measure(_stalling(clock, 0.1, every=21, stall=1.5), STEPS, clock)
    assert measured.rate(1.0) == pytest.approx(10.0)
    details = measured.details()["stalls"]
    assert details["rounds"] == 1 and details["of"] == measured.summary.rounds + 1
    assert details["worst_over_median"] == pytest.approx(1.5)
    note = timing.stall_note(measured.details())
    assert "1 of 20 rounds stalled (worst 1.50x the median round)" in note and "left out" in note


def test_a_stall_in_every_fifth_step_stays_in_the_rate(clock: VirtualClock) -> None:
    measured = timing.measure(_stalling(clock, 0.1, every=5, stall=1.5), STEPS, clock)
    assert measured.rate(1.0) == pytest.approx(1 / 0.11)  # a periodic stall is the work's own pace
    assert measured.stalls == () and timing.stall_note(measured.details()) == ""


def test_a_stall_of_one_interleaved_job_leaves_that_round_out_for_both(clock: VirtualClock) -> None:
    plan = TimingPlan(0.0, 0.05, 0.5, 4.0, 0.001, 10, 40)
    timings = timing.measure_interleaved(
        {"a": _stalling(clock, 0.1, every=25, stall=2.0), "b": lambda: clock.advance(0.05)}, plan, clock
    )
    a, b = timings["a"], timings["b"]
    assert a.summary.rounds == b.summary.rounds == len(a.round_spans) == len(b.round_spans)
    assert len(a.stalls) == 1 and b.stalls == () and b.dropped_with_partner == 1
    assert a.rate(1.0) == pytest.approx(10.0)
    assert "because the work timed beside it stalled" in timing.stall_note(b.details())
