"""Bad fleets replayed (issue 39): `rocm-validate fleet` on node reports that real runs of the
plugin wrote on this CPU (a run ended by SIGTERM, one that skipped every test, one stopped by a
usage error, ...), and on those reports bent the way a broken node or a hostile file bends them.
Each test is one case: a node that did not pass never reads as passed, the fleet never writes over
a node's report, and nothing a report holds splits a line of the drain list, the markdown or JUnit.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import fake_devices
import fleet_reports as fr
import pytest
from test_bad_inputs import NOISY, PASSING, SKIPPING, _signalled
from test_perf_plugin import CONFTEST as PERF_CONFTEST
from test_perf_plugin import KEY as PERF_KEY
from test_perf_plugin import TWO_METRICS

from rocm_validate.cli.main import main

INTERRUPTIONS = ("SIGTERM", "SIGINT", "exit", "finalizer")


def _node_run(project: Path, host: str, *args: str) -> Path:
    """`pytest --rocm-report=<project>/<host>.json ARGS` in `project`, as the node `host` runs it."""
    report = project / f"{host}.json"
    environment = {**os.environ, "ROCM_VALIDATE_HOST": host, "PYTHONPATH": str(fr.ROOT)}
    environment.pop("PYTEST_XDIST_WORKER", None)
    environment.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", *args]
    done = subprocess.run(
        [*command, f"--rocm-report={report}"], cwd=project, env=environment, capture_output=True, text=True, timeout=120
    )
    assert report.is_file(), f"no report from {command}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return report


def _project(folder: Path, conftest: str, tests: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "conftest.py").write_text(conftest)
    (folder / "test_node.py").write_text(tests)
    (folder / "baselines").mkdir()
    return folder


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real node reports of this CPU, each from its own run of the plugin, by the case it shows."""
    base = tmp_path_factory.mktemp("node-runs")
    cpu = fake_devices.discovery_conftest()
    found = {"passed": _node_run(_project(base / "passed", cpu, PASSING), "node-ok")}
    for how in INTERRUPTIONS:
        found[how] = _node_run(_project(base / how, cpu, _signalled(how)), f"node-{how.lower()}")
    found["skipped"] = _node_run(_project(base / "skipped", cpu, SKIPPING), "node-skipped")
    found["no tests"] = _node_run(_project(base / "none", cpu, PASSING), "node-none", "-k", "no_such_test")
    perf = _project(base / "perf", PERF_CONFTEST, TWO_METRICS)
    found["metrics"] = _node_run(perf, "node-perf", "--rocm-suite=perf", "--rocm-baselines=baselines")
    floors = perf / "floors"
    floors.mkdir()
    row = {
        "value": 1.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": None,
        "provenance": {"date": "2026-11-23"},
    }
    wrong = {"gemm.bf16.8192x8192x8193": row}
    (floors / f"{PERF_KEY}.json").write_text(
        json.dumps({"schema": "rocm-validate/baselines/1", "device_key": PERF_KEY, "metrics": wrong})
    )
    found["usage error"] = _node_run(
        perf, "node-usage", "--rocm-suite=perf", "--rocm-baselines=baselines", "--rocm-floors=floors"
    )
    noisy = _project(base / "noisy", PERF_CONFTEST, NOISY)
    found["strict"] = _node_run(
        noisy, "node-strict", "--rocm-suite=perf", "--rocm-baselines=baselines", "--update-baselines", "--rocm-strict"
    )
    return found


def _fleet(folder: Path, reports: dict[str, fr.Report]) -> Path:
    return fr.write_fleet(folder, reports)


def _copies(path: Path, *hosts: str) -> dict[str, fr.Report]:
    return {host: fr.with_host(fr.load(path), host) for host in hosts}


