"""Device discovery: one frozen `DeviceInfo` per GPU (and one for the CPU), never crashing.

Sources, in order: torch (always); for ROCm the amdsmi package (ROCm's own copy first), then
`amd-smi static --json`, then `rocminfo`, and the partition modes from sysfs where no tool gave
them; for CUDA nvidia-ml-py. A probe that fails leaves its message in `errors`. Facts become
decisions (fp8 formats, attention backends, BLAS default, partition mode, device key) through
the pure functions of `arch`, `capabilities` and `partitions`; `build_gpu_info` is pure too and
unit-tested with the properties of devices we do not have. The same parsers describe a node
offline from saved tool outputs (`offline.py`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rocm_validate.platform import (
    amd_tools,
    amdsmi_import,
    arch,
    capabilities,
    identity,
    partitions,
    peaks,
    tool_failures,
)
from rocm_validate.platform.amd_tools import AmdGpuFacts
from rocm_validate.platform.device_info import DeviceInfo
from rocm_validate.platform.probing import ProbeErrors
from rocm_validate.text import clip

__all__ = ["VISIBILITY_VARIABLES", "DeviceInfo", "discover_devices"]

# The variables that decide which GPUs a process sees and which libraries PyTorch picks on them;
# each one set is recorded with the device (`visibility`) and printed in the run's header.
VISIBILITY_VARIABLES = (
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HSA_OVERRIDE_GFX_VERSION",
    "TORCH_BLAS_PREFER_HIPBLASLT",
    "TORCH_ROCM_FA_PREFER_CK",
    "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL",
)
_SUBPROCESS_TIMEOUT_S = 20


@dataclass(frozen=True)
class TorchGpuFacts:
    """What `torch.cuda.get_device_properties` says about one GPU (on ROCm or CUDA)."""

    index: int
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    gcn_arch_name: str = ""
    l2_cache_size: int | None = None
    clock_rate_khz: int | None = None
    memory_clock_rate_khz: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class StackFacts:
    """Software facts shared by every GPU of the process."""

    backend: str
    torch_version: str
    runtime_version: str | None
    driver_version: str | None = None
    collective_version: str | None = None
    libraries: tuple[tuple[str, str], ...] = ()
    flash_compiled: bool = True
    mem_efficient_compiled: bool = True
    cudnn_attention: bool = False
    preferred_blas: str | None = None  # what torch reports, when it reports it
    attention_library: str | None = None  # torch's preferred_rocm_fa_library, when it has one
    visible_archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class NvmlFacts:
    """What nvidia-ml-py says about one GPU."""

    driver_version: str | None = None
    max_clock_mhz: int | None = None
    max_memory_clock_mhz: int | None = None
    pci_bus_id: str | None = None


def visibility(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The visibility and library-choice variables set in this environment."""
    return tuple((name, env[name]) for name in VISIBILITY_VARIABLES if name in env)


def gpu_arch(backend: str, facts: TorchGpuFacts) -> arch.GcnArch:
    """ISA name and feature switches; gcnArchName is only meaningful on ROCm builds."""
    if backend == "rocm" and facts.gcn_arch_name:
        return arch.parse_gcn_arch(facts.gcn_arch_name)
    return arch.GcnArch(arch.sm_arch(facts.major, facts.minor), ())


