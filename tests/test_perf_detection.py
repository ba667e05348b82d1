"""Detection power: per-clock judgement at the power cap, bands from folded runs' spread, the
detectable change of every judgement, and host-side metrics too blunt to gate. Clocks are made
up (no GPU here); every rule that can pass a run has a negative control that fails one."""

from __future__ import annotations

import pytest

from rocm_validate.perf import gate
from rocm_validate.perf.gate import Baseline, RunPoint, Threshold
from rocm_validate.results.metrics import Metric

KEY = "nvidia-h100-80gb-hbm3-sm90"
RECORD = "pytest --rocm-suite=perf --update-baselines"  # the command a message names to record a baseline
GEMM = gate.threshold_for("gemm.bf16.8192x8192x8192", "cuda")


def gemm(
    value: float, mhz: float | None = None, capped: float = 0.0, dispersion: float = 0.002, per_clock: float = 0.002
) -> Metric:
    extra = {}
    if mhz is not None:
        extra["clock"] = {
            "mean_mhz": mhz,
            "capped_share": capped,
            "reasons": ["sw-power-cap"] if capped else [],
            "per_clock_dispersion": per_clock,
        }
    return Metric("gemm.bf16.8192x8192x8192", value, "TFLOP/s", dispersion=dispersion, extra=extra)


def baseline(
    value: float = 680.0, mhz: float | None = 1600.0, capped: float = 0.9, runs: tuple[RunPoint, ...] = ()
) -> Baseline:
    return Baseline(
        value,
        "TFLOP/s",
        "higher",
        dispersion=0.002,
        window_clock_mhz=mhz,
        capped_share=capped,
        per_clock_dispersion=0.002,
        runs=runs,
    )


def test_at_the_power_cap_a_lower_clock_with_the_same_work_per_cycle_passes_per_clock() -> None:
    judgement = gate.judge(gemm(680.0 * 0.92, mhz=1600.0 * 0.92, capped=0.95), baseline(), GEMM, KEY, RECORD)
    assert judgement.verdict == "pass" and judgement.basis == "per-clock"
    assert judgement.throughput_ratio == pytest.approx(0.92) and judgement.ratio == pytest.approx(1.0)


def test_at_the_power_cap_a_five_percent_slower_kernel_fails_per_clock() -> None:
    judgement = gate.judge(gemm(680.0 / 1.05 * 0.97, mhz=1600.0 * 0.97, capped=0.95), baseline(), GEMM, KEY, RECORD)
    assert judgement.verdict == "regressed" and judgement.basis == "per-clock"
    assert "slower per clock cycle" in judgement.message and "judged per clock cycle" in judgement.message
    assert "throughput ratio 0.924" in judgement.message


def test_a_lower_clock_without_a_power_or_thermal_limit_is_judged_on_throughput_and_fails() -> None:
    locked = gate.judge(gemm(680.0 * 0.9, mhz=1440.0, capped=0.0), baseline(capped=0.0), GEMM, KEY, RECORD)
    assert locked.verdict == "regressed" and locked.basis == "throughput"
    assert "mean clock 1440 MHz now vs 1600 MHz at baseline (-10.0%)" in locked.message


def test_without_clocks_on_both_sides_the_wider_min_band_holds() -> None:
    no_clock = gate.judge(gemm(680.0 * 0.96), baseline(mhz=None), GEMM, KEY, RECORD)
    with_clock = gate.judge(gemm(680.0 * 0.96, mhz=1600.0, capped=0.0), baseline(capped=0.0), GEMM, KEY, RECORD)
    assert (no_clock.verdict, no_clock.allowed) == ("pass", GEMM.min_band)
    assert (with_clock.verdict, with_clock.allowed) == ("regressed", GEMM.clock_min_band)


def test_a_metric_not_marked_per_clock_is_never_judged_per_clock() -> None:
    copy = gate.threshold_for("copy.device.2048mib", "cuda")
    judgement = gate.judge(gemm(680.0 * 0.92, mhz=1600.0 * 0.92, capped=0.95), baseline(), copy, KEY, RECORD)
    assert judgement.basis == "throughput" and judgement.verdict == "regressed"


def test_folded_runs_replace_the_window_noise_with_their_between_run_spread() -> None:
    threshold = Threshold(min_band=0.03, noise_multiple=3.0, cap=0.08)
    runs = tuple(RunPoint(v) for v in (676.0, 680.0, 684.0))
    noisy_window = gemm(680.0, dispersion=0.05)
    with_runs = gate.judge(noisy_window, baseline(mhz=None, runs=runs), threshold, KEY, RECORD)
    without = gate.judge(noisy_window, baseline(mhz=None), threshold, KEY, RECORD)
    spread = 4.0 / 680.0  # the runs' relative standard deviation; the median of 3 errs by sqrt(pi/6) of it
    own = 0.05 / 1.349  # a new run deviates at least as much as its own window says
    assert with_runs.noise == pytest.approx((spread**2 * 3.14159265 / 6 + own**2) ** 0.5, rel=1e-6)
    quiet = gate.judge(gemm(680.0), baseline(mhz=None, runs=runs), threshold, KEY, RECORD)
    assert quiet.noise == pytest.approx((spread**2 * 3.14159265 / 6 + spread**2) ** 0.5, rel=1e-6)
    assert without.noise > quiet.noise


