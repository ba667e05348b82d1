"""Stand-ins for hardware this project cannot run on here: AMD GPUs (and the H100, for CPU-only CI).

Each device is built the way discovery builds a real one: torch's device properties as PyTorch
reports them on that platform, plus the vendor tool's output from tests/fixtures/amd/, passed
through the same pure `build_gpu_info`. Only the inputs are fake.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocm_validate.platform import amd_tools
from rocm_validate.platform.devices import (
    DeviceInfo,
    StackFacts,
    TorchGpuFacts,
    build_gpu_info,
)

FIXTURES = Path(__file__).parent / "fixtures" / "amd"
ROCM_ENV = {"HIP_VISIBLE_DEVICES": "0"}


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def rocm_stack(runtime: str, archs: tuple[str, ...]) -> StackFacts:
    return StackFacts(
        backend="rocm",
        torch_version="2.9.1+rocm7.0",
        runtime_version=runtime,
        collective_version="2.26.6",
        libraries=(("hipblaslt", "1.0.70000"),),
        visible_archs=archs,
    )


def instinct(amd: amd_tools.AmdGpuFacts, name: str, minor: int, runtime: str) -> DeviceInfo:
    """An MI300-family GPU as ROCm torch reports it, merged with the amd-smi facts."""
    isa = amd.arch or "gfx942"
    torch_facts = TorchGpuFacts(
        index=0,
        name=name,
        major=9,
        minor=minor,
        total_memory=amd.memory_bytes or 0,
        multi_processor_count=amd.compute_units or 0,
        gcn_arch_name=f"{isa}:sramecc+:xnack-",
        l2_cache_size=4 * 1024**2,
        pci_bus_id=amd.bdf,
    )
    return build_gpu_info(torch_facts, rocm_stack(runtime, (isa,)), ROCM_ENV, amd=amd)


def mi300x(partition_file: str = "amd-smi-static-mi300x-rocm6.4.json", index: int = 0) -> DeviceInfo:
    amd = amd_tools.parse_amd_smi_static_json(fixture_text(partition_file))[index]
    return instinct(amd, "AMD Instinct MI300X", 4, "6.4.43482-0f2d60242")


def mi355x() -> DeviceInfo:
    amd = amd_tools.parse_amd_smi_static_json(fixture_text("amd-smi-static-mi355x-rocm7.json"))[0]
    return instinct(amd, "AMD Instinct MI355X", 5, "7.0.51831-a3e329ad8")


def mi250x() -> DeviceInfo:
    """ROCm 5.x torch reported gcnArchName without switches; the tool wrote gfx90a as gfx9010."""
    amd = amd_tools.parse_rocm_smi_json(fixture_text("rocm-smi-showproductname-mi250x.json"))[0]
    torch_facts = TorchGpuFacts(
        index=0,
        name="",
        major=9,
        minor=0,
        total_memory=64 * 1024**3,
        multi_processor_count=110,
        gcn_arch_name="gfx9010",
        l2_cache_size=8 * 1024**2,
    )
    return build_gpu_info(torch_facts, rocm_stack("5.7.31921", ("gfx90a",)), ROCM_ENV, amd=amd)


def h100() -> DeviceInfo:
    torch_facts = TorchGpuFacts(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        major=9,
        minor=0,
        total_memory=85_029_158_912,
        multi_processor_count=132,
        gcn_arch_name="NVIDIA H100 80GB HBM3",  # CUDA builds echo the name here
        l2_cache_size=52_428_800,
        pci_bus_id="0000:18:00.0",
    )
    stack = StackFacts(
        backend="cuda",
        torch_version="2.11.0+cu130",
        runtime_version="13.0",
        collective_version="2.27.7",
        cudnn_attention=True,
        preferred_blas="cublas",
    )
    return build_gpu_info(torch_facts, stack, {"CUDA_VISIBLE_DEVICES": "0"})


def cpu() -> DeviceInfo:
    return DeviceInfo(
        backend="cpu",
        index=None,
        name="Test CPU",
        arch="Test CPU",
        device_key="cpu-test",
        fp8_formats=("e4m3fn", "e5m2"),
        scaled_mm=True,
        attention_backends=("math", "flash"),
        memory_bytes=16 * 1024**3,
        torch_version="2.13.0+cpu",
        sources=("test",),
    )


def discovery_conftest(*devices: DeviceInfo) -> str:
    """Source of a conftest.py that makes discovery return these devices (plus the CPU)."""
    data = json.dumps([d.to_dict() for d in (*devices, cpu())])
    return (
        "import json\n"
        "from rocm_validate.platform.devices import DeviceInfo\n\n"
        "def pytest_rocm_discover_devices(config):\n"
        f"    return [DeviceInfo.from_dict(d) for d in json.loads({data!r})]\n"
    )
