"""Header, device fixtures and requirement markers inside real pytest runs (devices stood in)."""

import dataclasses
import json

import fake_devices
import pytest


def test_the_header_reproduces_the_run_with_device_key_arch_and_versions(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.mi300x()))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest("--rocm-suite=correctness")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "rocm-validate 0.1.0: suites correctness; baselines *baselines; mode gate",
            "rocm-validate device: AMD Instinct MI300X (cuda:0, gfx942, key amd-instinct-mi300x-gfx942, SPX/NPS1); "
            "torch 2.9.1+rocm7.0, HIP 6.4.43482-0f2d60242, driver 6.8.5, fp8 e4m3fnuz/e5m2fnuz, blas hipblaslt",
            "rocm-validate visibility: HIP_VISIBLE_DEVICES=0",
            "rocm-validate rerun: pytest --rocm-suite=correctness --rocm-device=0 --rocm-baselines=*baselines",
        ]
    )


def test_a_run_of_unrelated_tests_does_not_probe_devices(pytester):
    pytester.makeconftest("def pytest_rocm_discover_devices(config):\n    raise AssertionError('probed devices')\n")
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "rocm-validate device:" not in result.stdout.str()


def test_a_missing_gpu_index_is_a_usage_error_listing_the_gpus(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest("--rocm-suite=correctness", "--rocm-device=4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-device=4: no such GPU; found 0 (NVIDIA H100 80GB HBM3)*"])


def _only_a_broken_gpu_build(pytester) -> None:
    """Discovery as on a node whose CUDA build of torch cannot use its GPU: only the CPU is left."""
    cpu = dataclasses.replace(
        fake_devices.cpu(), runtime_version="CUDA 13.0", errors=("torch.cuda: RuntimeError: invalid device ordinal",)
    )
    pytester.makeconftest(
        "import json\nfrom rocm_validate.platform.devices import DeviceInfo\n\n"
        "def pytest_rocm_discover_devices(config):\n"
        f"    return [DeviceInfo.from_dict(json.loads({json.dumps(cpu.to_dict())!r}))]\n"
    )
    pytester.makepyfile("def test_ok():\n    pass\n")


def test_a_broken_gpu_stops_the_run_with_exit_4_instead_of_validating_the_cpu(pytester):
    _only_a_broken_gpu_build(pytester)
    result = pytester.runpytest("--rocm-suite=correctness")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "ERROR: this torch is a GPU build (CUDA 13.0), but no usable GPU was found "
            "(torch.cuda: RuntimeError: invalid device ordinal)*--rocm-device=cpu"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_cpu_is_validated_when_asked_for_on_purpose(pytester):
    _only_a_broken_gpu_build(pytester)
    pytester.runpytest("--rocm-suite=correctness", "--rocm-device=cpu").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "extra", [[], ["-q"], ["-n", "2"], ["-q", "-n", "2"]], ids=["plain", "quiet", "xdist", "quiet-xdist"]
)
def test_a_missing_gpu_is_the_same_one_line_usage_error_whatever_the_output_options(pytester, extra):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest("--rocm-suite=correctness", "--rocm-device=9", *extra)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --rocm-device=9: no such GPU; found 0 (NVIDIA H100 80GB HBM3)*"])
    output = result.stdout.str() + result.stderr.str()
    assert "errors during collection" not in output and "Traceback" not in output and "pluggy" not in output


def test_fixtures_hand_out_the_selected_device(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.mi355x()))
    pytester.makepyfile(
        "def test_device(rocm_device, rocm_devices):\n"
        "    assert rocm_device.arch == 'gfx950'\n"
        "    assert [d.backend for d in rocm_devices] == ['rocm', 'cpu']\n"
        "def test_cpu_choice(pytestconfig):\n"
        "    pass\n"
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_cpu_selection_hands_out_the_cpu(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.mi355x()))
    pytester.makepyfile("def test_device(rocm_device):\n    assert rocm_device.backend == 'cpu'\n")
    pytester.runpytest("--rocm-device=cpu").assert_outcomes(passed=1)


REQUIREMENTS = """
import pytest

@pytest.mark.requires_arch("gfx94")
def test_mi300_only():
    pass

@pytest.mark.requires_fp8("e4m3fnuz")
def test_fnuz_only():
    pass

@pytest.mark.requires_gpu
@pytest.mark.requires_memory(64)
def test_big_gpu():
    pass

@pytest.mark.requires_devices(8)
def test_full_node():
    pass
"""


def test_requirement_markers_skip_with_need_and_found_on_an_h100(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile(REQUIREMENTS)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*needs gfx94x, found sm_90",
            "*needs FP8 e4m3fnuz, found e4m3fn/e5m2 on sm_90",
            "*needs 8 GPUs, found 1",
        ]
    )


def test_requirement_markers_let_an_mi300x_run_its_tests(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.mi300x()))
    pytester.makepyfile(REQUIREMENTS)
    pytester.runpytest().assert_outcomes(passed=3, skipped=1)


def test_a_marker_with_a_wrong_argument_fails_its_test_with_the_reason(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile("import pytest\n\n@pytest.mark.requires_devices('two')\ndef test_x():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*requires_devices needs a positive whole number of GPUs, found 'two'"])