def build_gpu_info(
    facts: TorchGpuFacts,
    stack: StackFacts,
    env: Mapping[str, str],
    amd: AmdGpuFacts | None = None,
    nvml: NvmlFacts | None = None,
    errors: Iterable[str] = (),
) -> DeviceInfo:
    """Combine torch's, the vendor tool's and the stack's facts into one DeviceInfo (pure)."""
    backend = stack.backend
    isa = gpu_arch(backend, facts)
    gpu_arch_name = isa.name
    if backend == "rocm" and amd is not None and amd.arch and not gpu_arch_name.startswith("gfx"):
        gpu_arch_name = amd.arch
    features = isa.features or (amd.arch_features if amd else ())
    name = facts.name.strip()
    if (
        amd is not None
        and amd.market_name
        and (not name or name.lower().startswith(("device ", "amd radeon graphics")))
    ):
        name = amd.market_name
    compute_units = facts.multi_processor_count or (amd.compute_units if amd else None)
    who = product_identity(backend, name, gpu_arch_name, compute_units, amd)
    tool_name = name
    if who is not None and (who.product is not None or not name):
        name = who.name or name or "AMD GPU"
    if who is not None and who.arch and not gpu_arch_name.startswith("gfx"):
        gpu_arch_name = who.arch
    derived = _printed_by_none(facts, isa, amd, gpu_arch_name, who)
    partition = partition_mode(backend, name, gpu_arch_name, compute_units, amd)
    compute_partition = partition.compute if partition else None
    memory_partition = partition.memory if partition else None
    product = who.product if who is not None else None
    count = _partitions_of(name, gpu_arch_name, compute_partition)
    notes = [who.problem] if who is not None and who.problem else []
    if product is not None and not compute_units and product.compute_units and count:
        compute_units = product.compute_units // count
        derived.append("compute units")
    memory = facts.total_memory or (amd.memory_bytes if amd else None)
    if not facts.total_memory and product is not None and count:
        memory, note = _partition_memory(product, count, memory, compute_partition, amd.source if amd else "the tool")
        notes += [note] if note else []
    if not memory and product is not None and product.memory_gib and count:
        memory = int(product.memory_gib * 1024**3) // count
        derived.append("memory")
    if product is not None:
        key = identity.product_key(product, gpu_arch_name, compute_partition, memory_partition)
        aliases = identity.legacy_keys(product, gpu_arch_name, compute_partition, memory_partition, (tool_name,))
    else:
        key, aliases = arch.device_key(backend, name, gpu_arch_name, compute_partition, memory_partition), ()
    sources = ["torch"]
    if amd is not None:
        sources.append(amd.source)
    if nvml is not None:
        sources.append("nvidia-ml-py")
    if product is not None and derived:
        sources.append(derived_source(product, derived))
    preferred = stack.preferred_blas
    attention_library = stack.attention_library
    if backend == "rocm":
        archs = list(stack.visible_archs) or [gpu_arch_name]
        preferred = preferred or capabilities.default_rocm_blas(
            archs, stack.runtime_version, env.get("TORCH_BLAS_PREFER_HIPBLASLT")
        )
        attention_library = attention_library or capabilities.default_rocm_attention_library(
            gpu_arch_name, env.get("TORCH_ROCM_FA_PREFER_CK")
        )
    return DeviceInfo(
        backend=backend,
        index=facts.index,
        name=name,
        arch=gpu_arch_name,
        device_key=key,
        key_aliases=aliases,
        arch_features=features,
        compute_units=compute_units,
        memory_bytes=memory,
        l2_cache_bytes=facts.l2_cache_size or (amd.l2_cache_bytes if amd else None),
        last_level_cache_bytes=_last_level_cache(backend, gpu_arch_name, facts, amd),
        max_clock_mhz=_first(
            amd.max_clock_mhz if amd else None,
            nvml.max_clock_mhz if nvml else None,
            _khz_to_mhz(facts.clock_rate_khz),
        ),
        max_memory_clock_mhz=_first(
            amd.max_memory_clock_mhz if amd else None,
            nvml.max_memory_clock_mhz if nvml else None,
            _khz_to_mhz(facts.memory_clock_rate_khz),
        ),
        driver_version=_first(
            amd.driver_version if amd else None, nvml.driver_version if nvml else None, stack.driver_version
        ),
        runtime_version=stack.runtime_version,
        torch_version=stack.torch_version,
        collective_library="rccl" if backend == "rocm" else "nccl",
        collective_version=stack.collective_version,
        libraries=stack.libraries,
        compute_partition=compute_partition,
        memory_partition=memory_partition,
        partition_source=partition.source if partition else None,
        visibility=visibility(env),
        fp8_formats=capabilities.fp8_formats(backend, gpu_arch_name),
        scaled_mm=capabilities.scaled_mm_supported(backend, gpu_arch_name, stack.runtime_version),
        attention_backends=capabilities.attention_backends(
            backend, gpu_arch_name, stack.flash_compiled, stack.mem_efficient_compiled, stack.cudnn_attention
        ),
        attention_library=attention_library,
        preferred_blas=preferred,
        pci_bus_id=_first(amd_tools.normalize_bdf(facts.pci_bus_id), amd.bdf if amd else None),
        uuid=facts.uuid or (amd.uuid if amd else None),
        sources=tuple(sources),
        errors=(*errors, *(amd.errors if amd else ()), *notes),
    )


