"""The worked examples of docs/extending.md, run as written from a temporary project on the CPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import fake_devices
import pytest

from rocm_validate.platform.devices import DeviceInfo

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
_FILE_BLOCK = re.compile(r"<!-- file: (?P<name>\S+) -->\n```python\n(?P<code>.*?)```", re.S)


def doc_files() -> dict[str, str]:
    """Each `<!-- file: NAME -->` code block of the page, by file name."""
    return {m.group("name"): m.group("code") for m in _FILE_BLOCK.finditer(DOC.read_text())}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    for name, code in doc_files().items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    return pytester


def test_the_page_holds_one_example_of_each_kind():
    assert set(doc_files()) == {"test_my_kernels.py", "suites/perf/test_my_bandwidth.py", "conftest.py"}


def test_the_correctness_example_passes_and_its_negative_control_catches_the_wrong_kernel(project):
    result = project.runpytest("--rocm-suite=correctness", "--rocm-device=cpu", "test_my_kernels.py")
    result.assert_outcomes(passed=2)


def test_a_projects_own_tolerance_row_is_the_one_that_gates(project):
    project.makepyfile(
        test_looser="""
        from rocm_validate.correctness.tolerances import tolerance_for
        from test_my_kernels import MY_RULES

        def test_rows():
            assert tolerance_for("my.rms_norm", "rocm", "gfx942", rules=MY_RULES).k == 8
            assert tolerance_for("my.rms_norm", "cuda", "sm_90", rules=MY_RULES).k == 4
            assert tolerance_for("gemm.bfloat16", "cuda", "sm_90", rules=MY_RULES).k is not None
    """
    )
    project.runpytest("--rocm-device=cpu", "test_looser.py").assert_outcomes(passed=1)


def test_the_perf_example_records_then_gates_then_fails_a_regression(project):
    # a CPU shared with other test processes moves a rate by more than the CPU's default 25% min_band,
    # and spreads one run's rounds by up to 55% (too noisy to record under the default noise_multiple=3)
    project.makeini("[pytest]\nrocm_perf_thresholds = my.* min_band=0.5 noise_multiple=1 cap=0.9\n")
    args = ("--rocm-suite=perf", "--rocm-device=cpu", "suites/perf/test_my_bandwidth.py")
    project.runpytest(*args, "--update-baselines").assert_outcomes(passed=2)
    [baseline_file] = (project.path / "baselines").glob("*.json")
    entries = json.loads(baseline_file.read_text())["metrics"]
    assert list(entries) == ["my.layer_norm.256x256"], "record_rocm_metric must not write a baseline"

    project.runpytest(*args).assert_outcomes(passed=2)

    data = json.loads(baseline_file.read_text())
    data["metrics"]["my.layer_norm.256x256"]["value"] *= 100
    baseline_file.write_text(json.dumps(data))
    result = project.runpytest(*args)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*my.layer_norm.256x256: regressed*"])


def test_the_metric_hook_sees_every_metric_with_its_outcome(project):
    project.runpytest("--rocm-suite=perf", "--rocm-device=cpu", "--update-baselines", "suites/perf").assert_outcomes(
        passed=2
    )
    lines = [json.loads(line) for line in (project.path / "metrics.jsonl").read_text().splitlines()]
    assert {(line["name"], line["outcome"]) for line in lines} == {
        ("my.layer_norm.256x256", "passed"),
        ("my.model.parameters", "passed"),
    }


def test_the_discovery_hook_replays_a_saved_device_description(project):
    saved = [fake_devices.mi300x(), fake_devices.cpu()]
    (project.path / "devices.json").write_text(json.dumps({"devices": [d.to_dict() for d in saved]}))
    result = project.runpytest("--rocm-suite=correctness", "--collect-only", "-q", "test_my_kernels.py")
    assert result.ret == 0
    header = project.runpytest("--rocm-suite=correctness", "--collect-only", "test_my_kernels.py")
    assert header.ret == 0
    header.stdout.fnmatch_lines(
        ["rocm-validate device: AMD Instinct MI300X (cuda:0, gfx942, key amd-instinct-mi300x-gfx942*"]
    )
    assert DeviceInfo.from_dict(saved[0].to_dict()) == saved[0]
