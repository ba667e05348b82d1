"""Requirement markers decide skips from device facts and say need vs found."""

import fake_devices
import pytest

from rocm_validate.core import requirements as markers
from rocm_validate.errors import MarkerUsageError


def reason(name, *args, device=None, devices=None):
    device = device or fake_devices.h100()
    return markers.skip_reason(name, args, device, devices or [device, fake_devices.cpu()])


def test_requires_arch_prefix_on_another_vendor_says_need_and_found():
    assert reason("requires_arch", "gfx94") == "needs gfx94x, found sm_90"


def test_requires_arch_accepts_any_of_several_prefixes():
    assert reason("requires_arch", "gfx950", "sm_9") is None


def test_requires_arch_with_full_names_lists_them_as_given():
    assert (
        reason("requires_arch", "gfx942", "gfx950", device=fake_devices.mi250x())
        == "needs gfx942 or gfx950, found gfx90a"
    )


def test_requires_gpu_on_the_cpu_names_the_cpu():
    assert reason("requires_gpu", device=fake_devices.cpu()) == "needs a GPU, found cpu (Test CPU)"


def test_requires_fp8_on_mi250x_finds_none():
    assert reason("requires_fp8", device=fake_devices.mi250x()) == "needs native FP8, found none on gfx90a"


def test_requires_fp8_of_a_specific_format_names_the_formats_found():
    assert reason("requires_fp8", "e4m3fnuz") == "needs FP8 e4m3fnuz, found e4m3fn/e5m2 on sm_90"
    assert reason("requires_fp8", "e4m3fnuz", device=fake_devices.mi300x()) is None


def test_requires_devices_counts_gpus_only():
    assert reason("requires_devices", 2) == "needs 2 GPUs, found 1"
    assert reason("requires_devices", 1) is None


def test_requires_memory_compares_gib():
    assert reason("requires_memory", 100) == "needs 100 GiB of device memory, found 79.2 GiB on sm_90"
    assert reason("requires_memory", 160, device=fake_devices.mi300x()) is None


@pytest.mark.parametrize(
    ("name", "args"), [("requires_devices", ("two",)), ("requires_memory", (-1,)), ("requires_arch", ())]
)
def test_a_marker_with_wrong_arguments_is_a_usage_error(name, args):
    with pytest.raises(MarkerUsageError):
        reason(name, *args)
