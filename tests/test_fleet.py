"""The fleet verdict from node reports: real CPU runs of the suites, and synthetic fleets derived
from them (a node 10% slower on GEMMs, one failing numerics, every node failing one check, a
corrupt report, another process on a node's GPU, mixed stacks), each with its negative control."""

from __future__ import annotations

import json
import random
import re
import statistics
from pathlib import Path

import fleet_reports as fr
import pytest

from rocm_validate.cli.fleet import merge, report_paths
from rocm_validate.fleet import output
from rocm_validate.fleet.judge import CPU_NOT_COMPARED, FleetBuilder
from rocm_validate.fleet.reports import read_node
from rocm_validate.results import jsonfile
from rocm_validate.results.peers import PeerSample, compare
from rocm_validate.results.report import HOST_VARIABLES, host_name


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> fr.Report:
    """A real CPU report of this session (cpu-a), the template of the synthetic fleets."""
    return fr.load(fr.real_reports(tmp_path_factory)[0])


@pytest.fixture(scope="module")
def check(template: fr.Report) -> str:
    """A correctness check that passed in the real run."""
    return fr.passed_checks(template)[0]


def judged(folder: Path, reports: dict[str, fr.Report], **expect: object):
    return merge(report_paths([fr.write_fleet(folder, reports)]), **expect)


# --- real runs --------------------------------------------------------------------------------


def test_real_cpu_runs_merge_into_one_fleet_named_by_the_hosts_their_reports_give(tmp_path_factory):
    paths = fr.real_reports(tmp_path_factory)
    fleet = merge(paths)
    assert sorted(r.host for r in fleet.nodes) == ["cpu-a", "cpu-b"]
    assert len(fleet.stacks) == 1 and fleet.stacks[0].backend == "cpu"
    assert not fleet.checks and fleet.hosts("drain") == []
    assert fleet.parts == (f"pass: every check that ran passed on all 2 nodes ({CPU_NOT_COMPARED})",)


def test_a_report_names_its_node_by_rocm_validate_host_then_slurm_then_the_host_name(monkeypatch):
    for variable in HOST_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-017")
    assert host_name() == "gpu-017"
    monkeypatch.setenv("ROCM_VALIDATE_HOST", " k8s-node-3 ")
    assert host_name() == "k8s-node-3"
    monkeypatch.setenv("ROCM_VALIDATE_HOST", "")
    monkeypatch.delenv("SLURMD_NODENAME")
    assert host_name() and host_name() != "k8s-node-3"


# --- synthetic fleets ---------------------------------------------------------------------------


def test_a_healthy_fleet_passes(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8))
    assert fleet.exit_status == 0
    assert fleet.parts == ("pass: every check that ran passed on all 8 nodes, and no node is below the fleet median",)


def test_a_node_ten_percent_slower_on_gemms_is_drained_though_every_node_passes_its_own_checks(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {3: lambda r: fr.scaled(r, "gemm.", 0.9)}))
    assert fleet.parts == ("drain: node-3 (below the fleet median)",)
    assert fleet.hosts("drain") == ["node-3"] and fleet.exit_status == 1
    messages = [f.message for m in fleet.metrics for f in m.flagged]
    assert len(messages) == 4, messages  # the square GEMM of each dtype
    assert all(re.match(r"node-3 is (9|10|11)\.\d% below the median of its 7 peers on gemm\.", m) for m in messages)


def test_a_node_three_percent_slower_is_within_the_gpu_band(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {3: lambda r: fr.scaled(r, "gemm.", 0.97)}))
    assert fleet.exit_status == 0


def test_figures_measured_on_the_cpu_are_not_compared_between_hosts(tmp_path, template):
    cpu = {f"c{i}": fr.jittered(fr.with_host(template, f"c{i}"), i) for i in range(8)}
    cpu["c3"] = fr.scaled(cpu["c3"], "gemm.", 0.5)
    fleet = judged(tmp_path, cpu)
    assert fleet.exit_status == 0 and fleet.metrics == ()
    assert fleet.parts == (f"pass: every check that ran passed on all 8 nodes ({CPU_NOT_COMPARED})",)


def test_a_node_failing_numerics_is_drained_with_its_category(tmp_path, template, check):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {2: lambda r: fr.failing(r, check)}))
    assert fleet.parts == ("drain: node-2 (numerics)",)
    assert fleet.decisions["node-2"].details == (f"{check}: numerics",)


def test_every_node_failing_the_same_check_is_an_image_regression_and_drains_nothing(tmp_path, template, check):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {i: lambda r: fr.failing(r, check) for i in range(8)}))
    assert fleet.parts == (f"image regression: 8 of 8 nodes fail {check} (numerics: 8): roll back the image",)
    assert fleet.hosts("drain") == [] and fleet.exit_status == 1


