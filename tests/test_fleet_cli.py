"""`rocm-validate fleet`: the files it writes, its exit status, and one clear line for bad input
(an empty folder, a path that does not exist, an output it cannot write), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fleet_reports as fr
import pytest

from rocm_validate.cli.fleet import expected_hosts
from rocm_validate.cli.main import main
from rocm_validate.fleet.output import FLEET_SCHEMA
from rocm_validate.results import jsonfile


@pytest.fixture(scope="module")
def fleet_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four synthetic H100 nodes from a real CPU report, node-2 failing a check."""
    template = fr.load(fr.real_reports(tmp_path_factory)[0])
    check = fr.passed_checks(template)[0]
    reports = fr.synthetic_fleet(template, 4, {2: lambda r: fr.failing(r, check)})
    return fr.write_fleet(tmp_path_factory.mktemp("fleet") / "reports", reports)


def test_it_writes_the_json_markdown_junit_and_drain_list_and_fails_when_a_node_is_to_be_drained(
    fleet_folder, tmp_path, capsys
):
    assert main(["fleet", str(fleet_folder), "--out", str(tmp_path / "out")]) == 1
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["drain.txt", "fleet-junit.xml", "fleet.json", "fleet.md"]
    assert (tmp_path / "out" / "drain.txt").read_text() == "node-2\n"
    assert jsonfile.schema_errors(json.loads((tmp_path / "out" / "fleet.json").read_text()), FLEET_SCHEMA) == []
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "rocm-validate fleet: FAILED (1 drain; 4 nodes)",
        "rocm-validate fleet verdict: drain: node-2 (numerics)",
    ]


def test_a_healthy_fleet_exits_zero_and_one_output_can_go_elsewhere(fleet_folder, tmp_path):
    healthy = [p for p in fleet_folder.glob("*.json") if p.stem != "node-2"]
    summary = tmp_path / "summary.md"
    assert main(["fleet", *map(str, healthy), "--markdown", str(summary)]) == 0
    assert summary.read_text().startswith("## rocm-validate fleet: passed (3 nodes)")


def test_the_command_runs_as_a_program_and_prints_no_traceback_for_an_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.cli.main", "fleet", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"rocm-validate fleet: error: no reports (*.json) in {tmp_path / 'empty'}; each node writes one with "
        "pytest --rocm-report=<folder>/<host>.json"
    ]


def test_a_path_that_does_not_exist_is_one_line(tmp_path, capsys):
    assert main(["fleet", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rocm-validate fleet: error: {tmp_path / 'nowhere'}: no such file or folder; give node reports or folders "
        "of <host>.json reports"
    )


def test_an_output_it_cannot_write_is_refused_before_any_report_is_read(fleet_folder, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["fleet", str(fleet_folder), "--out", str(blocker / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"rocm-validate fleet: error: cannot write {blocker / 'out' / 'fleet.json'}: {blocker / 'out'}"
    )
    assert len(err.splitlines()) == 1


def test_an_output_path_that_is_a_folder_is_refused(fleet_folder, tmp_path, capsys):
    assert main(["fleet", str(fleet_folder), "--json", str(tmp_path)]) == 2
    assert "is a folder; expected a file path" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="needs a user who cannot write a read-only folder, found root")
def test_a_read_only_output_folder_is_refused(fleet_folder, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["fleet", str(fleet_folder), "--out", str(locked)]) == 2
    assert "a file cannot be created in" in capsys.readouterr().err


def test_expected_hosts_come_from_a_file_a_folder_or_a_list(tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("gpu-001\n# drained last week\ngpu-002  # rack 4\n\n")
    started = tmp_path / "started"
    started.mkdir()
    for host in ("k8s-b", "k8s-a"):
        (started / host).touch()
    assert expected_hosts(str(hosts)) == ["gpu-001", "gpu-002"]
    assert expected_hosts(str(started)) == ["k8s-a", "k8s-b"]
    assert expected_hosts("a, b,c") == ["a", "b", "c"]
    assert expected_hosts(None) == []


def test_a_missing_expect_file_is_one_line(fleet_folder, tmp_path, capsys):
    assert main(["fleet", str(fleet_folder), "--expect", str(tmp_path / "hosts.txt")]) == 2
    assert "no such file or folder; give a hosts file, a folder or host1,host2" in capsys.readouterr().err


def test_a_fleet_report_written_beside_the_reports_is_not_read_back_as_a_node(fleet_folder, tmp_path, capsys):
    folder = tmp_path / "reports"
    folder.mkdir()
    for path in fleet_folder.glob("*.json"):
        (folder / path.name).write_text(path.read_text())
    assert main(["fleet", str(folder), "--out", str(folder / "fleet")]) == 1
    assert main(["fleet", str(folder), "--out", str(folder / "fleet")]) == 1
    assert capsys.readouterr().out.splitlines()[-2] == "rocm-validate fleet verdict: drain: node-2 (numerics)"


def test_a_fleet_json_that_cannot_be_written_at_the_end_is_one_line(fleet_folder, tmp_path, capsys, monkeypatch):
    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    assert main(["fleet", str(fleet_folder), "--json", str(tmp_path / "fleet.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"rocm-validate fleet: error: cannot write the fleet report: cannot write {tmp_path / 'fleet.json'}: "
        "No space left on device; it is unchanged"
    )
    assert list(tmp_path.iterdir()) == []
