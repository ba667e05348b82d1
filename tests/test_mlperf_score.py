"""Scoring MLPerf run sets: the verdict and normalization factor are mlperf-logging's own.

Run sets are built with mlperf-logging's mllog writer against its packaged ruleset 5.0.0 BERT
RCPs (pruned, as MLPerf's package checker uses them): BS 448 has RCP mean 2,414,421 samples and
accepts means down to 2,274,732; BS 4608 and 6144 bracket BS 5376 for interpolation.
"""

from __future__ import annotations

import json

import pytest
from mllog_runs import spread, write_run, write_set
from mlperf_logging.rcp_checker import rcp_checker
from mlperf_logging.result_summarizer import result_summarizer

from rocm_validate.convergence import mlperf
from rocm_validate.errors import MlperfError


def official(folder):
    """What MLPerf's package checker runs: pruned RCPs, epoch_num counting BERT's samples."""
    return rcp_checker.check_directory(str(folder), "training", "5.0.0", False, False, rcp_pass="pruned_rcps")


CASES = {
    "rcp-found-pass": dict(batch=448, samples=spread(2_450_000)),
    "pass-with-normalization": dict(batch=448, samples=spread(2_350_000)),
    "faster-than-allowed-fails": dict(batch=448, samples=spread(2_100_000)),
    "interpolation": dict(batch=5376, samples=spread(3_150_000)),
    "missing-rcp-above-largest-batch": dict(batch=32768, samples=spread(6_000_000)),
    "smaller-batch-than-any-rcp": dict(batch=128, samples=spread(2_600_000)),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_score_reproduces_the_official_verdict_and_factor(tmp_path, case):
    folder = write_set(tmp_path, CASES[case]["samples"], batch=CASES[case]["batch"])
    passed, message, factor = official(folder)
    score = mlperf.score_run_set(folder, compliance=False)
    assert (score.rcp.passed, score.rcp.message) == (passed, message)
    assert score.rcp.normalization_factor == pytest.approx(factor, rel=1e-12)


def test_normalization_multiplies_the_olympic_mean_into_the_score(tmp_path):
    folder = write_set(tmp_path, spread(2_350_000), minutes=[20, 11, 12, 13, 14, 15, 16, 17, 18, 5], batch=448)
    score = mlperf.score_run_set(folder, compliance=False)
    assert score.olympic_mean_minutes == pytest.approx((11 + 12 + 13 + 14 + 15 + 16 + 17 + 18) / 8)
    assert score.rcp.normalization_factor > 1
    assert score.score_minutes == pytest.approx(score.olympic_mean_minutes * score.rcp.normalization_factor)


def test_a_failing_set_has_no_score(tmp_path):
    score = mlperf.score_run_set(write_set(tmp_path, spread(2_100_000), batch=448), compliance=False)
    assert not score.rcp.passed
    assert score.score_minutes is None


@pytest.mark.parametrize(("minutes", "dropped"), [([10.0, 12.0, 11.0, 30.0, 9.0], 0), ([10.0, 12.0, 11.0, 9.0], 1)])
def test_olympic_mean_matches_mlperfs_result_summarizer(minutes, dropped):
    expected = result_summarizer._compute_olympic_average(list(minutes), dropped, 1)
    assert mlperf.olympic_mean(minutes, dropped) == expected


def test_olympic_mean_has_no_value_when_more_runs_failed_than_it_may_drop():
    assert mlperf.olympic_mean([10.0, 12.0, 11.0], dropped=2) is None


def test_one_run_without_run_stop_is_dropped_as_the_slowest(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    write_run(folder / "result_3.txt", 2_450_000, batch=448, status=None)
    score = mlperf.score_run_set(folder, compliance=False)
    assert (score.rcp.passed, score.rcp.message) == official(folder)[:2]
    assert score.rcp.passed
    assert any("result_3.txt: no run_stop line" in m for m in score.messages)


def test_two_unconverged_runs_are_insufficient_convergence(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    for index in (2, 7):
        write_run(folder / f"result_{index}.txt", 2_450_000, batch=448, status="aborted")
    score = mlperf.score_run_set(folder, compliance=False)
    assert (score.rcp.passed, score.rcp.message) == official(folder)[:2] == (False, "Insufficient convergence")
    assert score.olympic_mean_minutes is None
    assert "2 of 10 runs did not converge; olympic scoring drops at most 1" in score.messages


def test_a_malformed_line_names_the_file_and_line_and_counts_as_unconverged(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    broken = folder / "result_4.txt"
    lines = broken.read_text().splitlines()
    assert '"eval_accuracy"' in lines[7]
    lines[7] = lines[7][:-1]  # drop the closing brace
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(json.JSONDecodeError):
        official(folder)
    score = mlperf.score_run_set(folder, compliance=False)
    run = next(r for r in score.runs if r.file == "result_4.txt")
    assert run.status == "unreadable" and not run.converged
    assert run.message().startswith("result_4.txt: line 8: not JSON")
    assert "counts as a run that did not converge" in run.message()
    assert score.rcp.passed, "one unreadable run is dropped by olympic scoring, like one unconverged run"


def test_mixed_batch_sizes_fail_the_set_naming_the_files(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    write_run(folder / "result_9.txt", 2_450_000, batch=512)
    with pytest.raises(KeyError):
        official(folder)
    score = mlperf.score_run_set(folder, compliance=False)
    assert not score.rcp.passed
    assert "global_batch_size differs between files: 448 in result_0.txt" in score.rcp.message
    assert "512 in result_9.txt" in score.rcp.message
    assert score.score_minutes is None


def test_mixed_benchmarks_fail_the_set_naming_the_files(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    write_run(folder / "result_0.txt", 2_450_000, batch=448, benchmark="resnet")
    score = mlperf.score_run_set(folder, compliance=False)
    assert not score.rcp.passed
    assert (
        "submission_benchmark differs between files: 'resnet' in result_0.txt; 'bert' in result_1.txt"
        in score.rcp.message
    )


def test_fewer_than_three_runs_cannot_be_olympic_scored(tmp_path):
    score = mlperf.score_run_set(write_set(tmp_path, [2_450_000, 2_460_000], batch=448), compliance=False)
    assert not score.rcp.passed
    assert "olympic scoring needs at least 3 runs, found 2" in score.rcp.message
    assert "2 runs; MLPerf bert needs 10, and the RCP statistics assume 10" in score.messages


def test_mini_bert_runs_are_not_scored_against_mlperf_bert_rcps(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448, extra=[(mlperf.ROCM_VALIDATE_KEY, "mini-bert")])
    score = mlperf.score_run_set(folder, compliance=False)
    assert not score.rcp.passed
    assert "rocm-validate's mini-bert, not MLPerf bert" in score.rcp.message


def test_a_custom_rcp_file_is_what_the_checker_compares_against(tmp_path):
    rcp = tmp_path / "rcps.json"
    record = {"Benchmark": "bert", "BS": 64, "Hyperparams": {}, "Epochs to converge": spread(5_000, 20, 100)}
    rcp.write_text(json.dumps({"bert_ref_64": record}))
    folder = write_set(tmp_path / "runs", spread(5_000, 10, 100), batch=64)
    score = mlperf.score_run_set(folder, rcp_path=rcp, compliance=False)
    with rcp.open() as handle:
        expected = rcp_checker.check_directory(
            str(folder), "training", "5.0.0", False, False, rcp_file=handle, rcp_pass="pruned_rcps"
        )
    assert (score.rcp.passed, score.rcp.message, score.rcp.normalization_factor) == expected
    assert score.rcp.record["mean"] == pytest.approx(4_950)  # olympic mean of 4,000 ... 5,900


def test_an_rcp_file_for_another_benchmark_fails_the_set(tmp_path):
    rcp = tmp_path / "rcps.json"
    record = {"Benchmark": "resnet", "BS": 64, "Hyperparams": {}, "Epochs to converge": [40, 41, 42]}
    rcp.write_text(json.dumps({"resnet_ref_64": record}))
    score = mlperf.score_run_set(write_set(tmp_path / "runs", spread(5_000), batch=64), rcp_path=rcp, compliance=False)
    assert not score.rcp.passed
    assert "holds RCPs for resnet, not bert" in score.rcp.message


def test_a_malformed_rcp_file_is_a_request_error_naming_it(tmp_path):
    rcp = tmp_path / "rcps.json"
    rcp.write_text(json.dumps({"bert_ref_64": {"Benchmark": "bert", "BS": 64}}))
    with pytest.raises(MlperfError, match=r"rcps\.json does not match the mlperf-logging RCP schema"):
        mlperf.score_run_set(write_set(tmp_path / "runs", spread(5_000), batch=64), rcp_path=rcp)


def test_compliance_messages_come_from_mlperfs_compliance_checker(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000, 3), batch=448)
    score = mlperf.score_run_set(folder)
    assert "Required EXACTLY_ONE occurrence of 'eval_samples' but found 0" in score.runs[0].compliance


def test_runs_report_minutes_samples_accuracy_and_throughput(tmp_path):
    folder = write_set(tmp_path, [2_400_000, 2_450_000, 2_500_000], minutes=[10.0, 20.0, 40.0], batch=448)
    run = mlperf.score_run_set(folder, compliance=False).runs[1]
    assert (run.status, run.minutes, run.to_converge, run.convergence_unit) == ("success", 20.0, 2_450_000, "samples")
    assert run.last_eval_accuracy == pytest.approx(0.721)
    assert run.samples_per_second == pytest.approx(2_450_000 / 1200)


@pytest.mark.parametrize(("train_samples", "expected"), [(False, 2_450_000), (True, 2_500_000)])
def test_bert_samples_come_from_epoch_num_unless_train_samples_is_asked_for(tmp_path, train_samples, expected):
    folder = write_set(tmp_path, [2_450_000] * 3, batch=448, train_samples=2_500_000)
    score = mlperf.score_run_set(folder, use_train_samples=train_samples, compliance=False)
    assert {run.to_converge for run in score.runs} == {expected}


def test_parse_errors_of_every_kind_are_reported_by_line():
    text = "\n".join(
        [
            "noise before :::MLLOG {not json",
            ':::MLLOG ["a list"]',
            ':::MLLOG {"time_ms": 1, "key": "x", "value": 1}',
            ':::MLLOG {"time_ms": 1, "key": "run_stop", "value": null, "metadata": {}}',
            ':::MLLOG {"time_ms": 2, "key": "run_start", "value": null, "metadata": {}}',
            "an ordinary log line",
        ]
    )
    parsed = mlperf.parse_mllog_text(text)
    assert [line.key for line in parsed.lines] == ["run_start"]
    assert [p.split(":")[0] for p in parsed.problems] == ["line 1", "line 2", "line 3", "line 4"]
    assert "lacks metadata" in parsed.problems[2]
    assert "run_stop has no status" in parsed.problems[3]


def test_an_unreadable_file_says_so_once(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    path = folder / "result_1.txt"
    path.write_text(path.read_text() + ':::MLLOG {"key": "x", "value": 1, "time_ms": \n')
    message = next(r for r in mlperf.score_run_set(folder, compliance=False).runs if r.file == "result_1.txt").message()
    assert message.count("did not converge") == 1 and "not accepted" in message


def test_one_run_is_counted_in_the_singular(tmp_path):
    write_run(tmp_path / "result_0.txt", 2_450_000, batch=448)
    score = mlperf.score_run_set(tmp_path, compliance=False)
    assert "olympic scoring needs at least 3 runs, found 1 run" in score.rcp.message
    assert "1 runs" not in " ".join([score.rcp.message, *score.messages])


def test_runs_without_a_benchmark_line_are_not_sent_to_the_compliance_checker(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448, benchmark=None)
    run = mlperf.score_run_set(folder).runs[0]
    assert run.compliance == (
        "not checked: the compliance rules are chosen by the submission_benchmark line, which names no benchmark here",
    )
