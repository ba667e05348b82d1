"""Capability probes: `torch._scaled_mm` tried on the device once per run, a refusal of any type a skip."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.platform import capabilities, probes
from rocm_validate.platform.devices import DeviceInfo


@pytest.fixture(autouse=True)
def fresh_probe_cache():
    probes._cached_probe.cache_clear()
    yield
    probes._cached_probe.cache_clear()


def mi300x(runtime: str = "6.4.43482-0f2d60242", torch_version: str = "2.7.1+rocm6.4") -> DeviceInfo:
    return DeviceInfo(
        backend="rocm",
        index=0,
        name="AMD Instinct MI300X",
        arch="gfx942",
        device_key="k",
        runtime_version=runtime,
        torch_version=torch_version,
        fp8_formats=capabilities.fp8_formats("rocm", "gfx942"),
        scaled_mm=capabilities.scaled_mm_supported("rocm", "gfx942", runtime),
    )


@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_the_probe_runs_a_16_cubed_scaled_mm_and_reports_support(scaling):
    assert probes.run_scaled_mm_probe(torch, "cpu", "e4m3fn", scaling) == probes.ProbeResult(True)


@pytest.mark.parametrize("error", [ValueError, RuntimeError, NotImplementedError])
def test_a_refusal_of_any_exception_type_is_reported_not_raised(monkeypatch, error):
    def refuse(*args, **kwargs):
        raise error("Only rowwise scaling with bfloat16 output is supported on ROCm\nC++ frames follow")

    monkeypatch.setattr(torch, "_scaled_mm", refuse)
    result = probes.run_scaled_mm_probe(torch, "cpu", "e4m3fn", "rowwise")
    assert result == probes.ProbeResult(
        False, f"{error.__name__}: Only rowwise scaling with bfloat16 output is supported on ROCm"
    )


def test_a_device_this_process_does_not_drive_is_not_probed():
    assert not torch.cuda.is_available()  # this machine: the MI300X below is a description, not a device
    assert probes.scaled_mm_probe(mi300x(), "rowwise") is None


def _torch_with(monkeypatch, gcn_arch: str) -> None:
    """torch as a ROCm build with one GPU of `gcn_arch` answers it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(gcnArchName=gcn_arch))
    monkeypatch.setattr(torch.version, "hip", "6.4.43482-0f2d60242")


def test_the_probe_runs_once_per_device_and_scaling(monkeypatch):
    _torch_with(monkeypatch, "gfx942:sramecc+:xnack-")
    calls = []

    def probe(torch_module, torch_device, fp8_format, scaling):
        calls.append((torch_device, fp8_format, scaling))
        return probes.ProbeResult(True)

    monkeypatch.setattr(probes, "run_scaled_mm_probe", probe)
    for _ in range(3):
        assert probes.scaled_mm_probe(mi300x(), "rowwise") == probes.ProbeResult(True)
    probes.scaled_mm_probe(mi300x(), "tensorwise")
    assert calls == [("cuda:0", "e4m3fnuz", "rowwise"), ("cuda:0", "e4m3fnuz", "tensorwise")]


def test_a_gpu_of_another_arch_at_that_index_is_not_the_device_described(monkeypatch):
    _torch_with(monkeypatch, "gfx950:sramecc+:xnack-")
    assert probes.scaled_mm_probe(mi300x(), "rowwise") is None


def test_a_refused_probe_is_a_skip_that_says_need_and_found(monkeypatch):
    refused = probes.ProbeResult(False, "ValueError: Invalid scaling configuration")
    monkeypatch.setattr(probes, "scaled_mm_probe", lambda device, scaling: refused)
    assert scaled_mm_skip_reason(mi300x(), "rowwise") == (
        "needs row-wise torch._scaled_mm, found gfx942 refuses it "
        "(ValueError: Invalid scaling configuration; torch 2.7.1+rocm6.4, runtime 6.4.43482-0f2d60242)"
    )


def test_the_devices_answer_beats_the_version_rule(monkeypatch):
    old_rocm = mi300x(runtime="6.3.42131-fa1d09cbd")  # the rule says no row-wise before ROCm 6.4
    assert "row-wise" in scaled_mm_skip_reason(old_rocm, "rowwise")
    monkeypatch.setattr(probes, "scaled_mm_probe", lambda device, scaling: probes.ProbeResult(True))
    assert scaled_mm_skip_reason(old_rocm, "rowwise") is None
    assert "float32 output" in scaled_mm_skip_reason(old_rocm, "rowwise", "float32")  # the output rule still holds
