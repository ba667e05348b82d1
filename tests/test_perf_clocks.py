"""The clock over a measurement window, from made-up readings (no GPU here): its mean, the mean of
each block of rounds, the share of readings at a power or thermal limit, and the sampler thread."""

from __future__ import annotations

import time

import pytest

from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import HostClock, TimingPlan, measure
from rocm_validate.platform.clocks import (
    ClockReading,
    ClockSampler,
    clock_window,
    is_capped,
)


def readings(clocks: list[float], start: float = 100.0, step: float = 0.005, **fields: object) -> list[ClockReading]:
    return [ClockReading(start + i * step, mhz, **fields) for i, mhz in enumerate(clocks)]  # type: ignore[arg-type]


def test_the_window_clock_is_the_mean_of_the_readings_inside_it_only() -> None:
    inside = readings([1500.0, 1700.0] * 10, start=100.0)
    outside = [ClockReading(99.0, 100.0), ClockReading(200.0, 100.0)]
    window = clock_window(outside + inside, 100.0, 101.0)
    assert window is not None
    assert (window.mean_mhz, window.min_mhz, window.max_mhz, window.readings) == (1600.0, 1500.0, 1700.0, 20)


def test_too_few_readings_give_no_window_clock() -> None:
    assert clock_window(readings([1500.0] * 9), 100.0, 101.0) is None


def test_each_block_gets_the_mean_clock_of_its_own_time_span() -> None:
    clocks = [1980.0] * 20 + [1200.0] * 20  # boost for 0.1 s, then capped
    window = clock_window(readings(clocks), 100.0, 100.2, blocks=[(0.0, 0.1), (0.1, 0.2)])
    assert window is not None and window.block_mhz == (1980.0, 1200.0)


def test_a_block_between_two_readings_takes_the_nearest_one() -> None:
    window = clock_window(readings([1000.0 + i for i in range(20)]), 100.0, 100.1, blocks=[(0.0121, 0.0122)])
    assert window is not None and window.block_mhz == (1002.0,)


def test_nvml_reasons_decide_capped_and_other_limits_do_not_count() -> None:
    assert is_capped(ClockReading(0, 1400.0, 700.0, ("sw-power-cap",)), None)
    assert is_capped(ClockReading(0, 1400.0, 500.0, ("hw-thermal",)), 700.0)
    assert not is_capped(ClockReading(0, 1980.0, 690.0, ("applications-clocks",)), 700.0)


def test_without_reasons_power_near_the_enforced_cap_counts_as_capped() -> None:
    assert is_capped(ClockReading(0, 1900.0, 716.0, None), 750.0)
    assert not is_capped(ClockReading(0, 2100.0, 600.0, None), 750.0)
    assert not is_capped(ClockReading(0, 2100.0, 750.0, None), None)


def test_the_capped_share_and_the_limits_seen_are_reported() -> None:
    samples = readings([1400.0] * 15, reasons=("sw-power-cap", "idle")) + readings(
        [1980.0] * 5, start=100.075, reasons=()
    )
    window = clock_window(samples, 100.0, 101.0)
    assert window is not None and window.capped_share == 0.75 and window.reasons == ("sw-power-cap",)


def test_the_sampler_reads_on_its_thread_until_stopped() -> None:
    values = iter(range(1000, 100000))
    sampler = ClockSampler(lambda: ClockReading(0.0, float(next(values))), interval_s=0.001).start()
    time.sleep(0.05)
    found = sampler.stop()
    assert len(found) >= 5 and [r.clock_mhz for r in found] == sorted(r.clock_mhz for r in found)
    assert all(b.t > a.t for a, b in zip(found, found[1:]))


def test_a_reading_that_raises_ends_sampling_and_says_why() -> None:
    def broken() -> ClockReading:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    sampler = ClockSampler(broken, interval_s=0.001).start()
    time.sleep(0.01)
    assert sampler.stop() == [] and sampler.error == "RuntimeError: NVML_ERROR_GPU_IS_LOST"


def test_per_clock_dispersion_removes_a_clock_swing_that_moved_the_block_times() -> None:
    clocks = [1980.0, 1200.0] * 4
    seconds = tuple(1.0 / mhz for mhz in clocks)  # a compute-bound kernel: time follows the clock
    summary = SampleSummary(seconds, 1)
    assert summary.dispersion > 0.4
    assert summary.per_clock_dispersion(clocks, sustained=False) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="one clock per block"):
        summary.per_clock_dispersion(clocks[:3], sustained=False)


def test_a_timing_knows_its_host_window_and_the_offsets_of_its_blocks() -> None:
    plan = TimingPlan(
        warmup_min_s=0.0,
        warmup_max_s=0.01,
        steady_tolerance=1.0,
        window_s=0.05,
        round_s=0.002,
        min_rounds=16,
        max_rounds=16,
    )
    began = time.perf_counter()
    timing = measure(lambda: time.sleep(0.001), plan, HostClock())
    assert (
        timing.window_host is not None and began <= timing.window_host[0] < timing.window_host[1] <= time.perf_counter()
    )
    spans = timing.block_spans()
    assert len(spans) == 8 and spans[0][0] == 0.0
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][1] <= timing.window_host[1] - timing.window_host[0]


def test_scattered_block_clocks_do_not_inflate_the_noise_of_a_steady_figure_per_clock() -> None:
    from rocm_validate.perf.recorder import Measurement
    from rocm_validate.perf.timing import Timing
    from rocm_validate.platform.clocks import ClockWindow

    steady = Timing(SampleSummary((0.1,) * 16, 1), "device-events", 1.0, True)
    scattered = ClockWindow(1700.0, 1200.0, 1980.0, 400, 1.0, ("sw-power-cap",), (1300.0, 1900.0) * 4, sd_mhz=200.0)
    details = Measurement(steady, {}, scattered).clock_details()
    assert details is not None
    assert details["per_clock_dispersion"] == pytest.approx(1.349 * 200.0 / 1700.0 / 20.0)  # the mean clock's error
    assert steady.summary.per_clock_dispersion(scattered.block_mhz, sustained=False) > 0.3


def test_block_clocks_that_explain_the_block_times_give_the_smaller_noise() -> None:
    from rocm_validate.perf.recorder import Measurement
    from rocm_validate.perf.timing import Timing
    from rocm_validate.platform.clocks import ClockWindow

    clocks = (1980.0, 1200.0) * 4
    swinging = Timing(SampleSummary(tuple(1.0 / c for c in clocks), 1), "device-events", 1.0, True)
    window = ClockWindow(1590.0, 1200.0, 1980.0, 200, 1.0, ("sw-power-cap",), clocks, sd_mhz=390.0)
    assert Measurement(swinging, {}, window).clock_details()["per_clock_dispersion"] == pytest.approx(0.0, abs=1e-12)
