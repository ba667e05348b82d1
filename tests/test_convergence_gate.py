"""The convergence gate's pure decisions: verdicts from a score, candidate skips, RCP files."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rocm_validate.convergence.check import candidate_skip_reason, judge
from rocm_validate.convergence.minibert import CANDIDATES, PRESETS, preset_for
from rocm_validate.convergence.mlperf import RcpVerdict, RunFacts, RunSetScore
from rocm_validate.convergence.rcps import build_rcp, load_rcp, rcp_path, write_rcp
from rocm_validate.errors import JsonFileError, RcpUnavailable, ReferenceFailed
from rocm_validate.platform.devices import DeviceInfo

RECORD = {
    "batch_size": 128,
    "mean": 10_000.0,
    "stdev": 800.0,
    "min_acceptable_mean": 9_400.0,
    "max_speedup": 10_000 / 9_400,
}
SPEC = PRESETS["cpu"]


def run(index, samples):
    converged = samples is not None
    return RunFacts(
        file=f"result_{index}.txt",
        benchmark="bert",
        global_batch_size=128,
        status="success" if converged else "aborted",
        minutes=1.0,
        to_converge=samples,
        convergence_unit="samples",
        last_eval_accuracy=0.5,
        samples_per_second=100.0,
    )


def scored(samples, passed, message="RCP found", record=RECORD, mean=None):
    runs = tuple(run(i, s) for i, s in enumerate(samples))
    counted = sorted(s for s in samples if s is not None)
    observed = mean if mean is not None else (sum(counted[1:-1]) / (len(counted) - 2) if len(counted) > 2 else None)
    return RunSetScore(
        folder="/runs",
        ruleset="5.0.0",
        rcp_source="rcps.json",
        benchmark="bert",
        global_batch_size=128,
        runs=runs,
        olympic_mean_minutes=1.0,
        olympic_mean_to_converge=observed,
        rcp=RcpVerdict(passed, message, 1.0, record),
        required_runs=10,
        messages=(),
    )


def test_a_set_within_both_bounds_passes():
    verdict = judge("bf16-autocast", scored([9_800, 10_000, 10_200, 10_100, 9_900], True), "rescore")
    assert verdict.verdict == "pass" and verdict.passed
    assert verdict.ratio == pytest.approx(1.0)


def test_a_set_the_official_check_fails_as_too_fast_is_too_fast():
    verdict = judge("leaky", scored([5_000, 5_100, 5_200], False), "rocm-validate mlperf-score /runs")
    assert verdict.verdict == "too-fast"
    assert "below the fastest mean the RCPs allow, 9,400" in verdict.message
    assert verdict.message.endswith("inspect the runs with: rocm-validate mlperf-score /runs")


def test_a_set_slower_than_the_mirrored_bound_is_too_slow_though_the_official_check_passes():
    verdict = judge("lr-x0.1", scored([11_000, 11_500, 12_000], True), "rescore")
    assert verdict.rcp_pass
    assert verdict.verdict == "too-slow"
    assert verdict.slowest_allowed == pytest.approx(10_000 * 10_000 / 9_400)
    assert "converges worse than the reference" in verdict.message


def test_just_inside_the_mirrored_bound_passes():
    verdict = judge("x", scored([10_600, 10_600, 10_600], True), "rescore")
    assert verdict.verdict == "pass"


def test_insufficient_convergence_is_not_converged():
    verdict = judge("x", scored([None, None, 10_000], False, "Insufficient convergence", record=None), "rescore")
    assert verdict.verdict == "not-converged"
    assert "2 of 3 runs did not reach the target" in verdict.message
    assert verdict.samples == (None, None, 10_000)


def test_another_official_failure_is_reported_as_no_verdict():
    verdict = judge("x", scored([10_000] * 3, False, "Missing RCP, please submit RCP with BS = 128", record=None), "r")
    assert verdict.verdict == "no-verdict"
    assert "Missing RCP" in verdict.message


def fake_device(**changes):
    base = DeviceInfo(
        backend="rocm", index=0, name="AMD Instinct MI210", arch="gfx90a", device_key="amd-instinct-mi210-gfx90a"
    )
    return dataclasses.replace(base, **changes)


FP8 = next(c for c in CANDIDATES if c.fp8_linear)


def test_fp8_candidate_is_skipped_on_a_device_without_fp8_saying_need_and_found():
    assert candidate_skip_reason(FP8, fake_device()) == "needs native FP8, found none on gfx90a"


def test_fp8_candidate_runs_where_the_device_has_fp8():
    device = fake_device(arch="gfx950", fp8_formats=("e4m3fn", "e5m2"))
    assert candidate_skip_reason(FP8, device) is None


def test_other_candidates_run_everywhere():
    assert all(candidate_skip_reason(c, fake_device()) is None for c in CANDIDATES if not c.fp8_linear)


def test_gpus_of_both_vendors_get_the_gpu_preset_and_the_cpu_the_ci_preset():
    assert [preset_for(b).name for b in ("rocm", "cuda", "cpu")] == ["gpu", "gpu", "cpu"]


def test_the_definition_fingerprint_follows_what_shapes_convergence_but_not_the_seed_count():
    assert dataclasses.replace(SPEC, seeds=3).fingerprint() == SPEC.fingerprint()
    assert dataclasses.replace(SPEC, target_accuracy=0.31).fingerprint() != SPEC.fingerprint()
    corpus = dataclasses.replace(SPEC.corpus, seed=6)
    assert dataclasses.replace(SPEC, corpus=corpus).fingerprint() != SPEC.fingerprint()


def test_rcps_live_beside_the_perf_baselines_in_their_own_folder(tmp_path):
    assert rcp_path(tmp_path, "amd-instinct-mi300x-gfx942") == tmp_path / "rcps" / "amd-instinct-mi300x-gfx942.json"


def test_written_rcps_read_back_for_the_same_definition(tmp_path):
    path = rcp_path(tmp_path, "cpu-x")
    write_rcp(
        path, build_rcp(SPEC, [960, 2240, 1440, 1280], "rocm-validate test", "2026-01-01T00:00:00+00:00", "CPU x")
    )
    stored = load_rcp(path, SPEC, "record-it")
    assert stored.samples == (960, 2240, 1440, 1280) and stored.batch_size == SPEC.batch_size
    assert list(json.loads(path.read_text())) == [f"bert_ref_{SPEC.batch_size}"]


def test_a_missing_rcp_file_names_the_command_that_records_it(tmp_path):
    with pytest.raises(RcpUnavailable, match=r"no mini-BERT RCPs for this device at .*; record them with: record-it"):
        load_rcp(rcp_path(tmp_path, "cpu-x"), SPEC, "record-it")


def test_rcps_of_another_definition_are_stale(tmp_path):
    path = rcp_path(tmp_path, "cpu-x")
    other = dataclasses.replace(SPEC, target_accuracy=0.25)
    write_rcp(path, build_rcp(other, [960, 2240, 1440], "t", "2026", "CPU x"))
    with pytest.raises(RcpUnavailable, match=f"holds RCPs for mini-BERT definition {other.fingerprint()}"):
        load_rcp(path, SPEC, "record-it")


def test_a_corrupt_rcp_file_is_an_error_naming_the_file_and_the_fix(tmp_path):
    path = rcp_path(tmp_path, "cpu-x")
    path.parent.mkdir(parents=True)
    path.write_text('{"bert_ref_32": {"Benchmark": "bert", "BS": 32')
    with pytest.raises(JsonFileError, match=r"cpu-x.json is not valid JSON .* Record them again with: record-it"):
        load_rcp(path, SPEC, "record-it")


def test_rcps_with_fewer_than_three_runs_are_refused_before_writing(tmp_path):
    path = rcp_path(tmp_path, "cpu-x")
    with pytest.raises(JsonFileError, match="refusing to write"):
        write_rcp(path, build_rcp(SPEC, [960, 2240], "t", "2026", "CPU x"))
    assert not path.exists()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_shipped_rcps_belong_to_the_current_definition_of_each_preset(preset):
    from rocm_validate.convergence.rcps import shipped_rcp_path

    spec = PRESETS[preset]
    stored = load_rcp(shipped_rcp_path(spec), spec, "re-record")
    assert len(stored.samples) >= 2 * spec.seeds, "the shipped RCPs hold twice the candidate's seeds, as MLPerf's do"


def _check(tmp_path, device_file: dict | None):
    from rocm_validate.convergence.check import MiniBertCheck

    spec = PRESETS["cpu"]
    path = rcp_path(tmp_path, "cpu-test")
    if device_file is not None:
        write_rcp(path, device_file)
    return MiniBertCheck(
        spec=spec,
        device=None,
        torch_device=None,
        rcp_file=path,
        record_command="record",
        refusal=lambda finding: f"refused: {finding}",
        seeds=spec.seeds,
        workdir=tmp_path,
        ruleset="5.0.0",
        progress=lambda line, final: None,
    )


def test_new_reference_runs_that_fail_the_stored_rcps_are_refused_unless_accepted(tmp_path, monkeypatch):
    from rocm_validate.convergence import check

    slower = judge("reference", scored([11_000, 11_500, 12_000], True), "rescore")
    assert slower.verdict == "too-slow"
    monkeypatch.setattr(check, "check_run_set", lambda *args: slower)
    refusing = _check(tmp_path, build_rcp(SPEC, [1000, 1100, 1200, 1300, 1400], "test", "now", "here"))
    with pytest.raises(ReferenceFailed, match=r"^refused: the new reference runs fail the RCPs in force, .*too-slow"):
        refusing._refuse_a_regression(tmp_path)
    accepting = dataclasses.replace(refusing, refusal=lambda finding: None)
    assert accepting._refuse_a_regression(tmp_path) == 1200


def test_without_rcps_of_its_own_a_device_checks_against_the_shipped_ones(tmp_path):
    from rocm_validate.convergence.rcps import shipped_rcp_path

    assert _check(tmp_path, None).rcp().path == shipped_rcp_path(PRESETS["cpu"])


def test_a_devices_own_rcps_override_the_shipped_ones(tmp_path):
    spec = PRESETS["cpu"]
    own = build_rcp(spec, [1000, 1100, 1200, 1300, 1400], "test", "now", "here")
    stored = _check(tmp_path, own).rcp()
    assert stored.path == rcp_path(tmp_path, "cpu-test") and stored.samples == (1000, 1100, 1200, 1300, 1400)


def test_a_devices_stale_rcps_give_way_to_the_shipped_ones(tmp_path):
    from rocm_validate.convergence.rcps import shipped_rcp_path

    spec = dataclasses.replace(PRESETS["cpu"], learning_rate=PRESETS["cpu"].learning_rate * 2)
    stale = build_rcp(spec, [1000, 1100, 1200, 1300, 1400], "test", "now", "here")
    assert _check(tmp_path, stale).rcp().path == shipped_rcp_path(PRESETS["cpu"])
