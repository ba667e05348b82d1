"""Device discovery: facts to DeviceInfo, for devices we have (CPU) and fake ones we do not."""

import dataclasses
import json
import os
import stat
import sys
from types import SimpleNamespace

import fake_devices
import pytest
import torch

from rocm_validate.errors import DeviceError
from rocm_validate.platform import amd_tools, devices, partitions
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.platform.selection import DeviceSelection, select_device

CPU = DeviceSelection("cpu")


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
    # torch gave no name; the tool's 'AMD INSTINCT MI250X', its device ID 0x740c and 110 CUs name the product
    assert info.name == "AMD Instinct MI250X"
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
        select_device([fake_devices.mi300x(), fake_devices.cpu()], DeviceSelection.parse("3"))


def _broken_gpu_build_cpu(errors: tuple[str, ...] = ()) -> DeviceInfo:
    """The CPU as discovery describes it under a CUDA build of torch whose GPU is unusable."""
    return dataclasses.replace(fake_devices.cpu(), runtime_version="CUDA 13.0", errors=errors)


def test_a_gpu_build_with_no_usable_gpu_never_falls_back_to_the_cpu():
    cpu = _broken_gpu_build_cpu(("torch.cuda: RuntimeError: invalid device ordinal",))
    with pytest.raises(DeviceError) as error:
        select_device([cpu], env={})
    assert str(error.value) == (
        "this torch is a GPU build (CUDA 13.0), but no usable GPU was found (torch.cuda: RuntimeError: invalid device "
        "ordinal). Fix the driver, the container's device access or the visibility variables, or validate the CPU "
        "on purpose with --rocm-device=cpu"
    )


def test_asking_for_the_cpu_on_purpose_validates_it_whatever_the_build():
    assert select_device([_broken_gpu_build_cpu()], CPU, env={"CUDA_VISIBLE_DEVICES": "0"}).backend == "cpu"


@pytest.mark.parametrize(
    "wanted, source, env, named",
    [
        ("auto", "--rocm-device", {"HIP_VISIBLE_DEVICES": "0,1"}, "HIP_VISIBLE_DEVICES=0,1 is set"),
        ("auto", "--rocm-device", {"ROCR_VISIBLE_DEVICES": "GPU-abc"}, "ROCR_VISIBLE_DEVICES=GPU-abc is set"),
        ("2", "ROCM_VALIDATE_DEVICE (environment)", {}, "ROCM_VALIDATE_DEVICE=2 names a GPU"),
        ("0", "rocm_device (ini)", {}, "rocm_device=0 names a GPU"),
    ],
)
def test_the_device_error_names_the_option_or_variable_the_user_set(wanted, source, env, named):
    with pytest.raises(
        DeviceError, match=f"^{named}, but no usable GPU was found \\(torch 2.13.0\\+cpu is a CPU-only build\\)"
    ):
        select_device([fake_devices.cpu()], DeviceSelection.parse(wanted, source), env)


def test_a_cpu_only_build_with_nothing_asking_for_a_gpu_validates_the_cpu():
    assert select_device([fake_devices.cpu()], env={"PATH": "/bin"}).backend == "cpu"


def test_automatic_selection_prefers_the_first_gpu_then_the_cpu():
    assert select_device([fake_devices.h100(), fake_devices.cpu()]).backend == "cuda"
    assert select_device([fake_devices.cpu()]).backend == "cpu"
    assert select_device([fake_devices.h100(), fake_devices.cpu()], CPU).backend == "cpu"


# --- the discovery orchestration, with torch's device queries answered as on a ROCm machine ---


def _fake_rocm_torch(monkeypatch: pytest.MonkeyPatch, compute_units: int = 304) -> None:
    props = SimpleNamespace(
        name="AMD Instinct MI300X",
        major=9,
        minor=4,
        total_memory=206141652992,
        multi_processor_count=compute_units,
        gcnArchName="gfx942:sramecc+:xnack-",
        L2_cache_size=4194304,
        pci_bus_id=0x22,
        pci_device_id=0,
        pci_domain_id=0,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.version, "hip", "6.4.43482-0f2d60242")
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 22, 3))


