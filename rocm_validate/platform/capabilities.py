"""What a device can run, decided from discovered facts: FP8 formats, `torch._scaled_mm`,
SDPA backends, the BLAS library PyTorch picks.

Each rule is a pure function of strings and numbers (backend, arch, runtime version) with one
home here, so a requirement's skip reason, discovery's `DeviceInfo` and the FP8 layers all
ask the same question the same way. Sources are PyTorch's own dispatch (`_scaled_mm_is_fnuz`,
hipBLASLt default selection, SDPA availability).
"""

from __future__ import annotations

from rocm_validate.platform.arch import parse_version, sm_number

FP8_FNUZ: tuple[str, str] = ("e4m3fnuz", "e5m2fnuz")
FP8_OCP: tuple[str, str] = ("e4m3fn", "e5m2")
SCALINGS = ("tensorwise", "rowwise")


def fp8_formats(backend: str, arch: str) -> tuple[str, ...]:
    """FP8 formats the device computes natively; () when it has none.

    gfx94x (MI300X / MI325X / MI300A) use the fnuz variants (max 240, one NaN, no -0);
    gfx950 (MI350 / MI355X), gfx12 and NVIDIA sm_89+ use OCP e4m3fn / e5m2 (max 448).
    The CPU emulates OCP fp8 in PyTorch.
    """
    if backend == "rocm":
        if arch.startswith("gfx94"):
            return FP8_FNUZ
        if arch == "gfx950" or arch.startswith("gfx12"):
            return FP8_OCP
        return ()
    if backend == "cuda":
        number = sm_number(arch)
        return FP8_OCP if number is not None and number >= 89 else ()
    if backend == "cpu":
        return FP8_OCP
    return ()


def scaled_mm_supported(
    backend: str, arch: str, runtime_version: str | None, scaling: str = "tensorwise", torch_version: str | None = None
) -> bool:
    """Whether torch._scaled_mm (the FP8 GEMM) with `scaling` is expected to run on this device,
    from versions alone: the explanation, and the answer where the device cannot be probed
    (`probes.scaled_mm_probe` asks the device itself and wins where it ran).

    Tensor-wise: ROCm gfx942; gfx1200/gfx1201 from ROCm 6.3; gfx950 from ROCm 6.5; CUDA sm_89+;
    the CPU. Row-wise (a scale per row of A and per column of B) also needs CUDA sm_90+
    (CUTLASS kernels), or ROCm gfx942 / gfx950 with hipBLASLt from ROCm 6.4 and torch 2.7+
    (pytorch#144432) when the torch version is known.
    """
    if scaling not in SCALINGS:
        raise ValueError(f"_scaled_mm scaling must be one of {', '.join(SCALINGS)}, found {scaling!r}")
    if not _tensorwise_scaled_mm(backend, arch, runtime_version):
        return False
    return scaling == "tensorwise" or _rowwise_scaled_mm(backend, arch, runtime_version, torch_version)


def _tensorwise_scaled_mm(backend: str, arch: str, runtime_version: str | None) -> bool:
    if backend == "rocm":
        version = parse_version(runtime_version) or (0, 0)
        if arch == "gfx942":
            return True
        if arch in ("gfx1200", "gfx1201"):
            return version >= (6, 3)
        if arch == "gfx950":
            return version >= (6, 5)
        return False
    if backend == "cuda":
        number = sm_number(arch)
        return number is not None and number >= 89
    return backend == "cpu"


def _rowwise_scaled_mm(backend: str, arch: str, runtime_version: str | None, torch_version: str | None) -> bool:
    if backend == "cuda":
        return (sm_number(arch) or 0) >= 90
    if backend == "rocm":
        torch_ok = torch_version is None or (parse_version(torch_version) or (0, 0)) >= (2, 7)
        return torch_ok and arch in ("gfx942", "gfx950") and (parse_version(runtime_version) or (0, 0)) >= (6, 4)
    return backend == "cpu"


def scaled_mm_out_dtypes(backend: str, scaling: str) -> tuple[str, ...]:
    """Output dtypes _scaled_mm produces: row-wise scales give bf16 only on CUDA and hipBLASLt."""
    if scaling == "rowwise" and backend in ("cuda", "rocm"):
        return ("bfloat16",)
    return ("bfloat16", "float32")


def scaled_mm_alignment(backend: str) -> int:
    """cuBLASLt and hipBLASLt FP8 GEMMs need K and N to be multiples of 16; the CPU does not.

    backend: "cpu", "cuda" or "rocm" (a torch device type works too: ROCm GPUs are "cuda")."""
    return 1 if backend == "cpu" else 16