DERIVED = "derived from the product table"


def _printed_by_none(
    facts: TorchGpuFacts, isa: arch.GcnArch, amd: AmdGpuFacts | None, gpu_arch: str, who: identity.Identity | None
) -> list[str]:
    """The name and ISA of a device that neither torch nor a tool printed: the product table's."""
    if who is None:
        return []
    tool_name = amd is not None and amd.market_name and "name" not in amd.derived
    tool_arch = amd is not None and amd.arch and "arch" not in amd.derived
    derived = ["name"] if who.product is not None and not facts.name.strip() and not tool_name else []
    if gpu_arch.startswith("gfx") and not isa.name.startswith("gfx") and not tool_arch:
        derived.append("arch")
    return derived


def derived_source(product: identity.Product, facts: list[str]) -> str:
    """How a device says which of its facts no tool printed and the product table filled in:
    'derived from the product table (AMD Instinct MI300X): compute units, memory'."""
    return f"{DERIVED} ({product.name}): {', '.join(facts)}"


def product_identity(
    backend: str, name: str, gpu_arch: str, compute_units: int | None, amd: AmdGpuFacts | None
) -> identity.Identity | None:
    """Which product an AMD GPU is (`identity.identify`): its PCI device ID where a tool printed
    one, the CU count where the ID covers several products, the name last; None off ROCm."""
    if backend != "rocm":
        return None
    device_id = amd.device_id if amd else None
    subsystem = amd.subsystem_id if amd else None
    return identity.identify(
        device_id, name, gpu_arch if gpu_arch.startswith("gfx") else None, compute_units, subsystem
    )


def _partition_memory(
    product: identity.Product, count: int, memory: int | None, mode: str | None, source: str
) -> tuple[int | None, str | None]:
    """A partition's memory where the tool printed its package's for it, and the note that says so."""
    share = identity.partition_memory(product, count, memory)
    if not share or not memory or share == memory:
        return memory, None
    return share, (
        f"{source} printed the whole package's memory ({memory / 1024**3:.1f} GiB) for each of the {count} {mode} "
        f"partitions (ROCm/ROCm#4750); each partition's share, {share / 1024**3:.1f} GiB, is used"
    )


def _partitions_of(name: str, gpu_arch: str, compute_partition: str | None) -> int | None:
    """How many devices the package shows in this compute mode (8 for an MI300X in CPX; 1 for a
    part without partition modes); None where a partitionable part's mode is not known."""
    row = peaks.find_peaks(name, gpu_arch)
    if compute_partition is None:
        return 1 if row is None or row.xcds == 1 else None
    return peaks.partition_count(row, compute_partition) if row is not None else None