def test_a_check_failing_on_most_nodes_is_the_images_and_on_half_of_them_the_nodes(tmp_path, template, check):
    most = judged(
        tmp_path / "most", fr.synthetic_fleet(template, 8, {i: lambda r: fr.failing(r, check) for i in range(5)})
    )
    assert most.parts[0].startswith(f"image regression: 5 of 8 nodes fail {check}")
    half = judged(
        tmp_path / "half", fr.synthetic_fleet(template, 8, {i: lambda r: fr.failing(r, check) for i in range(4)})
    )
    assert half.parts == ("drain: node-0, node-1, node-2, node-3 (numerics)",)


def test_a_corrupt_report_is_named_and_drained_never_dropped(tmp_path, template):
    folder = fr.write_fleet(tmp_path, fr.synthetic_fleet(template, 8))
    corrupt = folder / "node-7.json"
    corrupt.write_text(corrupt.read_text()[:700])
    fleet = merge(report_paths([folder]))
    assert fleet.parts == ("drain: node-7 (no usable report)",)
    assert fleet.decisions["node-7"].details[0].startswith(f"{corrupt} is not valid JSON (line 1, column")


def test_a_report_of_another_schema_version_is_named_with_both_versions(tmp_path, template):
    (tmp_path / "node-0.json").write_text(json.dumps({**template, "schema": "rocm-validate/report/2"}))
    found = read_node(tmp_path / "node-0.json")
    assert found.reason.startswith(f"{tmp_path / 'node-0.json'} is a rocm-validate/report/2 report; rocm-validate ")
    assert "reads rocm-validate/report/1" in found.reason


def test_a_json_file_that_is_no_node_report_is_named_as_such(tmp_path):
    (tmp_path / "fleet.json").write_text(json.dumps({"schema": "rocm-validate/fleet/1"}))
    assert (
        "is not a rocm-validate node report (schema 'rocm-validate/fleet/1')"
        in read_node(tmp_path / "fleet.json").reason
    )


def test_an_expected_node_without_a_report_is_named(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 3), expect=["node-0", "node-1", "node-2", "node-9"])
    assert fleet.parts == ("drain: node-9 (no usable report)",)
    assert fleet.decisions["node-9"].details == ("no report: expected, but none was found",)


def test_nodes_expected_by_count_only_are_counted(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 3), expect_count=5)
    assert fleet.unnamed_missing == 2 and fleet.exit_status == 1
    assert fleet.parts[0].startswith("2 more node(s) expected sent no report and are not named")


def test_when_most_nodes_sent_no_usable_report_the_launch_is_blamed_and_nothing_drained(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 1), expect=[f"node-{i}" for i in range(4)])
    assert fleet.hosts("drain") == []
    assert any(
        p.startswith("no usable report from 3 of 4 nodes: the launch or the shared folder failed") for p in fleet.parts
    )


def test_a_node_that_measured_beside_another_process_is_rerun_naming_it_not_drained(tmp_path, template):
    def contended(report: fr.Report) -> fr.Report:
        return fr.with_other_process(fr.scaled(report, "gemm.", 0.5), "gemm.")

    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {1: contended}))
    assert fleet.hosts("drain") == [] and fleet.hosts("rerun") == ["node-1"]
    assert fleet.parts == (
        "rerun on an idle node: node-1 (contention); other work beside the measurements: node-1: other processes "
        "used the GPU during the measurement: pid 4242 python3 (2.0 GiB)",
    )


def test_wrong_results_beside_another_process_are_still_drained(tmp_path, template, check):
    def contended(report: fr.Report) -> fr.Report:
        return fr.failing(fr.with_other_process(report, "gemm."), check)

    fleet = judged(tmp_path, fr.synthetic_fleet(template, 8, {1: contended}))
    assert fleet.parts == ("drain: node-1 (numerics)",)


def test_a_gpu_below_its_peers_inside_a_node_drains_the_node(tmp_path, template):
    def flagged(report: fr.Report) -> fr.Report:
        peer = {
            "name": "gemm.bf16",
            "subject": "GPU 5 (BDF 0000:c1:00.0)",
            "value": 600.0,
            "median": 680.0,
            "peers": 7,
            "ratio": 0.88,
            "verdict": "below-peers",
            "message": "GPU 5 (BDF 0000:c1:00.0) is 11.8% below",
        }
        return {**report, "peers": [peer]}

    fleet = judged(tmp_path, fr.synthetic_fleet(template, 4, {2: flagged}))
    assert fleet.parts == ("drain: node-2 (GPUs below their peers in the node)",)


def test_nodes_on_different_stacks_are_judged_apart_and_the_mix_is_flagged(tmp_path, template, check):
    def newer(report: fr.Report) -> fr.Report:
        return fr.failing({**report, "device": {**report["device"], "torch_version": "2.13.0+cu130"}}, check)

    fleet = judged(tmp_path, fr.synthetic_fleet(template, 6, {i: newer for i in (4, 5)}))
    assert len(fleet.stacks) == 2 and fleet.exit_status == 1
    assert fleet.parts[0] == (
        f"image regression on NVIDIA H100 80GB HBM3; torch 2.13.0+cu130, CUDA 13.0, driver 580.159.04: "
        f"2 of 2 nodes fail {check} (numerics: 2): roll back the image"
    )
    assert fleet.parts[1].startswith("mixed stacks: 2 (NVIDIA H100 80GB HBM3; torch 2.11.0+cu130, CUDA 13.0, driver")
    assert (
        "(4 nodes: node-0, node-1, node-2, node-3)" in fleet.parts[1] and "(2 nodes: node-4, node-5)" in fleet.parts[1]
    )