_ROCM_FLASH_ARCHS = frozenset({"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"})


def attention_backends(
    backend: str,
    arch: str,
    flash_compiled: bool,
    mem_efficient_compiled: bool,
    cudnn_available: bool,
) -> tuple[str, ...]:
    """SDPA backends expected to run on this device, besides the always-present 'math'.

    ROCm: flash and memory-efficient both come from AOTriton (or CK) on gfx90a, gfx942,
    gfx950, gfx1100 and gfx1201; there is no cuDNN attention. CUDA: flash needs sm_80+,
    memory-efficient sm_50+, cuDNN attention sm_80+ with cuDNN 9. CPU: the fused flash kernel.
    """
    found: list[str] = []
    if backend == "rocm":
        if arch in _ROCM_FLASH_ARCHS:
            if flash_compiled:
                found.append("flash")
            if mem_efficient_compiled:
                found.append("mem_efficient")
    elif backend == "cuda":
        number = sm_number(arch) or 0
        if flash_compiled and number >= 80:
            found.append("flash")
        if mem_efficient_compiled and number >= 50:
            found.append("mem_efficient")
        if cudnn_available and number >= 80:
            found.append("cudnn")
    elif backend == "cpu":
        found.append("flash")
    return ("math", *found)


def env_flag(value: str | None) -> bool | None:
    """A PyTorch boolean environment variable as c10 reads it: '1'/'ON'/'YES'/'TRUE'/'Y' -> True,
    '0'/'OFF'/'NO'/'FALSE'/'N' -> False, unset or anything else -> None."""
    text = (value or "").strip().upper()
    if text in ("1", "ON", "YES", "TRUE", "Y"):
        return True
    if text in ("0", "OFF", "NO", "FALSE", "N"):
        return False
    return None


def default_rocm_blas(archs: list[str], rocm_version: str | None, prefer_hipblaslt: str | None = None) -> str:
    """The BLAS library PyTorch picks on ROCm when nobody chose one: hipBLASLt only if every visible
    GPU is one it prefers it on (gfx90a, gfx942; gfx1200/1201 from ROCm 6.4; gfx950 from ROCm 7.0,
    Context.cpp getHipblasltPreferredArchs), else rocBLAS. `prefer_hipblaslt` is the value of
    TORCH_BLAS_PREFER_HIPBLASLT: '0' forces rocBLAS. Used only where torch does not say itself.
    """
    if env_flag(prefer_hipblaslt) is False:
        return "rocblas"
    version = parse_version(rocm_version) or (0, 0)
    preferred = {"gfx90a", "gfx942"}
    if version >= (6, 4):
        preferred |= {"gfx1200", "gfx1201"}
    if version >= (7, 0):
        preferred.add("gfx950")
    if archs and all(arch in preferred for arch in archs):
        return "hipblaslt"
    return "rocblas"


_CK_FLASH_ARCHS = frozenset({"gfx90a", "gfx942", "gfx950"})


def default_rocm_attention_library(arch: str, prefer_ck: str | None = None) -> str:
    """The flash-attention library PyTorch uses on ROCm when torch does not say (before
    `preferred_rocm_fa_library`, about torch 2.7): AOTriton, or composable_kernel when
    TORCH_ROCM_FA_PREFER_CK=1 on an arch CK serves (gfx90a, gfx942, gfx950). A build without CK
    falls back to AOTriton at run time, which only torch's own answer shows."""
    return "ck" if env_flag(prefer_ck) and arch in _CK_FLASH_ARCHS else "aotriton"


# Tests are parametrized by a platform-neutral BLAS choice so their ids are the same everywhere.
BLAS_CHOICES = ("default", "blaslt", "blas")
_BLAS_LIBRARIES = {
    ("cuda", "blaslt"): "cublaslt",
    ("cuda", "blas"): "cublas",
    ("rocm", "blaslt"): "hipblaslt",
    ("rocm", "blas"): "rocblas",
}


def blas_library(choice: str, backend: str) -> str | None:
    """The library a choice means on a platform: ('blaslt', 'rocm') -> 'hipblaslt'; None for
    'default' or where there is no such choice (the CPU)."""
    if choice not in BLAS_CHOICES:
        raise ValueError(f"BLAS choice must be one of {', '.join(BLAS_CHOICES)}, found {choice!r}")
    return _BLAS_LIBRARIES.get((backend, choice))