def partition_mode(
    backend: str, name: str, gpu_arch: str, compute_units: int | None, amd: AmdGpuFacts | None
) -> partitions.PartitionMode | None:
    """The modes a vendor tool (or sysfs) gave, else the compute mode the CU count implies,
    said as inferred; None where neither applies (not an MI300-class package)."""
    if amd is not None and (amd.compute_partition or amd.memory_partition):
        return partitions.PartitionMode(amd.compute_partition, amd.memory_partition, amd.partition_source or amd.source)
    if backend != "rocm":
        return None
    return partitions.infer_from_compute_units(name, gpu_arch, compute_units)


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "", 0)), None)


def _khz_to_mhz(khz: int | None) -> int | None:
    return None if not khz else round(khz / 1000)


def _last_level_cache(backend: str, gpu_arch: str, facts: TorchGpuFacts, amd: AmdGpuFacts | None) -> int | None:
    """Infinity Cache from the tool, else from the per-arch table; on NVIDIA the L2 is last."""
    if amd is not None and amd.last_level_cache_bytes and amd.last_level_cache_bytes != amd.l2_cache_bytes:
        return amd.last_level_cache_bytes
    return arch.infinity_cache_bytes(backend, gpu_arch) or facts.l2_cache_size or (amd.l2_cache_bytes if amd else None)


# --- probes: each reads one source and raises freely; ProbeErrors.run records failures ------


def _torch_gpu_facts(torch: Any, index: int) -> TorchGpuFacts:
    props = torch.cuda.get_device_properties(index)
    pci = None
    if getattr(props, "pci_bus_id", None) is not None:
        pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
    uuid = getattr(props, "uuid", None)
    return TorchGpuFacts(
        index=index,
        name=str(props.name),
        major=int(props.major),
        minor=int(props.minor),
        total_memory=int(props.total_memory),
        multi_processor_count=int(props.multi_processor_count),
        gcn_arch_name=str(getattr(props, "gcnArchName", "") or ""),
        l2_cache_size=getattr(props, "L2_cache_size", None),
        clock_rate_khz=getattr(props, "clock_rate", None),
        memory_clock_rate_khz=getattr(props, "memory_clock_rate", None),
        pci_bus_id=pci,
        uuid=str(uuid) if uuid is not None else None,
    )


def _package_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _shared_library_version(stem: str, folders: Iterable[Path]) -> str | None:
    """'libhipblaslt' in torch/lib or $ROCM_PATH/lib -> '0.12.60300' from the versioned file name."""
    pattern = re.compile(rf"^{re.escape(stem)}\.so\.(\d+(?:\.\d+)+)$")
    for folder in folders:
        if not folder.is_dir():
            continue
        versions = sorted(m.group(1) for m in (pattern.match(p.name) for p in folder.iterdir()) if m)
        if versions:
            return versions[-1]
    return None


