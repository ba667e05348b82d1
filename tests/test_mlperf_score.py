"""Scoring MLPerf run sets: the verdict and normalization factor are mlperf-logging's own.

Run sets are built with mlperf-logging's mllog writer against its packaged ruleset 5.0.0 BERT
RCPs (pruned, as MLPerf's package checker uses them): BS 448 has RCP mean 2,414,421 samples and
accepts means down to 2,274,732; BS 4608 and 6144 bracket BS 5376 for interpolation.
Llama 3.1 8B sets are AMD's v5.1 submission logs in form and counts: at BS 32, five runs at
172,000 and five at 184,288 samples give the olympic mean 178,144 and the factor 1.004011735824202
that AMD's reproduction guide shows from the RCP checker (RCP mean 178,858.67).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mllog_runs import spread, write_llama31_8b_run, write_run, write_set
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


def test_mixed_benchmarks_are_refused_naming_the_files_of_each(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    write_run(folder / "result_0.txt", 2_450_000, batch=448, benchmark="resnet")
    with pytest.raises(MlperfError, match=r"holds runs of 2 benchmarks \(resnet: result_0.txt; bert: result_1.txt"):
        mlperf.score_run_set(folder, compliance=False)


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


# --- Llama 3.1 8B: a benchmark whose epoch_num already counts samples ------------------------

AMD_MI355X_SAMPLES = [172_000] * 5 + [184_288] * 5
AMD_MI355X_MINUTES = [95.9 + 0.37 * i for i in range(10)]


@pytest.fixture
def llama_runs(tmp_path):
    return write_set(tmp_path / "llama31_8b", AMD_MI355X_SAMPLES, AMD_MI355X_MINUTES, writer=write_llama31_8b_run)


def test_llama31_8b_logs_pass_mlperfs_closed_compliance_rules(llama_runs):
    assert mlperf.compliance_messages(llama_runs / "result_0.txt", "5.1.0") == ()


def test_llama31_8b_throughput_is_samples_per_second_not_epochs_times_samples(llama_runs):
    run = mlperf.score_run_set(llama_runs, "5.1.0", compliance=False).runs[0]
    assert (run.convergence_unit, run.to_converge) == ("samples", 172_000)
    assert run.samples_per_second == pytest.approx(172_000 / (95.9 * 60))  # about 30, as the run did
    assert run.last_eval_accuracy == pytest.approx(3.29)


def test_llama31_8b_score_and_factor_are_result_summarizers_to_the_last_digit(llama_runs, tmp_path):
    score = mlperf.score_run_set(llama_runs, "5.1.0")
    official_copy = tmp_path / "official" / "llama31_8b"
    shutil.copytree(llama_runs, official_copy)
    # the package checker sets the scaling, then the summarizer scores the folder
    rcp_checker.check_directory(
        str(official_copy), "training", "5.1.0", False, False, rcp_pass="pruned_rcps", set_scaling=True
    )
    expected, _power, factor = result_summarizer._compute_strong_score_standalone(
        "llama31_8b", "MI355X", False, str(official_copy), "training", "5.1.0"
    )
    assert (score.rcp.passed, score.rcp.message) == (True, "RCP found")
    assert score.rcp.normalization_factor == factor == 1.004011735824202
    assert score.olympic_mean_to_converge == 178_144
    assert score.score_minutes == expected


def test_llama31_8b_under_a_ruleset_without_its_rcps_is_a_request_error_naming_the_one_with_them(llama_runs):
    with pytest.raises(MlperfError) as raised:
        mlperf.score_run_set(llama_runs)  # the default ruleset, 5.0.0, predates llama31_8b
    message = str(raised.value)
    assert "training 5.0.0 ruleset has no llama31_8b RCPs (its rulesets 5.1.0, " in message
    assert message.endswith("e.g. --ruleset=5.1.0")


def test_bert_under_a_ruleset_after_its_last_rcps_is_sent_back_to_the_latest_one(tmp_path):
    with pytest.raises(MlperfError, match=r"e\.g\. --ruleset=5\.1\.0$"):
        mlperf.score_run_set(write_set(tmp_path, spread(2_450_000, 3), batch=448), "6.1.0")


def test_an_rcp_file_for_the_ruleset_needs_no_packaged_rcps(llama_runs, tmp_path):
    rcp = tmp_path / "rcps.json"
    record = {"Benchmark": "llama31_8b", "BS": 32, "Hyperparams": {}, "Epochs to converge": spread(178_000, 20, 1000)}
    rcp.write_text(json.dumps({"llama31_8b_ref_32": record}))
    assert mlperf.score_run_set(llama_runs, rcp_path=rcp, compliance=False).rcp.message == "RCP found"


def test_an_rcp_file_without_the_key_the_checker_reads_is_a_request_error(llama_runs, tmp_path):
    rcp = tmp_path / "rcps.json"
    record = {"Benchmark": "llama31_8b", "BS": 32, "Hyperparams": {}, "samples to converge": [178_000] * 5}
    rcp.write_text(json.dumps({"llama31_8b_ref_32": record}))
    with pytest.raises(MlperfError, match="has no 'Epochs to converge', which is where MLPerf's RCP checker reads"):
        mlperf.score_run_set(llama_runs, rcp_path=rcp)


def test_a_compliance_complaint_keeps_the_rule_that_failed(llama_runs):
    write_llama31_8b_run(llama_runs / "result_2.txt", 172_000, hyperparameters={"opt_adamw_beta_2": 0.99})
    run = mlperf.score_run_set(llama_runs, "5.1.0").runs[2]
    (complaint,) = run.compliance
    assert complaint.startswith("CHECK for 'opt_adamw_beta_2' failed in line ")
    assert "failed test:  v['value'] == 0.95" in complaint and '"value": 0.99' in complaint


def test_a_run_that_fails_compliance_is_named_as_one_the_result_summarizer_would_drop(llama_runs):
    write_llama31_8b_run(llama_runs / "result_2.txt", 172_000, hyperparameters={"opt_adamw_beta_2": 0.99})
    messages = mlperf.score_run_set(llama_runs, "5.1.0").messages
    assert any(
        m.startswith("result_2.txt fails MLPerf's compliance checker: MLPerf's result summarizer") for m in messages
    )


# --- throughput from what each benchmark counts -------------------------------------------------


def _log(*events):
    return mlperf.parse_mllog_text(
        "\n".join(
            ":::MLLOG " + json.dumps({"time_ms": t, "key": k, "value": v, "metadata": m}) for t, k, v, m in events
        )
    )


@pytest.mark.parametrize(
    ("name", "ruleset", "extra", "metadata", "expected"),
    [
        ("resnet", "4.0.0", [("train_samples", 1_281_167)], {"epoch_num": 34}, 34 * 1_281_167 / 600),
        ("gpt3", "4.1.0", [("max_sequence_length", 2048)], {"epoch_num": 1_157_627_904}, 1_157_627_904 / 2048 / 600),
        ("stable_diffusion", "3.1.0", [], {"step_num": 5000, "metric": "FID"}, 5000 * 512 / 600),
        ("llama2_70b_lora", "5.0.0", [("train_samples", 3901)], {"samples_count": 3072}, 3072 / 600),
    ],
    ids=["resnet-epochs", "gpt3-tokens", "sd-steps", "llama2-lora-samples"],
)
def test_throughput_counts_samples_whatever_the_benchmark_counts(name, ruleset, extra, metadata, expected):
    parsed = _log(
        (0, "submission_benchmark", name, {}),
        (0, "global_batch_size", 512, {}),
        *((0, key, value, {}) for key, value in extra),
        (0, "run_start", None, {}),
        (600_000, "eval_accuracy", 0.5, metadata),
        (600_000, "run_stop", None, {"status": "success"}),
    )
    run = mlperf.run_facts(Path("result_0.txt"), parsed, (0, 1, 512, name), [], ruleset=ruleset)
    assert run.samples_per_second == pytest.approx(expected)


def test_the_accuracy_of_stable_diffusion_is_its_last_fid_not_its_last_clip():
    parsed = _log(
        (0, "submission_benchmark", "stable_diffusion", {}),
        (1, "eval_accuracy", 70.0, {"samples_count": 512, "metric": "FID"}),
        (1, "eval_accuracy", 0.2, {"samples_count": 512, "metric": "CLIP"}),
    )
    assert mlperf.run_facts(Path("result_0.txt"), parsed, None, []).last_eval_accuracy == 70.0


# --- what is wrong, and whose fault: inputs (configuration) or convergence (numerics) --------


def test_a_file_with_no_mllog_line_is_not_an_mlperf_log_and_the_inputs_are_at_fault(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    (folder / "result_5.txt").write_bytes(b"\x00\xff garbage\n" * 20)
    score = mlperf.score_run_set(folder, compliance=False)
    run = score.runs[5]
    assert run.message().startswith("result_5.txt: holds no ':::MLLOG' line: not an MLPerf result log")
    assert run.failure_category == "configuration"
    # as in MLPerf's checker, a file that names no benchmark and batch size spoils the set
    assert "no submission_benchmark line in result_5.txt" in score.rcp.message
    assert score.failure_category == "configuration"


def test_a_folder_of_garbage_fails_the_set_as_configuration(tmp_path):
    for index in range(3):
        (tmp_path / f"result_{index}.txt").write_text("Traceback (most recent call last):\n  oops\n")
    score = mlperf.score_run_set(tmp_path)
    assert not score.rcp.passed and score.rcp.blocked
    assert "no submission_benchmark line in result_0.txt, result_1.txt, result_2.txt" in score.rcp.message
    assert score.failure_category == "configuration"
    assert {run.failure_category for run in score.runs} == {"configuration"}


@pytest.mark.parametrize(
    ("setup", "category"),
    [
        ("faster-than-allowed", "numerics"),
        ("two-aborted", "numerics"),
        ("two-unreadable", "configuration"),
        ("two-incomplete", "configuration"),
        ("batch-without-rcp", "configuration"),
    ],
)
def test_a_failing_set_is_numerics_only_when_the_runs_converged_wrongly(tmp_path, setup, category):
    batch = 32768 if setup == "batch-without-rcp" else 448
    folder = write_set(tmp_path, spread(2_100_000 if setup == "faster-than-allowed" else 2_450_000), batch=batch)
    for index in (2, 7):
        if setup == "two-aborted":
            write_run(folder / f"result_{index}.txt", 2_450_000, batch=448, status="aborted")
        elif setup == "two-unreadable":
            (folder / f"result_{index}.txt").write_text(":::MLLOG {oops\n")
        elif setup == "two-incomplete":
            write_run(folder / f"result_{index}.txt", 2_450_000, batch=448, status=None)
    score = mlperf.score_run_set(folder, compliance=False)
    assert not score.rcp.passed
    assert score.failure_category == category
    assert score.to_dict()["failure_category"] == category


def test_a_batch_size_without_rcps_names_the_batch_sizes_that_have_them(tmp_path):
    score = mlperf.score_run_set(write_set(tmp_path, spread(6_000_000), batch=32768), compliance=False)
    assert score.rcp.message == "Missing RCP, please submit RCP with BS = 32768"
    hint = next(m for m in score.messages if m.startswith("the RCPs of bert in mlperf-logging training_5.0.0"))
    assert "cover global batch sizes 256, " in hint and "not 32768: run at a batch size they cover" in hint


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"time_ms": NaN, "key": "run_start", "value": null, "metadata": {}}', "time_ms must be a finite number"),
        ('{"time_ms": Infinity, "key": "run_start", "value": null, "metadata": {}}', "time_ms must be a finite number"),
        ('{"time_ms": "1", "key": "run_start", "value": null, "metadata": {}}', "time_ms must be a finite number"),
    ],
)
def test_timestamps_that_are_not_finite_numbers_are_refused_by_line(line, problem):
    assert problem in mlperf.parse_mllog_text(":::MLLOG " + line).problems[0]


def test_a_count_to_converge_that_is_not_a_number_counts_as_not_converged(tmp_path):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    path = folder / "result_4.txt"
    assert '"epoch_num": 2440000' in path.read_text()
    path.write_text(path.read_text().replace('"epoch_num": 2440000', '"epoch_num": NaN'))
    run = mlperf.score_run_set(folder, compliance=False).runs[4]
    assert "its count to converge is nan, not a finite number" in run.message()
    assert run.failure_category == "configuration"


@pytest.mark.parametrize("batch", ["448", 0, 4.5, True])
def test_a_batch_size_that_is_not_a_whole_number_fails_the_set_as_configuration(tmp_path, batch):
    score = mlperf.score_run_set(write_set(tmp_path, spread(2_450_000, 3), batch=batch), compliance=False)
    assert f"global_batch_size must be a whole number of samples, found {batch!r}" in score.rcp.message
    assert score.failure_category == "configuration"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda text: text.replace('"key": "run_start"', '"key": "run_begun"'), "run_stop without a run_start"),
        (lambda text: text.replace('"time_ms": 1700000602000, ', '"time_ms": 1600000000000, '), "precedes run_start"),
    ],
    ids=["no-run-start", "stop-before-start"],
)
def test_a_run_without_a_time_to_train_is_not_accepted(tmp_path, edit, problem):
    folder = write_set(tmp_path, spread(2_450_000), batch=448)
    path = folder / "result_0.txt"
    edited = edit(path.read_text())
    assert edited != path.read_text()
    path.write_text(edited)
    score = mlperf.score_run_set(folder, compliance=False)
    run = score.runs[0]
    assert problem in run.message() and run.failure_category == "configuration"
    assert score.olympic_mean_minutes == mlperf.olympic_mean([r.minutes for r in score.runs[1:]], dropped=1)
