"""BLAS library choice on GPUs: cuBLAS / cuBLASLt on CUDA, rocBLAS / hipBLASLt on ROCm.

Tests are parametrized by a platform-neutral choice ("default", "blaslt", "blas") so their ids
are the same on every machine; `blas_library` names the real library and `preferred_blas`
switches PyTorch to it (torch.backends.cuda.preferred_blas_library) and restores the previous
setting afterwards. PyTorch's own names are "cublaslt" for cuBLASLt and hipBLASLt and "cublas"
for cuBLAS and hipBLAS/rocBLAS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rocm_validate.errors import BlasUnavailable
from rocm_validate.platform.capabilities import blas_library
from rocm_validate.platform.devices import DeviceInfo

_TORCH_SETTING = {"cublaslt": "cublaslt", "hipblaslt": "cublaslt", "cublas": "cublas", "rocblas": "cublas"}


def _setting_name(value: object) -> str:
    """torch._C._BlasBackend.Cublaslt -> 'cublaslt'."""
    return str(value).rsplit(".", 1)[-1].lower()


@contextlib.contextmanager
def preferred_blas(choice: str, backend: str) -> Iterator[str]:
    """Run the body with PyTorch preferring the library `choice` names; yields its name."""
    library = blas_library(choice, backend)
    if library is None:
        yield "default"
        return
    import torch

    previous = torch.backends.cuda.preferred_blas_library()
    try:
        torch.backends.cuda.preferred_blas_library(_TORCH_SETTING[library])
        now = _setting_name(torch.backends.cuda.preferred_blas_library())
        if now != _TORCH_SETTING[library]:
            raise BlasUnavailable(f"asked for {library}, PyTorch kept {now}")
        yield library
    finally:
        torch.backends.cuda.preferred_blas_library(previous)


def blas_skip_reason(choice: str, device: DeviceInfo) -> str | None:
    """Why BLAS `choice` ('default', 'blaslt', 'blas') cannot be tested on `device`; None when it can."""
    if choice == "default" or blas_library(choice, device.backend) is not None:
        return None
    return (
        f"needs a GPU BLAS library choice (cuBLAS / cuBLASLt on CUDA, rocBLAS / hipBLASLt on ROCm), "
        f"found {device.backend} ({device.preferred_blas or 'its own BLAS'})"
    )