def _library_versions(torch: Any, backend: str, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str | None] = {}
    torch_lib = Path(torch.__file__).parent / "lib"
    if backend == "rocm":
        rocm_lib = Path(env.get("ROCM_PATH", "/opt/rocm")) / "lib"
        for stem in ("libhipblaslt", "librocblas", "libMIOpen"):
            found[stem[3:].lower()] = _shared_library_version(stem, (torch_lib, rocm_lib))
        found["rocm"] = _read_text(Path(env.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version")
    elif backend == "cuda":
        found["cublas"] = _package_version("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12")
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        found["cudnn"] = str(cudnn) if cudnn else None
    found["triton"] = _package_version("triton", "pytorch-triton-rocm", "pytorch-triton")
    return tuple((k, v) for k, v in sorted(found.items()) if v)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _preferred_blas(torch: Any, backend: str) -> str | None:
    """The BLAS library torch uses now; None while it still says 'default' (the table decides)."""
    value = str(torch.backends.cuda.preferred_blas_library()).rsplit(".", 1)[-1].lower()
    if value == "default":
        return None
    if backend == "rocm":
        return {"cublaslt": "hipblaslt", "cublas": "rocblas", "ck": "ck"}.get(value, value)
    return value


def _attention_library(torch: Any) -> str | None:
    """ROCm's flash-attention library as torch reports it (torch 2.7+): 'aotriton' or 'ck'."""
    getter = getattr(torch.backends.cuda, "preferred_rocm_fa_library", None)
    if getter is None:
        return None
    value = str(getter()).rsplit(".", 1)[-1].lower()
    return None if value == "default" else value


def run_tool(command: list[str], timeout_s: float = _SUBPROCESS_TIMEOUT_S) -> str:
    """A vendor tool's standard output. Raises FileNotFoundError when the tool is not on PATH,
    subprocess.TimeoutExpired past `timeout_s`, RuntimeError (with its stderr) when it fails."""
    if shutil.which(command[0]) is None:
        raise FileNotFoundError(f"{command[0]} not on PATH")
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {clip(done.stderr.strip(), 200)}")
    return done.stdout


def tool_output(command: list[str], timeout_s: float = _SUBPROCESS_TIMEOUT_S) -> str | None:
    """Everything a tool printed (standard output, then standard error), whatever its exit
    status; None when it is not on PATH or does not answer in time."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def _amdsmi_facts(env: Mapping[str, str], errors: ProbeErrors) -> list[AmdGpuFacts]:
    """Facts from the amdsmi package (ROCm's matching copy first); the copy used is the source."""
    loaded = amdsmi_import.import_amdsmi(env)
    errors.messages.extend(f"amdsmi: {failure}" for failure in loaded.failures)
    amdsmi = loaded.module
    amdsmi.amdsmi_init()
    try:
        found = []
        for index, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            unreadable = ProbeErrors()  # a field the device refuses is recorded; the others are kept
            queries = (
                ("bdf", lambda h=handle: amdsmi.amdsmi_get_gpu_device_bdf(h)),
                ("driver", lambda h=handle: amdsmi.amdsmi_get_gpu_driver_info(h)),
                ("vram", lambda h=handle: amdsmi.amdsmi_get_gpu_vram_info(h)),
                ("cache", lambda h=handle: amdsmi.amdsmi_get_gpu_cache_info(h)),
                ("clock", lambda h=handle: amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.GFX)),
                ("compute_partition", lambda h=handle: amdsmi.amdsmi_get_gpu_compute_partition(h)),
                ("memory_partition", lambda h=handle: amdsmi.amdsmi_get_gpu_memory_partition(h)),
            )
            optional = {key: unreadable.run(f"amdsmi: GPU {index}: {key}", call) for key, call in queries}
            asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
            facts = amd_tools.facts_from_amdsmi(index, asic, source=f"amdsmi ({loaded.origin})", **optional)
            found.append(replace(facts, errors=tuple(unreadable.messages)))
        return found
    finally:
        amdsmi.amdsmi_shut_down()


def _amd_smi_static() -> list[AmdGpuFacts]:
    """`amd-smi static` for the sections discovery reads; a release that refuses one of the
    section flags gets the plain command."""
    try:
        text = run_tool(list(amd_tools.AMD_SMI_STATIC_JSON))
    except RuntimeError:
        text = run_tool(list(amd_tools.AMD_SMI_STATIC_JSON_PLAIN))
    return amd_tools.parse_amd_smi_static_json(text)


def _amd_facts(env: Mapping[str, str], errors: ProbeErrors) -> list[AmdGpuFacts]:
    """amdsmi, else amd-smi, else rocminfo; rocminfo also fills the arch feature switches."""
    facts = errors.run("amdsmi", lambda: _amdsmi_facts(env, errors), [])
    if not facts:
        facts = errors.run("amd-smi", _amd_smi_static, [])
    if not facts or not any(f.arch_features for f in facts):
        extra = errors.run("rocminfo", lambda: amd_tools.parse_rocminfo(run_tool(["rocminfo"])), [])
        if not facts:
            return extra
        by_bdf = {f.bdf: f for f in extra if f.bdf}
        facts = [amd_tools.merge_facts(f, by_bdf[f.bdf]) if f.bdf in by_bdf else f for f in facts]
    return facts


def _nvml_facts() -> dict[str, NvmlFacts]:
    """nvidia-ml-py facts keyed by normalized PCI address."""
    pynvml = importlib.import_module("pynvml")
    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        found = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
            bus = bus.decode() if isinstance(bus, bytes) else str(bus)
            bdf = amd_tools.normalize_bdf(bus[-12:])
            found[bdf or str(i)] = NvmlFacts(
                driver_version=driver,
                max_clock_mhz=int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                max_memory_clock_mhz=int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
                pci_bus_id=bdf,
            )
        return found
    finally:
        pynvml.nvmlShutdown()


def with_sysfs_partition(
    amd: AmdGpuFacts | None, torch_bdf: str | None, root: Path | None = None
) -> AmdGpuFacts | None:
    """The tool's facts, with the partition modes read from sysfs where no tool gave them."""
    if amd is not None and (amd.compute_partition or amd.memory_partition):
        return amd
    bdf = (amd.bdf if amd else None) or amd_tools.normalize_bdf(torch_bdf)
    mode = partitions.read_sysfs_partition(bdf, root or partitions.SYSFS_PCI_DEVICES)
    if mode is None:
        return amd
    sysfs = AmdGpuFacts(
        source="sysfs",
        bdf=bdf,
        compute_partition=mode.compute,
        memory_partition=mode.memory,
        partition_source=mode.source,
    )
    return sysfs if amd is None else amd_tools.merge_facts(amd, sysfs)


def _stack_facts(
    torch: Any, backend: str, env: Mapping[str, str], errors: ProbeErrors, archs: tuple[str, ...]
) -> StackFacts:
    runtime = torch.version.hip if backend == "rocm" else torch.version.cuda
    nccl = errors.run("nccl", lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))
    driver = None
    if backend == "rocm":
        driver = _read_text(Path("/sys/module/amdgpu/version"))
    cuda_backends = torch.backends.cuda
    return StackFacts(
        backend=backend,
        torch_version=str(torch.__version__),
        runtime_version=str(runtime) if runtime else None,
        driver_version=driver,
        collective_version=nccl,
        libraries=errors.run("libraries", lambda: _library_versions(torch, backend, env), ()),
        flash_compiled=bool(errors.run("flash", cuda_backends.is_flash_attention_available, False)),
        mem_efficient_compiled=bool(getattr(cuda_backends, "mem_efficient_sdp_enabled", lambda: True)()),
        cudnn_attention=backend == "cuda" and bool(torch.backends.cudnn.is_available()),
        preferred_blas=errors.run("preferred_blas", lambda: _preferred_blas(torch, backend)),
        attention_library=errors.run("attention_library", lambda: _attention_library(torch))
        if backend == "rocm"
        else None,
        visible_archs=archs,
    )


def discover_gpus(torch: Any, env: Mapping[str, str]) -> list[DeviceInfo]:
    """Every GPU torch can see, with vendor facts merged in."""
    if not torch.cuda.is_available():
        return []
    backend = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    errors = ProbeErrors()
    gpus = [_torch_gpu_facts(torch, i) for i in range(torch.cuda.device_count())]
    stack = _stack_facts(torch, backend, env, errors, tuple(gpu_arch(backend, g).name for g in gpus))
    amd_matched: list[AmdGpuFacts | None] = [None] * len(gpus)
    nvml: dict[str, NvmlFacts] = {}
    if backend == "rocm":
        matched = amd_tools.match_facts([g.pci_bus_id for g in gpus], _amd_facts(env, errors), same_node=True)
        amd_matched = [with_sysfs_partition(amd, g.pci_bus_id) for amd, g in zip(matched, gpus)]
    else:
        nvml = errors.run("nvidia-ml-py", _nvml_facts, {})
    return [
        build_gpu_info(
            facts,
            stack,
            env,
            amd=amd_matched[i],
            nvml=nvml.get(amd_tools.normalize_bdf(facts.pci_bus_id) or "") or nvml.get(str(i)),
            errors=errors.messages,
        )
        for i, facts in enumerate(gpus)
    ]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cpu_cache_bytes(level: int) -> int | None:
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    if not base.is_dir():
        return None
    for index in sorted(base.glob("index*")):
        if _read_text(index / "level") == str(level) and _read_text(index / "type") in ("Unified", "Data"):
            size = _read_text(index / "size")
            return amd_tools.quantity_bytes(size.replace("K", " KB").replace("M", " MB")) if size else None
    return None


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def discover_cpu(torch: Any | None, env: Mapping[str, str], errors: Iterable[str] = ()) -> DeviceInfo:
    """The host CPU as a device: PyTorch's CPU kernels are validated like any other."""
    model = _cpu_model()
    capability = None
    if torch is not None:
        capability = str(torch.backends.cpu.get_cpu_capability()).lower()
    blas = None
    if torch is not None:
        blas = "mkl" if torch.backends.mkl.is_available() else "openblas"
    return DeviceInfo(
        backend="cpu",
        index=None,
        name=model,
        arch=model,
        device_key=arch.device_key("cpu", model, model),
        arch_features=((capability, True),) if capability else (),
        compute_units=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        memory_bytes=_host_memory_bytes(),
        l2_cache_bytes=_cpu_cache_bytes(2),
        last_level_cache_bytes=_cpu_cache_bytes(3) or _cpu_cache_bytes(2),
        torch_version=str(torch.__version__) if torch is not None else None,
        visibility=visibility(env),
        fp8_formats=capabilities.fp8_formats("cpu", model) if torch is not None else (),
        scaled_mm=torch is not None
        and hasattr(torch, "_scaled_mm")
        and capabilities.scaled_mm_supported("cpu", model, None),
        attention_backends=capabilities.attention_backends("cpu", model, False, False, False),
        preferred_blas=blas,
        sources=("torch",) if torch is not None else ("os",),
        errors=tuple(errors),
    )


def discover_devices(env: Mapping[str, str] | None = None) -> list[DeviceInfo]:
    """All GPUs, then the CPU. Never raises: failed probes are listed in each device's errors."""
    env = dict(os.environ if env is None else env)
    errors = ProbeErrors()
    torch = errors.run("torch", lambda: importlib.import_module("torch"))
    if torch is None:
        return [discover_cpu(None, env, errors.messages)]
    gpus = errors.run("torch.cuda", lambda: discover_gpus(torch, env), [])
    runtime = torch_gpu_runtime(torch)
    if runtime and not gpus and not any(m.startswith("torch.cuda") for m in errors.messages):
        available = errors.run("torch.cuda.is_available", torch.cuda.is_available, False)
        count = errors.run("torch.cuda.device_count", torch.cuda.device_count, 0)
        errors.messages.append(
            f"torch.cuda: this {runtime} build of torch sees no usable GPU "
            f"(torch.cuda.is_available() is {available}, device_count() is {count})"
        )
    if runtime and runtime.startswith("HIP") and not gpus:  # the tools' own words on why, whatever torch said
        reason = errors.run("tools", lambda: tool_failures.why_no_gpu(tool_output))
        errors.messages.extend([reason.message()] if reason is not None else [])
    return [*gpus, replace(discover_cpu(torch, env, errors.messages), runtime_version=runtime)]


def torch_gpu_runtime(torch: Any) -> str | None:
    """'CUDA 13.0' or 'HIP 6.4.43482' for a GPU build of torch; None for a CPU-only build."""
    hip, cuda = getattr(torch.version, "hip", None), getattr(torch.version, "cuda", None)
    return f"HIP {hip}" if hip else (f"CUDA {cuda}" if cuda else None)
