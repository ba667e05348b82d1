"""`rocm-validate mlperf-score`: table or JSON out, exit 0 / 1 by the RCP verdict, 2 for a wrong request."""

from __future__ import annotations

import json

import pytest
from mllog_runs import spread, write_set

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
    assert "normalization factor: 1.0000" in out


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
    assert "score: - minutes (no valid score)" in out


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