def _merge(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    """`rocm-validate fleet ARGS`: its exit status, the lines it printed and its error line."""
    status = main(["fleet", *args])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.strip()


def _outputs(out: Path) -> tuple[dict, str, ElementTree.Element, list[str]]:
    """fleet.json, fleet.md, fleet-junit.xml (parsed: it must be well-formed XML) and drain.txt's lines."""
    return (
        json.loads((out / "fleet.json").read_text()),
        (out / "fleet.md").read_text(),
        ElementTree.parse(out / "fleet-junit.xml").getroot(),
        (out / "drain.txt").read_text().splitlines(),
    )


def _junit_failures(root: ElementTree.Element) -> dict[str, str]:
    """Each test case that failed: its node and the failure's message."""
    return {
        case.get("name", ""): failure.get("message", "")
        for case in root.iter("testcase")
        if (failure := case.find("failure")) is not None
    }


# --- 1. A node that did not pass is never counted as passed ------------------------------------


def test_the_real_node_runs_ended_as_each_case_says(nodes: dict[str, Path]) -> None:
    statuses = {case: fr.load(path)["exit_status"] for case, path in nodes.items()}
    assert statuses == {
        "passed": 0,
        **dict.fromkeys(INTERRUPTIONS, 2),
        "skipped": 0,
        "no tests": 5,
        "metrics": 0,
        "usage error": 4,
        "strict": 1,
    }


def test_passing_nodes_merge_to_a_pass(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a", "node-b"))
    status, lines, _ = _merge(capsys, str(folder))
    assert status == 0 and lines[0] == "rocm-validate fleet: passed (2 nodes)"


def test_nodes_whose_runs_were_interrupted_are_rerun_in_every_output_never_passed(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", {f"node-{how.lower()}": fr.load(nodes[how]) for how in INTERRUPTIONS})
    status, lines, _ = _merge(capsys, str(folder), "--out", str(tmp_path / "out"))
    assert status == 1
    assert lines[1] == (
        "rocm-validate fleet verdict: rerun: node-exit, node-finalizer, node-sigint, node-sigterm (interrupted)"
    )
    fleet, markdown, junit, drain = _outputs(tmp_path / "out")
    assert {n["name"]: (n["action"], n["reasons"]) for n in fleet["nodes"]} == {
        f"node-{how.lower()}": ("rerun", ["interrupted"]) for how in INTERRUPTIONS
    }
    assert "### Rerun (4)" in markdown and "- nodes: 4 rerun" in markdown
    assert set(_junit_failures(junit).values()) == {"rerun: interrupted"} and len(_junit_failures(junit)) == 4
    assert drain == []


def test_one_interrupted_node_among_passing_ones_fails_the_fleet(nodes, tmp_path, capsys) -> None:
    reports = {**_copies(nodes["passed"], "node-a", "node-b", "node-c"), "node-sigterm": fr.load(nodes["SIGTERM"])}
    status, lines, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)))
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: rerun: node-sigterm (interrupted)"


@pytest.mark.parametrize(
    ("case", "reason"),
    [("skipped", "nothing validated"), ("no tests", "nothing validated"), ("usage error", "usage error")],
)
def test_nodes_that_validated_nothing_or_stopped_on_a_usage_error_are_not_judged_passed(
    nodes, tmp_path, capsys, case: str, reason: str
) -> None:
    reports = {**_copies(nodes["passed"], "node-a"), **_copies(nodes[case], "node-x", "node-y")}
    status, lines, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)), "--out", str(tmp_path / "out"))
    assert status == 1
    assert lines[1].startswith(f"rocm-validate fleet verdict: not judged: node-x, node-y ({reason}): their own runs")
    fleet, markdown, junit, drain = _outputs(tmp_path / "out")
    actions = {n["name"]: n["action"] for n in fleet["nodes"]}
    assert actions == {"node-a": "pass", "node-x": "undecided", "node-y": "undecided"}
    assert f"| node-x | {reason} |" in markdown
    assert sorted(_junit_failures(junit)) == ["node-x", "node-y"] and drain == []


def test_a_node_whose_own_run_failed_with_no_failed_check_is_not_passed(nodes, tmp_path, capsys) -> None:
    """--update-baselines --rocm-strict that recorded nothing: exit 1, every test passed."""
    reports = {**_copies(nodes["metrics"], "node-a"), **_copies(nodes["strict"], "node-x")}
    status, lines, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)))
    assert status == 1 and "node-x (failed its own run)" in lines[1]


def test_every_nodes_decision_and_categories_are_in_the_json_and_junit(nodes, tmp_path, capsys) -> None:
    """A check failing on every node is the image's: each node is a failure in JUnit with its category."""
    template = fr.load(nodes["metrics"])
    check = fr.passed_checks(template)[0]
    reports = {
        host: fr.failing(report, check) for host, report in _copies(nodes["metrics"], "node-a", "node-b").items()
    }
    status, _, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)), "--out", str(tmp_path / "out"))
    fleet, markdown, junit, _ = _outputs(tmp_path / "out")
    assert status == 1
    assert [(n["action"], n["reasons"], n["categories"]) for n in fleet["nodes"]] == [
        ("image", ["numerics"], {"numerics": 1})
    ] * 2
    assert _junit_failures(junit) == {"node-a": "image: numerics", "node-b": "image: numerics"}
    assert "| node-a | numerics |" in markdown


# --- 2. Outputs never overwrite an input --------------------------------------------------------