@pytest.fixture(autouse=True)
def sysfs(tmp_path, monkeypatch):
    """An empty /sys/bus/pci/devices, so no test reads this machine's; tests add partition files."""
    root = tmp_path / "sys-bus-pci-devices"
    root.mkdir()
    monkeypatch.setattr(partitions, "SYSFS_PCI_DEVICES", root)

    def write(bdf: str, compute: str, memory: str) -> None:
        (root / bdf).mkdir()
        (root / bdf / "current_compute_partition").write_text(compute + "\n")
        (root / bdf / "current_memory_partition").write_text(memory + "\n")

    return write


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """A folder on PATH where tests put stand-in amd-smi / rocminfo executables. `refusing`: an
    argument the stand-in rejects the way an older release rejects a flag it does not know."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def install(name: str, output_file: str, refusing: str = "") -> None:
        script = bin_dir / name
        source = fake_devices.FIXTURES / output_file
        refuse = (
            f'case " $* " in *" {refusing} "*) echo "{name}: error: unrecognized arguments: {refusing}" >&2; exit 2;; esac\n'
            if refusing
            else ""
        )
        script.write_text(f"#!/bin/sh\n{refuse}cat '{source}'\n")
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
    fake_tools("rocminfo", "rocminfo-mi300x-2gpu.txt")
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


def test_an_amd_smi_that_refuses_a_section_flag_is_asked_again_without_them(monkeypatch, fake_tools, broken_amdsmi):
    _fake_rocm_torch(monkeypatch)
    fake_tools("amd-smi", "amd-smi-static-mi300x-rocm6.0.json", refusing="--clock")  # ROCm 6.0 has no --clock
    fake_tools("rocminfo", "rocminfo-mi300x-2gpu.txt")
    gpu = devices.discover_devices(env={})[0]
    assert (gpu.driver_version, gpu.compute_partition, gpu.compute_units) == ("6.3.6", "SPX", 304)
    assert "amd-smi static --json+rocminfo" in gpu.sources
    assert not any(e.startswith("amd-smi:") for e in gpu.errors), gpu.errors


def test_without_vendor_tools_the_partition_modes_come_from_sysfs(monkeypatch, tmp_path, broken_amdsmi, sysfs):
    _fake_rocm_torch(monkeypatch, compute_units=38)
    monkeypatch.setenv("PATH", str(tmp_path))  # no amd-smi, no rocminfo
    sysfs("0000:22:00.0", "CPX", "NPS4")
    gpu = devices.discover_devices(env={})[0]
    assert (gpu.compute_partition, gpu.memory_partition, gpu.partition_source) == ("CPX", "NPS4", "sysfs")
    assert gpu.device_key == "amd-instinct-mi300x-gfx942-cpx-nps4" and "sysfs" in gpu.sources


def test_without_tools_or_sysfs_the_compute_mode_is_inferred_from_the_cu_count_and_said_so(
    monkeypatch, tmp_path, broken_amdsmi
):
    _fake_rocm_torch(monkeypatch, compute_units=38)
    monkeypatch.setenv("PATH", str(tmp_path))
    gpu = devices.discover_devices(env={})[0]
    assert (gpu.compute_partition, gpu.memory_partition) == ("CPX", None)
    assert gpu.partition_source == "inferred from 38 of 304 CUs (AMD Instinct MI300X)"
    assert gpu.device_key == "amd-instinct-mi300x-gfx942-cpx"  # never the SPX package's key


def test_a_cut_down_part_is_not_taken_for_a_partition():
    info = fake_devices.mi300x()
    torch_facts = devices.TorchGpuFacts(
        index=0,
        name="AMD Instinct MI308X OAM",
        major=9,
        minor=4,
        total_memory=info.memory_bytes,
        multi_processor_count=80,
        gcn_arch_name="gfx942:sramecc+:xnack-",
    )
    gpu = devices.build_gpu_info(torch_facts, fake_devices.rocm_stack("6.4.1", ("gfx942",)), {})
    assert (gpu.compute_partition, gpu.partition_source, gpu.device_key) == (None, None, "amd-instinct-mi308x-gfx942")
    assert "amd-instinct-mi308x-oam-gfx942" in gpu.key_aliases  # the key the board name used to make


def test_library_choice_variables_are_recorded_with_the_visibility_variables():
    env = {
        "ROCR_VISIBLE_DEVICES": "0,1",
        "TORCH_BLAS_PREFER_HIPBLASLT": "0",
        "TORCH_ROCM_FA_PREFER_CK": "1",
        "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1",
        "HOME": "/root",
    }
    assert dict(devices.visibility(env)) == {k: v for k, v in env.items() if k != "HOME"}


def test_the_blas_and_attention_fallbacks_follow_the_variables_when_torch_does_not_say():
    facts = devices.TorchGpuFacts(
        index=0,
        name="AMD Instinct MI300X",
        major=9,
        minor=4,
        total_memory=1,
        multi_processor_count=304,
        gcn_arch_name="gfx942:sramecc+:xnack-",
    )
    stack = fake_devices.rocm_stack("6.4.1", ("gfx942",))
    plain = devices.build_gpu_info(facts, stack, {})
    steered = devices.build_gpu_info(facts, stack, {"TORCH_BLAS_PREFER_HIPBLASLT": "0", "TORCH_ROCM_FA_PREFER_CK": "1"})
    assert (plain.preferred_blas, plain.attention_library) == ("hipblaslt", "aotriton")
    assert (steered.preferred_blas, steered.attention_library) == ("rocblas", "ck")


def test_the_blas_and_attention_libraries_torch_reports_are_read_back(monkeypatch, tmp_path, broken_amdsmi):
    _fake_rocm_torch(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(torch.backends.cuda, "preferred_blas_library", lambda: torch._C._BlasBackend.Cublaslt)
    monkeypatch.setattr(torch.backends.cuda, "preferred_rocm_fa_library", lambda: torch._C._ROCmFABackend.Ck)
    gpu = devices.discover_devices(env={"TORCH_BLAS_PREFER_HIPBLASLT": "0"})[0]
    assert (gpu.preferred_blas, gpu.attention_library) == ("hipblaslt", "ck")  # torch's answer beats the table


_ROCM_AMDSMI = """
class AmdSmiClkType:
    GFX = "GFX"

