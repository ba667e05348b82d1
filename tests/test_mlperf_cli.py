"""`rocm-validate mlperf-score`: table or JSON out, exit 0 / 1 by the RCP verdict, 2 for a wrong request."""

from __future__ import annotations

import json
import re

import pytest
from mllog_runs import spread, write_llama31_8b_run, write_set

from rocm_validate.cli import main as cli


def score(capsys, *args):
    status = cli.main(["mlperf-score", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_passing_set_prints_its_runs_and_verdict_and_exits_0(tmp_path, capsys):
    status, out, err = score(capsys, write_set(tmp_path, spread(2_450_000), batch=448), "--no-compliance")
    assert status == 0, err
    assert "result_9.txt  success" in out
    assert "RCP check: PASS (RCP found)" in out
    assert "normalization factor: 1.0\n" in out
    assert "score: 14.500 minutes (14.5: olympic mean 14.5 x 1.0)" in out


def test_json_output_has_the_documented_keys(tmp_path, capsys):
    status, out, _ = score(capsys, write_set(tmp_path, spread(2_350_000), batch=448), "--json", "--no-compliance")
    data = json.loads(out)
    assert status == 0
    assert {
        "benchmark",
        "global_batch_size",
        "runs",
        "olympic_mean_minutes",
        "rcp_pass",
        "rcp_message",
        "normalization_factor",
        "score_minutes",
    } <= set(data)
    assert data["normalization_factor"] > 1
    assert data["score_minutes"] == pytest.approx(data["olympic_mean_minutes"] * data["normalization_factor"])
    assert len(data["runs"]) == 10 and data["runs"][0]["to_converge"] == 2_300_000


def test_a_set_that_fails_the_rcp_check_exits_1_without_a_score(tmp_path, capsys):
    status, out, _ = score(capsys, write_set(tmp_path, spread(2_100_000), batch=448), "--no-compliance")
    assert status == 1
    assert "RCP check: FAIL (RCP found)" in out
    assert "normalization factor: - (none applies: the set fails MLPerf's RCP check)" in out
    assert "score: - minutes (no valid score: the set fails MLPerf's RCP check)" in out


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["{tmp}/missing"], "missing does not exist; pass the folder that holds the result_*.txt files"),
        (["{tmp}"], "holds no result_*.txt files; MLPerf names each run's log result_<n>.txt"),
        (["{tmp}", "--ruleset", "9.9.9"], "unknown MLPerf training ruleset '9.9.9'; mlperf-logging has 1.0.0"),
        (["{runs}", "--rcp", "{tmp}/none.json"], "none.json: file not found"),
    ],
    ids=["missing-folder", "no-result-files", "unknown-ruleset", "missing-rcp-file"],
)
def test_a_wrong_request_is_one_line_on_stderr_and_exit_2(tmp_path, capsys, arguments, expected):
    runs = write_set(tmp_path / "runs", spread(2_450_000, 3))
    status, _out, err = score(capsys, *(a.format(tmp=tmp_path, runs=runs) for a in arguments))
    assert status == 2
    assert expected in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def llama_runs(folder):
    """AMD's MI355X v5.1 set in form: 172,000 or 184,288 samples in about 96 minutes each."""
    return write_set(
        folder, [172_000] * 5 + [184_288] * 5, [95.9 + 0.37 * i for i in range(10)], writer=write_llama31_8b_run
    )


def test_llama31_8b_reads_in_samples_and_log_perplexity_with_its_score_in_full(tmp_path, capsys):
    status, out, err = score(capsys, llama_runs(tmp_path), "--ruleset", "5.1.0")
    assert status == 0, err
    header, first = out.splitlines()[2:4]
    assert re.split(r"\s{2,}", header)[3:5] == ["samples to converge", "log perplexity (lower is better)"]
    assert first.split()[:7] == ["result_0.txt", "success", "95.90", "172,000", "3.2900", "29.9", "ok"]
    assert "epochs" not in out
    assert "olympic mean: 97.565 minutes, 178,144 samples to converge" in out
    assert "normalization factor: 1.004011735824202 (RCP mean / olympic mean samples: faster than the reference" in out
    assert "score: 97.956 minutes (97.95640500568828: olympic mean 97.56500000000001 x 1.004011735824202)" in out


def test_json_names_the_metric_its_direction_and_the_unit(tmp_path, capsys):
    status, out, _ = score(capsys, llama_runs(tmp_path), "--ruleset", "5.1.0", "--json")
    data = json.loads(out)
    assert status == 0
    assert data["eval_metric"] == {"name": "log perplexity", "better": "lower"}
    assert (data["convergence_unit"], data["failure_category"]) == ("samples", None)
    assert data["normalization_factor"] == 1.004011735824202
    assert data["runs"][0]["samples_per_second"] == pytest.approx(172_000 / (95.9 * 60))


def test_bert_accuracy_is_masked_lm_accuracy_higher_is_better(tmp_path, capsys):
    _status, out, _ = score(capsys, write_set(tmp_path, spread(2_450_000), batch=448), "--no-compliance")
    assert "masked-LM accuracy (higher is better)" in out.splitlines()[2]
    assert out.splitlines()[3].rstrip().endswith("not checked")


def test_a_compliance_failure_prints_the_rule_that_failed_once_for_the_runs_it_concerns(tmp_path, capsys):
    runs = llama_runs(tmp_path)
    for index in (3, 4):
        write_llama31_8b_run(
            runs / f"result_{index}.txt", 172_000, 96.0 + index, hyperparameters={"opt_adamw_beta_2": 0.99}
        )
    _status, out, _ = score(capsys, runs, "--ruleset", "5.1.0")
    lines = out.splitlines()
    at = lines.index("MLPerf compliance checker:")
    assert lines[at + 1].startswith("  CHECK for 'opt_adamw_beta_2' failed in line ")
    assert lines[at + 1].endswith("(result_3.txt, result_4.txt)")
    assert "      failed test:  v['value'] == 0.95" in lines[at + 2 : at + 20]
    assert out.count("CHECK for 'opt_adamw_beta_2'") == 1


def test_runs_of_a_benchmark_with_its_rcps_in_another_ruleset_are_a_one_line_request_error(tmp_path, capsys):
    status, _out, err = score(capsys, llama_runs(tmp_path))
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("rocm-validate mlperf-score: error: the runs are MLPerf llama31_8b, ")
    assert err.rstrip().endswith(
        "(its rulesets 5.1.0, 6.0.0, 6.1.0 have them); score them under the ruleset they "
        "were run for, e.g. --ruleset=5.1.0"
    )


def test_a_folder_of_garbage_exits_1_with_json_that_holds_no_nan(tmp_path, capsys):
    for index in range(3):
        (tmp_path / f"result_{index}.txt").write_text(':::MLLOG {"time_ms": NaN, "key": "run_start"}\nnoise\n')
    status, out, err = score(capsys, tmp_path, "--json")
    assert status == 1, err
    assert "NaN" not in out and json.loads(out)["failure_category"] == "configuration"