@pytest.mark.parametrize("option", ["--json", "--markdown", "--junit", "--drain-list"])
def test_an_output_naming_a_node_report_is_refused_and_the_report_is_left_as_it_was(
    nodes, tmp_path, capsys, option: str
) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["SIGTERM"], "node-a", "node-b"))
    target = folder / "node-a.json"
    before = target.read_bytes()
    for inputs in ([str(folder)], [str(target), str(folder / "node-b.json")]):
        status, lines, error = _merge(capsys, *inputs, option, str(target))
        assert status == 2 and lines == []
        assert error.startswith(f"rocm-validate fleet: error: {option} {target} is ")
    assert target.read_bytes() == before


def test_out_set_to_the_reports_folder_is_refused_so_a_node_named_fleet_keeps_its_report(
    nodes, tmp_path, capsys
) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "fleet", "node-b"))
    before = (folder / "fleet.json").read_bytes()
    status, _, error = _merge(capsys, str(folder), "--out", str(folder))
    assert status == 2
    assert error == (
        f"rocm-validate fleet: error: --json {folder / 'fleet.json'} is {folder / 'fleet.json'}, a node report this "
        "merge reads; write the fleet report beside the node reports, e.g. --out <reports folder>/fleet"
    )
    assert (folder / "fleet.json").read_bytes() == before and sorted(p.name for p in folder.iterdir()) == [
        "fleet.json",
        "node-b.json",
    ]
    status, lines, _ = _merge(capsys, str(folder), "--out", str(folder / "fleet"))
    assert status == 0 and lines[0] == "rocm-validate fleet: passed (2 nodes)"


def test_an_output_among_the_reports_through_a_link_is_refused(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a"))
    (tmp_path / "alias").symlink_to(folder)
    status, _, error = _merge(capsys, str(folder), "--markdown", str(tmp_path / "alias" / "fleet.md"))
    assert status == 2 and f"is in {folder}, the folder of node reports this merge reads" in error


# --- 3. Non-positive figures are invalid data ----------------------------------------------------


@pytest.mark.parametrize("factor", [0.0, -1.0])
def test_a_node_whose_every_figure_is_zero_or_negative_is_named_never_passed(
    nodes, tmp_path, capsys, factor: float
) -> None:
    reports = _copies(nodes["metrics"], "node-a", "node-b", "node-c")
    reports["node-c"] = fr.scaled(reports["node-c"], "", factor)
    status, lines, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)), "--out", str(tmp_path / "out"))
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-c (no usable report)"
    fleet, _, _, drain = _outputs(tmp_path / "out")
    (node,) = [n for n in fleet["nodes"] if n["name"] == "node-c"]
    assert "is no measurement (a figure is a positive number" in node["details"][0] and drain == ["node-c"]


# --- 4. Nothing a report holds reaches an output unchecked -----------------------------------------


def _merge_one_bad(nodes, tmp_path, capsys, bad: fr.Report, name: str = "node-c") -> tuple[int, list[str], Path]:
    reports = {**_copies(nodes["passed"], "node-a", "node-b"), name: bad}
    status, lines, _ = _merge(capsys, str(_fleet(tmp_path / "reports", reports)), "--out", str(tmp_path / "out"))
    return status, lines, tmp_path / "out"


def _every_line_is_one_host(drain: list[str]) -> bool:
    return all(line and line.replace("-", "").replace(".", "").replace("_", "").isalnum() for line in drain)


@pytest.mark.parametrize("host", ["node-x\nnode-y", "node-x State=RESUME", "node-\x1b[31mx", "-x", ""])
def test_a_host_name_that_is_no_host_name_never_reaches_the_drain_list_or_splits_a_line(
    nodes, tmp_path, capsys, host: str
) -> None:
    status, lines, out = _merge_one_bad(nodes, tmp_path, capsys, fr.with_host(fr.load(nodes["passed"]), host))
    fleet, markdown, junit, drain = _outputs(out)
    if host.strip():
        assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-c (no usable report)"
        (node,) = [n for n in fleet["nodes"] if n["name"] == "node-c"]
        assert f"{host!a} is not a host name" in node["details"][0]
    else:  # no host in the report: its file names the node
        assert status == 0
    assert _every_line_is_one_host(drain) and all(line.isprintable() for line in markdown.splitlines())
    assert all(case.get("name", "").isprintable() for case in junit.iter("testcase"))