def test_at_the_cap_the_basis_with_the_narrower_band_judges() -> None:
    clock_swings = gemm(680.0, mhz=1600.0, capped=0.95, dispersion=0.03, per_clock=0.004)
    assert gate.judge(clock_swings, baseline(), GEMM, KEY, RECORD).basis == "per-clock"
    clock_scatters = gemm(680.0 / 1.05, mhz=1600.0, capped=0.95, dispersion=0.004, per_clock=0.03)
    runs = tuple(RunPoint(v, 1600.0) for v in (679.0, 680.0, 681.0))
    judgement = gate.judge(clock_scatters, baseline(runs=runs), GEMM, KEY, RECORD)
    assert (judgement.basis, judgement.verdict, judgement.allowed) == ("throughput", "regressed", GEMM.clock_min_band)
    assert "judged on throughput: its band (2.5%) is narrower than per clock cycle (6.7%)" in judgement.message


def test_a_clock_that_rose_is_not_held_against_a_step_that_did_not_speed_up_with_it() -> None:
    """The H100's eager Llama step: clock 3.5% above the baseline's, throughput 1.2% above, per clock 2.1% below."""
    step = gate.threshold_for("train.llama-3.1-8b-2l.eager.tokens_per_s", "cuda")
    same_work = gate.judge(gemm(680.0 * 1.012, mhz=1600.0 * 1.035, capped=0.95), baseline(), step, KEY, RECORD)
    assert (same_work.basis, same_work.verdict) == ("throughput", "pass")
    slower = gate.judge(gemm(680.0 * 0.90, mhz=1600.0 * 1.035, capped=0.95), baseline(), step, KEY, RECORD)
    assert (slower.basis, slower.verdict) == ("throughput", "regressed")
    clock_dropped = gate.judge(gemm(680.0 * 0.95, mhz=1600.0 * 0.95, capped=0.95), baseline(), step, KEY, RECORD)
    assert (clock_dropped.basis, clock_dropped.verdict) == ("per-clock", "pass")


def test_a_gemm_is_judged_per_clock_whichever_way_the_clock_moved() -> None:
    """A GEMM at the power cap does the same work per cycle: 3.5% more clock and the same throughput is slower silicon."""
    judgement = gate.judge(gemm(680.0, mhz=1600.0 * 1.035, capped=0.95), baseline(), GEMM, KEY, RECORD)
    assert (judgement.basis, judgement.verdict) == ("per-clock", "regressed")


def test_runs_that_disagree_widen_the_band_so_a_drifting_metric_does_not_false_alarm() -> None:
    runs = tuple(RunPoint(v, 1600.0) for v in (640.0, 680.0, 720.0))
    judgement = gate.judge(gemm(640.0, mhz=1600.0, capped=0.95), baseline(runs=runs), GEMM, KEY, RECORD)
    assert judgement.verdict == "pass" and judgement.allowed > 0.06


def test_every_judgement_states_the_change_it_catches_95_percent_of_the_time() -> None:
    judgement = gate.judge(gemm(680.0, mhz=1600.0, capped=0.95), baseline(), GEMM, KEY, RECORD)
    assert judgement.detectable == pytest.approx(judgement.allowed + 1.645 * judgement.noise)
    assert (
        f"catches a {judgement.detectable:.1%} change"
        in gate.judge(gemm(600.0, mhz=1600.0, capped=0.95), baseline(), GEMM, KEY, RECORD).message
    )
    assert gate.detectable_change(0.03, 0.01) == pytest.approx(0.04645)


def test_a_host_side_metric_that_cannot_catch_ten_percent_is_shown_not_gated() -> None:
    launch = gate.threshold_for("launch.empty_kernel.host_us", "cuda")
    noisy = Metric("launch.empty_kernel.host_us", 9.0, "us", better="lower", dispersion=0.10)
    judgement = gate.judge(noisy, Baseline(5.0, "us", "lower", dispersion=0.10), launch, KEY, RECORD)
    assert judgement.verdict == "informational" and not judgement.fails
    assert "host-side metric shown, not gated" in judgement.message and "detect=none" in judgement.message