def amdsmi_init(): pass
def amdsmi_shut_down(): pass
def amdsmi_get_processor_handles(): return ["h0"]
def amdsmi_get_gpu_device_bdf(h): return "0000:22:00.0"
def amdsmi_get_gpu_asic_info(h):
    return {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1", "num_compute_units": 38, "target_graphics_version": "gfx942"}
def amdsmi_get_gpu_driver_info(h): return {"driver_name": "amdgpu", "driver_version": "6.12.12"}
def amdsmi_get_gpu_vram_info(h): return {"vram_size": 24574}
def amdsmi_get_gpu_cache_info(h): raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
def amdsmi_get_clock_info(h, kind): return {"clk": 132, "max_clk": 2100}
def amdsmi_get_gpu_compute_partition(h): return "CPX"
def amdsmi_get_gpu_memory_partition(h): return "NPS4"
"""


def test_amdsmi_from_rocms_own_copy_is_used_and_named_in_the_sources(monkeypatch, tmp_path):
    _fake_rocm_torch(monkeypatch, compute_units=38)
    monkeypatch.setenv("PATH", str(tmp_path))
    package = tmp_path / "rocm" / "share" / "amd_smi" / "amdsmi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_ROCM_AMDSMI)
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    try:
        gpu = devices.discover_devices(env={"ROCM_PATH": str(tmp_path / "rocm")})[0]
    finally:
        sys.modules.pop("amdsmi", None)
    assert f"amdsmi ({tmp_path / 'rocm' / 'share' / 'amd_smi'})" in gpu.sources
    assert (gpu.compute_partition, gpu.memory_partition, gpu.driver_version) == ("CPX", "NPS4", "6.12.12")
    assert gpu.partition_source.startswith("amdsmi (")
    assert (
        "amdsmi: GPU 0: cache: RuntimeError: AMDSMI_STATUS_NOT_SUPPORTED" in gpu.errors
    )  # refused, recorded, the rest kept


def test_what_torch_printed_is_never_marked_derived_even_where_the_tool_derived_it():
    amd = amd_tools.AmdGpuFacts(
        "amd-smi list", market_name="AMD Instinct MI300X", arch="gfx942", device_id=0x74A1, derived=("name", "arch")
    )
    gpu = fake_devices.instinct(amd, "AMD Instinct MI300X", 4, "7.0.51831")
    assert not any(source.startswith(devices.DERIVED) for source in gpu.sources)


def test_a_device_whose_facts_no_one_printed_says_which_the_product_table_filled():
    amd = amd_tools.AmdGpuFacts("amd-smi list", device_id=0x74A1, compute_partition="CPX", partition_source="amd-smi")
    torch_facts = devices.TorchGpuFacts(index=0, name="", major=0, minor=0, total_memory=0, multi_processor_count=0)
    gpu = devices.build_gpu_info(torch_facts, fake_devices.rocm_stack("7.0.51831", ()), {}, amd=amd)
    assert (gpu.name, gpu.arch, gpu.compute_units, gpu.memory_bytes) == (
        "AMD Instinct MI300X",
        "gfx942",
        38,
        24 * 1024**3,
    )
    assert gpu.sources[-1] == "derived from the product table (AMD Instinct MI300X): name, arch, compute units, memory"