def test_a_report_file_whose_name_is_no_host_name_is_named_escaped_and_never_drained(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a", "node-b"))
    (folder / "node-c\nnode-d.json").write_text("{truncated")
    status, lines, _ = _merge(capsys, str(folder), "--out", str(tmp_path / "out"))
    _, _, junit, drain = _outputs(tmp_path / "out")
    assert status == 1 and drain == []
    assert lines[1] == (
        "rocm-validate fleet verdict: 'node-c\\nnode-d': the report's host name cannot be written to the drain list "
        "(see each one's reason); set ROCM_VALIDATE_HOST to the node's name and rerun it"
    )
    assert "'node-c\\nnode-d'" in _junit_failures(junit)


def test_text_with_control_characters_in_a_report_is_reported_not_written(nodes, tmp_path, capsys) -> None:
    bad = fr.load(nodes["passed"])
    check = bad["tests"][0]["nodeid"]
    bad = fr.failing(fr.with_host(bad, "node-c"), check)
    for test in bad["tests"]:
        test["nodeid"] = test["nodeid"] + "\n\x1b[32mPASSED\x00"
    status, lines, out = _merge_one_bad(nodes, tmp_path, capsys, bad)
    fleet, markdown, junit, drain = _outputs(out)
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-c (no usable report)"
    assert drain == ["node-c"] and "\x1b" not in markdown + json.dumps(fleet, ensure_ascii=False)
    assert "is not one printable line" in _junit_failures(junit)["node-c"] or any(
        "is not one printable line" in (f.text or "") for f in junit.iter("failure")
    )


@pytest.mark.parametrize("verdict", ["pass\nrocm-validate verdict: pass", "pass \x07"])
def test_a_verdict_of_more_than_one_line_is_refused(nodes, tmp_path, capsys, verdict: str) -> None:
    bad = fr.with_host(fr.load(nodes["passed"]), "node-c")
    bad["verdict"] = verdict
    status, lines, _ = _merge_one_bad(nodes, tmp_path, capsys, bad)
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-c (no usable report)"


def test_a_failed_test_with_a_category_the_fleet_does_not_know_is_refused_not_read_as_passed(
    nodes, tmp_path, capsys
) -> None:
    bad = fr.with_host(fr.load(nodes["passed"]), "node-c")
    bad = fr.failing(bad, bad["tests"][0]["nodeid"], "cosmic-ray")
    status, lines, _ = _merge_one_bad(nodes, tmp_path, capsys, bad)
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-c (no usable report)"


# --- 5. --expect and the report paths ------------------------------------------------------------


@pytest.mark.parametrize("value", ["", " , ,", "node-a,node b", "node-a,node\x1bb"])
def test_an_expect_naming_no_host_or_a_bad_one_is_a_usage_error(nodes, tmp_path, capsys, value: str) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a"))
    status, lines, error = _merge(capsys, str(folder), "--expect", value)
    assert status == 2 and lines == [] and len(error.splitlines()) == 1
    assert error.startswith("rocm-validate fleet: error: --expect ")


def test_an_expect_file_naming_no_host_is_a_usage_error(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a"))
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# every node drained last week\n\n")
    status, _, error = _merge(capsys, str(folder), "--expect", str(hosts))
    assert status == 2 and error.endswith(f"--expect {hosts} names no host; expected one host per line")


def test_dangling_and_looping_links_among_the_reports_are_named_as_nodes(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a", "node-b", "node-c"))
    (folder / "node-gone.json").symlink_to(tmp_path / "elsewhere" / "node-gone.json")
    (folder / "node-loop.json").symlink_to(folder / "node-loop.json")
    status, lines, _ = _merge(capsys, str(folder), "--out", str(tmp_path / "out"))
    fleet, _, _, drain = _outputs(tmp_path / "out")
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-gone, node-loop (no usable report)"
    details = {n["name"]: n["details"][0] for n in fleet["nodes"] if n["action"] == "drain"}
    assert "is a link to" in details["node-gone"] and "which cannot be followed" in details["node-gone"]
    assert "node-loop.json" in details["node-loop"] and drain == ["node-gone", "node-loop"]


def test_a_report_that_is_a_pipe_is_named_not_waited_on(nodes, tmp_path, capsys) -> None:
    folder = _fleet(tmp_path / "reports", _copies(nodes["passed"], "node-a", "node-b", "node-c"))
    os.mkfifo(folder / "node-pipe.json")
    status, lines, _ = _merge(capsys, str(folder))
    assert status == 1 and lines[1] == "rocm-validate fleet verdict: drain: node-pipe (no usable report)"


def test_the_fleet_command_runs_as_a_program_on_these_reports(nodes, tmp_path) -> None:
    """The same merge as `rocm-validate fleet` in a shell: one interrupted node fails the fleet."""
    reports = {**_copies(nodes["passed"], "node-a"), "node-sigint": copy.deepcopy(fr.load(nodes["SIGINT"]))}
    folder = _fleet(tmp_path / "reports", reports)
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.cli.main", "fleet", str(folder)], capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[1] == "rocm-validate fleet verdict: rerun: node-sigint (interrupted)"