def test_a_one_node_fleet_cannot_tell_the_image_from_the_node(tmp_path, template, check):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 1, {0: lambda r: fr.failing(r, check)}))
    assert fleet.parts == (
        "node-0: a check that ran on one node only cannot tell the image from the node; merge more nodes' reports",
    )
    assert fleet.hosts("drain") == []


def test_two_reports_claiming_one_host_are_both_kept_and_flagged(tmp_path, template):
    reports = fr.synthetic_fleet(template, 3)
    reports["node-0-again"] = fr.with_host(reports["node-1"], "node-0")
    fleet = judged(tmp_path, reports)
    assert sorted(r.name for r in fleet.nodes) == ["node-0", "node-0 (node-0.json)", "node-1", "node-2"]
    assert fleet.parts[-1] == "several reports claim one host: node-0 (2) (set ROCM_VALIDATE_HOST per node)"


# --- the outputs ------------------------------------------------------------------------------


def test_the_fleet_report_matches_its_schema_and_has_every_nodes_ratio(tmp_path, template):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 5, {3: lambda r: fr.scaled(r, "gemm.", 0.9)}))
    data = output.to_dict(fleet)
    assert jsonfile.schema_errors(data, output.FLEET_SCHEMA) == []
    gemm = next(m for m in data["metrics"] if m["name"].startswith("gemm.bf16"))
    assert sorted(gemm["ratios"]) == [f"node-{i}" for i in range(5)] and gemm["ratios"]["node-3"] < 0.92
    assert [f["node"] for f in gemm["flagged"]] == ["node-3"] and data["drain"] == ["node-3"]


def test_junit_has_one_test_case_per_node_failing_those_to_drain(tmp_path, template, check):
    import xml.etree.ElementTree as ElementTree

    fleet = judged(tmp_path, fr.synthetic_fleet(template, 4, {1: lambda r: fr.failing(r, check)}))
    root = ElementTree.fromstring(output.junit(fleet))
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["node-0", "node-1", "node-2", "node-3"]
    assert [c.find("failure") is not None for c in cases] == [False, True, False, False]
    assert cases[1].find("failure").get("message") == "drain: numerics"


def test_the_drain_list_has_one_host_a_line(tmp_path, template, check):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 4, {i: lambda r: fr.failing(r, check) for i in (0, 2)}))
    assert output.drain_list(fleet) == "node-0\nnode-2\n"
    assert output.drain_list(judged(tmp_path / "ok", fr.synthetic_fleet(template, 2))) == ""


def test_the_markdown_of_a_thousand_nodes_lists_the_outliers_first_and_counts_the_healthy(template):
    builder = FleetBuilder()
    from rocm_validate.fleet.reports import summarize

    base = fr.as_gpu(template)
    for index in range(1000):
        report = fr.jittered(fr.with_host(base, f"node-{index:04d}"), index)
        if index in (17, 503):
            report = fr.scaled(report, "gemm.", 0.85 if index == 17 else 0.9)
        builder.add(summarize(report, Path(f"node-{index:04d}.json")))
    fleet = builder.result()
    text = output.markdown(fleet)
    assert fleet.parts == ("drain: node-0017, node-0503 (below the fleet median)",)
    assert len(text.splitlines()) < 40
    assert "998 nodes passed every check and sit within the band of the fleet median (counted, not listed" in text
    outliers = text.split("### Nodes beyond the band of the fleet median (worst first)")[1]
    assert outliers.index("node-0017") < outliers.index("node-0503")


# --- the comparison underneath --------------------------------------------------------------------


def test_the_leave_one_out_medians_match_the_plain_computation():
    rng = random.Random(7)

    def band(own, peer):
        return 0.05, f"{own}/{peer}"

    for _ in range(200):
        samples = [
            PeerSample(
                f"n{i}", rng.choice([1.0, 2.0, rng.uniform(0.5, 2)]), rng.choice([None, 0.01, rng.random() / 10])
            )
            for i in range(rng.randint(2, 9))
        ]
        for sample, finding in zip(samples, compare("m", "x", "higher", samples, band)):
            others = [s for s in samples if s is not sample]
            spreads = [s.dispersion for s in others if s.dispersion is not None]
            assert finding.median == pytest.approx(statistics.median(s.value for s in others))
            assert finding.message == "" or finding.message.endswith(
                f"(allowed {sample.dispersion}/{statistics.median(spreads) if spreads else None})"
            )


def test_a_node_whose_test_crashed_is_rerun_not_drained(tmp_path, template, check):
    fleet = judged(tmp_path, fr.synthetic_fleet(template, 4, {3: lambda r: fr.failing(r, check, "crash")}))
    assert fleet.parts == ("rerun: node-3 (crash)",)
    assert fleet.hosts("rerun") == ["node-3"] and fleet.hosts("drain") == []
