"""The summary a person looks at: markdown for --rocm-summary (a CI step summary), the same facts in
pytest-html's report with plots when matplotlib is installed, and the plots' data."""

from __future__ import annotations

import html
import sys

import fake_devices
import fake_node
import pytest

from rocm_validate.results import plots
from rocm_validate.results.metrics import GpuRef, Metric
from rocm_validate.results.peers import PeerFinding
from rocm_validate.results.report import TestResult as Result
from rocm_validate.results.summary import RunFacts, html_sections, markdown

GEMM = "gemm.bf16.8192x8192x8192"


def _facts(exit_status: int = 1) -> RunFacts:
    gpus = fake_node.gpus(2)
    refs = [GpuRef(i, d.pci_bus_id, d.uuid, d.device_key) for i, d in enumerate(gpus)]
    results = [
        Result(
            "suites/perf/test_gemm.py::test_gemm",
            "perf",
            "passed",
            gpu=refs[0],
            metrics=[Metric(GEMM, 680.0, "TFLOP/s", baseline=670.0, ratio=680 / 670, verdict="pass", gpu=refs[0])],
        ),
        Result(
            "suites/perf/test_gemm.py::test_gemm",
            "perf",
            "passed",
            gpu=refs[1],
            metrics=[Metric(GEMM, 600.0, "TFLOP/s", baseline=670.0, ratio=600 / 670, verdict="pass", gpu=refs[1])],
        ),
        Result(
            "suites/correctness/test_sdpa.py::test_x",
            "correctness",
            "failed",
            gpu=refs[1],
            message="def test_x():\n>   assert a | b\nE   AssertionError: 3 / 8 elements differ | worse\n",
        ),
        Result(
            "suites/correctness/test_sdpa.py::test_x",
            "correctness",
            "skipped",
            gpu=refs[0],
            message="Skipped: needs flash",
        ),
        Result(
            "suites/collectives/test_collectives.py::test_p2p",
            "collectives",
            "passed",
            metrics=[
                Metric(
                    "collective.all_reduce.2ranks.1mib",
                    90.0,
                    "GB/s",
                    extra={"collective": "all_reduce", "bytes": 2**20},
                ),
                Metric(
                    "collective.all_reduce.2ranks.4kib", 1.5, "GB/s", extra={"collective": "all_reduce", "bytes": 4096}
                ),
            ],
        ),
    ]
    peers = [
        PeerFinding(GEMM, refs[0].label, 680.0, "TFLOP/s", "higher", 600.0, 1, 680 / 600, 0.05, "pass", "", refs[0]),
        PeerFinding(
            GEMM,
            refs[1].label,
            600.0,
            "TFLOP/s",
            "higher",
            680.0,
            1,
            600 / 680,
            0.05,
            "below-peers",
            "GPU 1 (BDF 0000:02:00.0) is 11.8% below the median of its peer on gemm",
            refs[1],
        ),
    ]
    return RunFacts("pytest --rocm-device=all", exit_status, gpus, results, peers)


def test_the_markdown_summary_has_the_verdict_devices_suites_gpus_metrics_and_failures():
    text = markdown(_facts())
    assert text.startswith("## rocm-validate: FAILED (exit status 1)\n")
    assert (
        "- device: 2 x AMD Instinct MI300X (cuda:0, gfx942, key amd-instinct-mi300x-gfx942, SPX/NPS1); torch 2.9.1+rocm7.0"
        in text
    )
    assert "- GPU 1 (BDF 0000:02:00.0) is 11.8% below the median of its peer on gemm" in text
    assert "| correctness | 0 | 1 | 1 | 0 |" in text and "| perf | 2 | 0 | 0 | 0 |" in text
    assert "| 1 | 0000:02:00.0 | GPU-0001 | AMD Instinct MI300X | 1 | 1 | 0 | 1 |" in text
    assert f"| {GEMM} | 1 | 600 | TFLOP/s | 0.896 | 0.882 | pass / below peers |" in text
    assert "| collective.all_reduce.2ranks.1mib | - | 90 | GB/s | - | - | recorded |" in text
    assert (
        "| suites/correctness/test_sdpa.py::test_x [GPU 1] | failed | AssertionError: 3 / 8 elements differ \\| worse |"
        in text
    )


def test_a_passing_single_device_run_has_no_gpu_table_and_says_passed():
    facts = _facts(exit_status=0)
    single = RunFacts(facts.command, 0, [fake_devices.h100()], [Result("t.py::test_a", "perf", "passed")], [])
    text = markdown(single)
    assert (
        text.startswith("## rocm-validate: passed (exit status 0)")
        and "### GPUs" not in text
        and "### Failures" not in text
    )


def test_html_sections_carry_the_same_tables_escaped():
    sections = html_sections(_facts())
    joined = "".join(sections)
    assert "<h2>rocm-validate: FAILED (exit status 1)</h2>" in joined
    assert "<h3>Below their peers</h3>" in joined and "<th>x peer median</th>" in joined
    assert "AssertionError: 3 / 8 elements differ | worse" in joined and "<script" not in joined


def test_without_matplotlib_the_html_says_how_to_get_the_plots(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert plots.render([], []) is None
    assert f"<p>Plots need matplotlib: {html.escape(plots.INSTALL)}</p>" in "".join(html_sections(_facts()))


def test_the_plots_show_each_gpus_ratios_and_busbw_against_message_size():
    facts = _facts()
    metrics = [m for r in facts.results for m in r.metrics]
    assert plots.ratio_series(metrics, facts.peers) == {GEMM: {0: (680 / 670, 680 / 600), 1: (600 / 670, 600 / 680)}}
    assert plots.busbw_series(metrics) == {"all_reduce": [(4096, 1.5), (2**20, 90.0)]}


def test_with_matplotlib_the_plots_are_embedded_as_png():
    pytest.importorskip("matplotlib")
    facts = _facts()
    images = plots.render([m for r in facts.results for m in r.metrics], facts.peers)
    assert [title for title, _ in images] == [
        "Ratio to baseline, per GPU",
        "Ratio to the median of its peers, per GPU",
        "Bus bandwidth against message size",
    ]
    assert all(data.startswith("iVBORw0KGgo") for _, data in images)  # base64 of the PNG signature


def test_the_summary_option_writes_markdown_for_a_ci_step(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile(
        **{"suites/perf/test_x.py": "def test_x(record_rocm_metric):\n    record_rocm_metric('x.rate', 2.0, 'GB/s')\n"}
    )
    result = pytester.runpytest("--rocm-suite=perf", "--rocm-summary=out/summary.md", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    text = (pytester.path / "out" / "summary.md").read_text()
    assert (
        text.startswith("## rocm-validate: passed (exit status 0)")
        and "| x.rate | - | 2 | GB/s | - | - | recorded |" in text
    )
    result.stdout.fnmatch_lines(["rocm-validate summary: wrote *summary.md"])


def test_the_summary_option_refuses_a_folder(pytester):
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest(f"--rocm-summary={pytester.path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-summary=* is a folder; expected a file path such as summary.md"])


def test_pytest_html_reports_the_same_facts(pytester):
    pytest.importorskip("pytest_html")
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile(
        **{"suites/perf/test_x.py": "def test_x(record_rocm_metric):\n    record_rocm_metric('x.rate', 2.0, 'GB/s')\n"}
    )
    result = pytester.runpytest(
        "--rocm-suite=perf", "--html=report.html", "--self-contained-html", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    page = (pytester.path / "report.html").read_text()
    assert "rocm-validate: passed (exit status 0)" in page and "x.rate" in page