def test_a_host_side_metric_that_can_catch_ten_percent_still_gates() -> None:
    host = gate.Threshold(min_band=0.05, noise_multiple=3.0, cap=0.08, detect_limit=gate.HOST_DETECT_LIMIT)
    slow = Metric("copy.host_to_device.pinned.256mib", 40.0, "GB/s", dispersion=0.001)
    assert (
        gate.judge(slow, Baseline(52.0, "GB/s", "higher", dispersion=0.001), host, KEY, RECORD).verdict == "regressed"
    )


def test_pinned_copies_are_shown_not_gated_since_their_vm_to_vm_spread_hides_ten_percent() -> None:
    pinned = gate.threshold_for("copy.h2d.pinned.512mib", "cuda")
    slow = Metric("copy.h2d.pinned.512mib", 40.0, "GB/s", dispersion=0.001)
    judgement = gate.judge(slow, Baseline(52.0, "GB/s", "higher", dispersion=0.001), pinned, KEY, RECORD)
    assert judgement.verdict == "informational" and judgement.detectable > gate.HOST_DETECT_LIMIT
    (rule,) = gate.parse_rules(["copy.*.pinned.* detect=none"])
    assert (
        gate.judge(slow, Baseline(52.0, "GB/s", "higher", dispersion=0.001), rule.threshold, KEY, RECORD).verdict
        == "regressed"
    )


def test_detect_none_in_the_ini_gates_a_blunt_host_side_metric_anyway() -> None:
    (rule,) = gate.parse_rules(["launch.* detect=none"])
    noisy = Metric("launch.empty_kernel.host_us", 9.0, "us", better="lower", dispersion=0.10)
    judgement = gate.judge(noisy, Baseline(5.0, "us", "lower", dispersion=0.10), rule.threshold, KEY, RECORD)
    assert judgement.verdict == "regressed"


@pytest.mark.parametrize(
    "line, problem",
    [
        ("gemm.* per_clock=maybe", "expected yes or no"),
        ("gemm.* detect=lots", "expected a fraction"),
        ("gemm.* clock_min_band=0.09", "clock_min_band <= min_band"),
        ("launch.* detect=2", "between 0 and 1"),
    ],
)
def test_bad_detection_settings_in_the_ini_are_named(line: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        gate.parse_rules([line])


def test_a_scaled_reference_scales_its_runs_so_acceptance_runs_can_rejudge_offline() -> None:
    runs = tuple(RunPoint(v, 1600.0) for v in (676.0, 680.0, 684.0))
    scaled = baseline(runs=runs).scaled(1.05)
    assert scaled.value == pytest.approx(714.0) and scaled.runs[0].value == pytest.approx(709.8)
    assert gate.judge(gemm(680.0, mhz=1600.0, capped=0.95), scaled, GEMM, KEY, RECORD).verdict == "regressed"


def test_a_loss_left_after_dividing_out_the_clock_is_the_stacks_not_throttling() -> None:
    judgement = gate.judge(gemm(680.0 * 0.85, mhz=1600.0 * 0.95, capped=0.95), baseline(), GEMM, KEY, RECORD)
    assert (judgement.verdict, judgement.basis, judgement.category) == ("regressed", "per-clock", "performance")
    assert "mean clock 1520 MHz now vs 1600 MHz at baseline (-5.0%)" in judgement.message


def test_a_throughput_loss_the_window_clock_drop_explains_is_throttling() -> None:
    throttled = gemm(680.0 * 0.85, mhz=1600.0 * 0.85, capped=0.0)
    judgement = gate.judge(throttled, baseline(capped=0.0), GEMM, KEY, RECORD)
    assert (judgement.basis, judgement.category) == ("throughput", "throttling")
    assert "re-record" not in judgement.message


def test_a_step_whose_runs_agree_better_on_throughput_is_judged_on_throughput_with_the_narrower_band() -> None:
    # the clock fell while the figure rose: a launch-bound step, which the clock does not pace
    runs = tuple(RunPoint(v, c) for v, c in ((53000.0, 1785.0), (54200.0, 1767.0), (54300.0, 1752.0)))
    reference = Baseline(
        54200.0, "tokens/s", "higher", dispersion=0.01, window_clock_mhz=1767.0, capped_share=1.0, runs=runs
    )
    step = Metric(
        "train.llama.fp8.tokens_per_s",
        54200.0 / 1.08,
        "tokens/s",
        dispersion=0.01,
        extra={"clock": {"mean_mhz": 1760.0, "capped_share": 1.0, "per_clock_dispersion": 0.03}},
    )
    judgement = gate.judge(step, reference, gate.threshold_for(step.name, "cuda"), KEY, RECORD)
    assert (judgement.basis, judgement.verdict) == ("throughput", "regressed")
    assert "narrower than per clock cycle" in judgement.message
