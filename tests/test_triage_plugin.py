"""Every category produced end to end by a test that plants its cause, on a stand-in MI300X: a
wrong kernel (numerics), scaled baselines with clean evidence (performance), a fake process list
(contention), fake clocks (throttling), a missing library (environment), a sleep past a timeout
(timeout), a dead process (crash). Checked in the JSON report, the JUnit properties, the summary
and the verdict line. (configuration and hardware: tests/test_preflight.py, tests/test_repeatability.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

REPO = Path(__file__).resolve().parents[1]

CONFTEST = '''
import os

import pytest

from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing
from rocm_validate.platform.devices import DeviceInfo


def pytest_rocm_discover_devices(config):
    return [
        DeviceInfo(backend="rocm", index=0, name="AMD Instinct MI300X", arch="gfx942", device_key="amd-instinct-mi300x-gfx942"),
        DeviceInfo(backend="cpu", index=None, name="Test CPU", arch="Test CPU", device_key="cpu-test"),
    ]


@pytest.fixture
def timed():
    """timed(seconds, plant) -> a Measurement slowed by $SLOWDOWN whose evidence, when slowed,
    shows the planted cause: 'contended' (another process on the GPU), 'throttled' (a lower clock
    and a thermal limit) or 'clean' (nothing)."""
    def make(seconds, plant="clean"):
        factor = float(os.environ.get("SLOWDOWN", "1"))
        slowed = factor != 1.0
        samples = tuple(seconds * factor * (1 + 0.001 * ((i % 3) - 1)) for i in range(12))
        throttled = slowed and plant == "throttled"
        after = {"clock_mhz": 1200.0 if throttled else 2100.0, "slowdowns": ["hw-thermal"] if throttled else []}
        others = [{"pid": 4242, "name": "gemm_loop.py", "memory_bytes": 2 * 1024**3}] if slowed and plant == "contended" else []
        telemetry = {
            "source": "fake", "reason": "", "before": after, "after": after,
            "processes": {"before": {"processes": others}, "after": {"processes": others}},
            "host": {"cpus": 16, "other_cpus": 0.1, "steal_cpus": 0.0},
        }
        return Measurement(Timing(SampleSummary(samples, 1), "synthetic", 0.0, True), telemetry)
    return make
'''

PLANTED = """
import os
import subprocess
import sys

import pytest
import torch

PERF = pytest.mark.rocm_suite("perf")
CORRECTNESS = pytest.mark.rocm_suite("correctness")


@PERF
def test_gemm_clean(perf, timed):
    perf.throughput("gemm.bf16.clean", timed(0.0015, "clean"), 2 * 8192**3, "TFLOP/s")


@PERF
def test_gemm_contended(perf, timed):
    perf.throughput("gemm.bf16.contended", timed(0.0015, "contended"), 2 * 8192**3, "TFLOP/s")


@PERF
def test_gemm_throttled(perf, timed):
    perf.throughput("gemm.bf16.throttled", timed(0.0015, "throttled"), 2 * 8192**3, "TFLOP/s")


@CORRECTNESS
def test_wrong_kernel():
    a, b = torch.ones(4, 4), torch.arange(16.0).reshape(4, 4)
    wrong = a @ b.T  # the planted bug: a transposed operand
    assert torch.allclose(wrong, a @ b), "GEMM output differs from the reference"


@CORRECTNESS
def test_missing_library():
    import rocm_validate_planted_missing_library  # noqa: F401


@CORRECTNESS
def test_sleep_past_a_timeout():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5, check=False)


@CORRECTNESS
def test_dies():
    os.abort()
