"""The kernels the perf suite times on the shapes of `rocm_validate.workloads.shapes`: GEMM
operands in each dtype (FP8 laid out as torch._scaled_mm wants it) and the GEMM call itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GEMM_DTYPES = ("bf16", "fp16", "fp32", "fp8")
# Norm-wise relative error of one output tile against float64: a few times the rounding of each
# output format (reduced-precision split-K reductions included), far below a wrong kernel's ~1;
# fp32's 1e-4 also catches TF32 left on (about 1e-3).
TILE_TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-4, "fp8": 2e-2}


def gemm_set_bytes(dtype: str, m: int, n: int, k: int) -> int:
    """Bytes of one operand set (A and B) of a GEMM in `dtype`."""
    element = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}[dtype]
    return element * (m * k + k * n)


def gemm_operands(
    dtype: str, m: int, n: int, k: int, device: torch.device | str, fp8_format: str | None = None
) -> tuple[Any, Any]:
    """Random A[M,K] and B[K,N]; for FP8 (`fp8_format` e4m3fn or e4m3fnuz) B is column-major, as
    torch._scaled_mm requires."""
    import torch

    if dtype == "fp8":
        fp8 = getattr(torch, f"float8_{fp8_format}")
        return torch.randn(m, k, device=device).to(fp8), torch.randn(n, k, device=device).to(fp8).t()
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    return torch.randn(m, k, device=device, dtype=torch_dtype), torch.randn(k, n, device=device, dtype=torch_dtype)


def gemm_kernel(dtype: str, device: torch.device | str) -> Callable[[Any, Any], Any]:
    """kernel(A, B) -> C: torch.matmul, or for FP8 torch._scaled_mm with unit scales and bf16 output."""
    import torch

    if dtype != "fp8":
        return torch.matmul
    one = torch.ones((), device=device)

    def scaled_mm(a: Any, b: Any) -> Any:
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    return scaled_mm


def check_gemm_tile(product: Any, a: Any, b: Any, dtype: str) -> None:
    """The timed kernel computes the right thing: a 64x64 tile of `product` = a @ b against a
    float64 product, within TILE_TOLERANCE[dtype]."""
    import torch

    tile = product[:64, :64].double()
    golden = a[:64].float().double() @ b[:, :64].float().double()
    error = (torch.linalg.vector_norm(tile - golden) / torch.linalg.vector_norm(golden)).item()
    allowed = TILE_TOLERANCE[dtype]
    assert error <= allowed, f"GEMM output tile is off by {error:.2e} (norm-wise relative), allowed {allowed:.0e}"
