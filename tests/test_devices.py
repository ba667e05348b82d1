"""Device discovery: facts to DeviceInfo, for devices we have (CPU) and fake ones we do not."""

import json
import os
import stat
import sys
from types import SimpleNamespace

import fake_devices
import pytest
import torch

from rocm_validate.errors import DeviceError
from rocm_validate.platform import devices
from rocm_validate.platform.devices import DeviceInfo


def test_mi300x_is_gfx942_with_fnuz_fp8_and_hipblaslt():
    info = fake_devices.mi300x()
    assert (info.backend, info.arch, info.device_key) == ("rocm", "gfx942", "amd-instinct-mi300x-gfx942")
    assert info.fp8_formats == ("e4m3fnuz", "e5m2fnuz")
    assert info.scaled_mm and info.preferred_blas == "hipblaslt"
    assert info.attention_backends == ("math", "flash", "mem_efficient")
    assert dict(info.arch_features) == {"sramecc": True, "xnack": False}
    assert info.last_level_cache_bytes == 256 * 1024**2  # Infinity Cache, from amd-smi
    assert (info.compute_partition, info.memory_partition) == ("SPX", "NPS1")
    assert info.collective_library == "rccl"


def test_mi355x_is_gfx950_with_ocp_fp8():
    info = fake_devices.mi355x()
    assert (info.arch, info.device_key) == ("gfx950", "amd-instinct-mi355x-gfx950")
    assert info.fp8_formats == ("e4m3fn", "e5m2")
    assert info.scaled_mm and info.preferred_blas == "hipblaslt"


def test_mi250x_written_as_gfx9010_is_gfx90a_without_fp8():
    info = fake_devices.mi250x()
    assert info.arch == "gfx90a"
    assert info.name == "AMD INSTINCT MI250X"  # torch gave no name; the tool's market name is used
    assert info.fp8_formats == () and not info.scaled_mm


def test_a_cpx_partition_is_its_own_device_key():
    info = fake_devices.mi300x("amd-smi-static-mi300x-cpx-nps4-64dev.json", index=9)
    assert info.device_key == "amd-instinct-mi300x-gfx942-cpx-nps4"
    assert info.compute_units == 38


def test_h100_is_sm90_with_ocp_fp8_and_cudnn_attention():
    info = fake_devices.h100()
    assert (info.arch, info.device_key) == ("sm_90", "nvidia-h100-80gb-hbm3-sm90")
    assert info.fp8_formats == ("e4m3fn", "e5m2")
    assert "cudnn" in info.attention_backends and info.collective_library == "nccl"
    assert info.arch_features == ()  # gcnArchName is only the name on CUDA builds


def test_device_info_survives_a_json_round_trip():
    info = fake_devices.mi300x()
    assert DeviceInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info


def test_the_cpu_of_this_machine_is_discovered_with_ocp_fp8():
    found = devices.discover_devices(env={})
    cpu = found[-1]
    assert cpu.backend == "cpu" and cpu.index is None
    assert cpu.device_key.startswith("cpu-")
    assert cpu.fp8_formats == ("e4m3fn", "e5m2")
    assert cpu.torch_version == torch.__version__


def test_visibility_variables_in_force_are_recorded():
    env = {"HIP_VISIBLE_DEVICES": "2,3", "HSA_OVERRIDE_GFX_VERSION": "9.4.2", "PATH": "/bin"}
    assert devices.visibility(env) == (("HIP_VISIBLE_DEVICES", "2,3"), ("HSA_OVERRIDE_GFX_VERSION", "9.4.2"))


def test_selecting_a_missing_gpu_names_what_exists():
    with pytest.raises(DeviceError, match=r"no such GPU; found 0 \(AMD Instinct MI300X\)"):
        devices.select_device([fake_devices.mi300x(), fake_devices.cpu()], 3)


def test_automatic_selection_prefers_the_first_gpu_then_the_cpu():
    assert devices.select_device([fake_devices.h100(), fake_devices.cpu()], None).backend == "cuda"
    assert devices.select_device([fake_devices.cpu()], None).backend == "cpu"
    assert devices.select_device([fake_devices.h100(), fake_devices.cpu()], "cpu").backend == "cpu"


# --- the discovery orchestration, with torch's device queries answered as on a ROCm machine ---


def _fake_rocm_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    props = SimpleNamespace(
        name="AMD Instinct MI300X", major=9, minor=4, total_memory=206141652992, multi_processor_count=304,
        gcnArchName="gfx942:sramecc+:xnack-", L2_cache_size=4194304, pci_bus_id=0x22, pci_device_id=0, pci_domain_id=0,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.version, "hip", "6.4.43482-0f2d60242")
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 22, 3))


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """A folder on PATH where tests put stand-in amd-smi / rocminfo executables."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def install(name: str, output_file: str) -> None:
        script = bin_dir / name
        source = fake_devices.FIXTURES / output_file
        script.write_text(f"#!/bin/sh\ncat '{source}'\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)

    return install


@pytest.fixture
def broken_amdsmi(tmp_path, monkeypatch):
    """An amdsmi package whose import fails the way a mismatched native library makes it fail."""
    package = tmp_path / "site" / "amdsmi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise KeyError('AMDSMI_LIB_VERSION_MAJOR')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)


def test_rocm_discovery_merges_amd_smi_and_rocminfo_facts(monkeypatch, fake_tools, broken_amdsmi):
    _fake_rocm_torch(monkeypatch)
    fake_tools("amd-smi", "amd-smi-static-mi300x-rocm6.4.json")
    fake_tools("rocminfo", "rocminfo-mi300x-1gpu.txt")
    gpu = devices.discover_devices(env={"HIP_VISIBLE_DEVICES": "1"})[0]
    assert (gpu.backend, gpu.arch, gpu.device_key) == ("rocm", "gfx942", "amd-instinct-mi300x-gfx942")
    assert gpu.pci_bus_id == "0000:22:00.0" and gpu.driver_version == "6.8.5"  # matched GPU 1 by address
    assert gpu.fp8_formats == ("e4m3fnuz", "e5m2fnuz")
    assert gpu.collective_version == "2.22.3"
    assert gpu.visibility == (("HIP_VISIBLE_DEVICES", "1"),)
    assert "amdsmi: ImportError: installed amdsmi package: KeyError: 'AMDSMI_LIB_VERSION_MAJOR'" in gpu.errors


def test_rocm_discovery_without_any_amd_tool_still_describes_the_gpu(monkeypatch, tmp_path, broken_amdsmi):
    _fake_rocm_torch(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))  # no amd-smi, no rocminfo
    gpu = devices.discover_devices(env={})[0]
    assert gpu.arch == "gfx942" and gpu.fp8_formats == ("e4m3fnuz", "e5m2fnuz")
    assert gpu.last_level_cache_bytes == 256 * 1024**2  # from the per-arch table
    joined = " | ".join(gpu.errors)
    assert "amd-smi: FileNotFoundError" in joined and "rocminfo: FileNotFoundError" in joined


def test_a_probe_that_raises_anything_is_recorded_not_raised(monkeypatch):
    _fake_rocm_torch(monkeypatch)

    def explode(index):
        raise RuntimeError("HIP error: invalid device ordinal")

    monkeypatch.setattr(torch.cuda, "get_device_properties", explode)
    found = devices.discover_devices(env={})
    assert [d.backend for d in found] == ["cpu"]
    assert any("invalid device ordinal" in e for e in found[0].errors)