"""

EXPECTED = {
    "test_gemm_clean": "performance",
    "test_gemm_contended": "contention",
    "test_gemm_throttled": "throttling",
    "test_wrong_kernel": "numerics",
    "test_missing_library": "environment",
    "test_sleep_past_a_timeout": "timeout",
    "test_dies": "crash",
}


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, list]:
    """Record the perf baselines at full speed, then run everything 30% slower under xdist (so the
    dying test is a crash the run survives); returns the output, the report and JUnit properties."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("planted")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_planted.py").write_text(PLANTED)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLOWDOWN": "1"}
    common = [
        sys.executable,
        "-m",
        "pytest",
        "test_planted.py",
        "--rocm-suite=perf,correctness",
        "--rocm-baselines=baselines",
        "-p",
        "no:cacheprovider",
        "-p",
        "xdist",
    ]
    (folder / "baselines").mkdir()
    record = subprocess.run(
        [*common, "-k", "gemm", "--update-baselines"], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert record.returncode == 0, record.stdout[-3000:]
    env["SLOWDOWN"] = "1.3"
    done = subprocess.run(
        [*common, "-n", "1", "--rocm-report=report.json", "--junitxml=out.xml"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    properties = [
        (case.get("name"), p.get("name"), p.get("value"))
        for case in ElementTree.parse(folder / "out.xml").getroot().iter("testcase")
        for p in case.iter("property")
    ]
    return done.stdout, json.loads((folder / "report.json").read_text()), properties


def test_each_planted_cause_gives_its_category_in_the_report(planted_run) -> None:
    output, report, _ = planted_run
    found = {t["nodeid"].split("::")[-1]: t["category"] for t in report["tests"]}
    assert found == EXPECTED, output[-4000:]


def test_the_contention_message_names_the_process_and_the_throttling_one_the_clock(planted_run) -> None:
    _, report, _ = planted_run
    messages = {t["nodeid"].split("::")[-1]: t["message"] for t in report["tests"]}
    assert (
        "contention: other processes used the GPU during the measurement: pid 4242 gemm_loop.py (2.0 GiB)"
        in messages["test_gemm_contended"]
    )
    assert "throttling" not in messages["test_gemm_contended"]
    assert (
        "clock 1200 MHz now vs 2100 MHz at baseline (-42.9%), limits active: hw-thermal: the clock drop"
        in messages["test_gemm_throttled"]
    )
    assert "the stack is slower" in messages["test_gemm_clean"] and "throttling" not in messages["test_gemm_clean"]


def test_junit_carries_each_failures_category(planted_run) -> None:
    _, _, properties = planted_run
    categories = {case: value for case, name, value in properties if name == "rocm_category"}
    expected = {
        name: category for name, category in EXPECTED.items() if name != "test_dies"
    }  # a dead worker leaves no teardown report
    assert {case: categories.get(case) for case in expected} == expected


def test_the_summary_counts_categories_and_the_verdict_sums_them_up(planted_run) -> None:
    output, report, _ = planted_run
    assert "rocm-validate perf: 0 passed, 3 failed (performance: 1, contention: 1, throttling: 1)" in output
    assert "rocm-validate correctness: 0 passed, 4 failed (environment: 1, numerics: 1, timeout: 1, crash: 1)" in output
    verdict = report["verdict"]
    lines = output.splitlines()
    assert lines.index(verdict) > max(
        i for i, line in enumerate(lines) if line.startswith("rocm-validate ") and line != verdict
    )
    assert verdict.startswith("rocm-validate verdict: environment: install or repair the libraries")
    for part in (
        "GPU 0 (numerics: 1, performance: 1): one GPU cannot tell the image from the GPU",
        "contention: rerun on an idle node",
        "throttling on GPU 0",
        "timeout: 1 test(s)",
        "crash: 1 test(s)",
    ):
        assert part in verdict


def test_a_test_can_state_its_own_category_and_a_strict_not_validated_skip_is_environment(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("""
import pytest

from rocm_validate.core.requirements import not_validated

pytestmark = pytest.mark.rocm_suite("correctness")


def test_states_it(record_property):
    record_property("rocm_category", "hardware")
    assert False, "a planted hardware fault"


def test_not_validated():
    not_validated("no baseline for x on this device")
""")
    result = pytester.runpytest(
        "--rocm-device=cpu", "--rocm-strict", "--rocm-report=report.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=2)
    report = json.loads((pytester.path / "report.json").read_text())
    assert {t["nodeid"].split("::")[-1]: t["category"] for t in report["tests"]} == {
        "test_states_it": "hardware",
        "test_not_validated": "environment",
    }


def test_fail_as_refuses_a_category_that_does_not_exist() -> None:
    from rocm_validate.core.categorize import fail_as

    with pytest.raises(ValueError, match="category must be one of configuration, environment, numerics"):
        fail_as("gremlins", "it broke")
