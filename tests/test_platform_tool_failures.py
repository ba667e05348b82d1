"""A tool that ran and found no GPU: its own line, what it means and the fix, in `rocm-validate
devices --from` (real outputs of public issues, tests/fixtures/amd/no-gpu/, sources in
tests/fixtures/amd/README.md) and in the plugin's "no usable GPU" error."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fake_devices
import pytest
import torch

from rocm_validate.errors import DeviceError
from rocm_validate.platform import devices, offline, tool_failures
from rocm_validate.platform.selection import select_device

NO_GPU = Path(__file__).parent / "fixtures" / "amd" / "no-gpu"

# folder: the tool's own line, then words of the fix
CASES = {
    "kfd-permission-denied-container": (
        "Unable to open /dev/kfd read-write: Permission denied",
        ("render and video groups", "--device=/dev/kfd --device=/dev/dri"),
    ),
    "kfd-invalid-argument-mi300x-rocm6.2.1": (
        "Unable to open /dev/kfd read-write: Invalid argument",
        ("--device=/dev/kfd --device=/dev/dri", "not a bind mount", "dmesg | grep kfd"),
    ),
    "hsa-out-of-resources-rocm6.4": (
        "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.",
        ("render and video group", "amd-smi process"),
    ),
    "amdgpu-not-loaded-rocm6.0": (
        "Driver not initialized (amdgpu not found in modules)",
        ("sudo modprobe amdgpu",),
    ),
    "amdgpu-not-loaded-amd-smi-26.1": (
        "Unable to get devices, driver not initialized (amdgpu not found in modules)",
        ("sudo modprobe amdgpu",),
    ),
    "amd-smi-missing-groups-rocm7.0": (
        "RuntimeError: WARNING: User is missing the following required groups: render, video.",
        ("sudo usermod -aG render,video", "--group-add"),
    ),
    "amd-smi-dri-permission-rocm7.1.1": (
        "Permission needed to access required GPU device node(s):",
        ("sudo usermod -aG render,video", "with sudo"),
    ),
    "rock-not-live-mi50-rocm6.2.4": (
        "ROCk module is NOT live, possibly no GPU devices",
        ("sudo modprobe amdgpu",),
    ),
    "rocm-smi-json-no-amd-gpus-rocm6.3.6": (
        "WARNING: No AMD GPUs specified",
        ("lspci -d 1002:",),
    ),
}


@pytest.mark.parametrize(("folder", "line", "fix"), [(k, *v) for k, v in CASES.items()], ids=CASES)
def test_a_saved_output_that_found_no_gpu_says_why_in_the_tools_own_words(folder, line, fix):
    node = offline.describe_outputs(offline.read_saved_outputs(NO_GPU / folder))
    assert node.devices == ()
    (error,) = node.errors
    assert f'said "{line}' in error
    assert "no agent in the output" not in error and "no GPU line" not in error
    for words in fix:
        assert words in error


def test_a_rocminfo_that_lists_gpus_has_no_failure_to_report():
    text = (Path(__file__).parent / "fixtures" / "amd" / "rocminfo-mi300x-2gpu.txt").read_text()
    assert tool_failures.diagnose("rocminfo", text) is None


def test_the_first_tool_that_says_why_is_the_reason():
    said = {
        "rocminfo": None,  # not on PATH
        "amd-smi": (NO_GPU / "amdgpu-not-loaded-amd-smi-26.1" / "amd-smi-list.txt").read_text(),
    }
    reason = tool_failures.why_no_gpu(lambda command: said.get(command[0]))
    assert reason is not None and reason.tool == "amd-smi"
    assert reason.line.startswith("Unable to get devices, driver not initialized")


def test_a_rocm_build_that_sees_no_gpu_reports_what_rocminfo_said(monkeypatch):
    rocminfo = (NO_GPU / "kfd-permission-denied-container" / "rocminfo.txt").read_text()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", "6.4.43482-0f2d60242")
    monkeypatch.setattr(devices, "tool_output", lambda command: rocminfo if command == ["rocminfo"] else None)
    (cpu,) = devices.discover_devices(env={})
    assert any(
        e.startswith('rocminfo said "Unable to open /dev/kfd read-write: Permission denied"') for e in cpu.errors
    )


def test_the_no_gpu_error_carries_the_tools_reason():
    reason = tool_failures.diagnose(
        "rocminfo", (NO_GPU / "kfd-permission-denied-container" / "rocminfo.txt").read_text()
    )
    assert reason is not None
    cpu = dataclasses.replace(
        fake_devices.cpu(),
        runtime_version="HIP 6.4.43482",
        errors=("torch.cuda: this HIP 6.4.43482 build of torch sees no usable GPU", reason.message()),
    )
    with pytest.raises(
        DeviceError, match=r"no usable GPU was found \(torch.cuda: .*; rocminfo said .*render and video"
    ):
        select_device([cpu], env={})
