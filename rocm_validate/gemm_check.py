"""Dense GEMM checks: torch's linear layer through the device BLAS against a float64 golden.

Candidate: F.linear(x, W, b) in the test dtype (the GEMM plus its bias epilogue, as layers run it).
Golden: the same in float64 on the device. Reference: for bf16 / fp16 the golden correctly
rounded to the dtype (no kernel can do better); for fp32 an independent fp32 GEMM on the host
CPU, so the device's accumulation error is measured against another library's. An fp32 GEMM that
silently runs in TF32 is ~500x worse than that and fails.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from rocm_validate.compare import Comparison, compare
from rocm_validate.sizes import GEMM_SHAPES, GemmProblem
from rocm_validate.tolerances import tolerance_for


@functools.lru_cache(maxsize=len(GEMM_SHAPES))  # every shape once per session, whatever the test order
def _host_operands(m: int, n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g)


@functools.lru_cache(maxsize=len(GEMM_SHAPES))
def _host_float32_linear(m: int, n: int, k: int, seed: int) -> torch.Tensor:
    return F.linear(*_host_operands(m, n, k, seed))


def check_linear(problem: GemmProblem, dtype: str, device: Any, platform: str, arch: str, seed: int = 0) -> Comparison:
    """F.linear on the device in `dtype` vs float64, measured against the reference above."""
    torch_dtype = getattr(torch, dtype)
    x, w, b = (t.to(device=device, dtype=torch_dtype) for t in _host_operands(problem.m, problem.n, problem.k, seed))
    candidate = F.linear(x, w, b)
    golden = F.linear(x.double(), w.double(), b.double())
    if torch_dtype == torch.float32:
        reference = _host_float32_linear(problem.m, problem.n, problem.k, seed)
    else:
        reference = golden.to(torch_dtype)
    return compare(
        f"gemm.{dtype} [{problem.describe()}]", candidate, golden, tolerance_for(f"gemm.{dtype}", platform, arch), reference
    )


def small_integers(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Entries in {-1, 0, 1}: products and sums of up to 256 of them are exact in every float dtype."""
    return torch.randint(-1, 2, shape, generator=generator).float()


def check_exact_gemm(dtype: str, device: Any, platform: str, arch: str, m: int = 256, n: int = 192, k: int = 64) -> Comparison:
    """x @ W^T + b on small integers must be exact: any rounding or dropped tile shows up bitwise."""
    g = torch.Generator().manual_seed(7)
    torch_dtype = getattr(torch, dtype)
    x, w, b = (small_integers(s, g).to(device=device, dtype=torch_dtype) for s in ((m, k), (n, k), (n,)))
    golden = F.linear(x.double(), w.double(), b.double())
    return compare(f"gemm.exact [{dtype}, M={m}, N={n}, K={k}]", F.linear(x, w, b), golden,
                   tolerance_for("gemm.exact", platform, arch))


LARGE_OUTPUT = (32896, 32768, 64)  # M % 256 = 128; the bf16 output is 2.01 GiB + 256 MiB


def check_large_output(device: Any, platform: str, arch: str, rows: int = 256) -> list[Comparison]:
    """A bf16 GEMM whose output passes 2 GiB with M % 256 != 0 (hipBLASLt#2299 dropped such stores):
    small-integer inputs make it exact, so the first and last `rows` rows are compared bitwise."""
    m, n, k = LARGE_OUTPUT
    g = torch.Generator().manual_seed(11)
    x = small_integers((m, k), g).to(device=device, dtype=torch.bfloat16)
    w = small_integers((n, k), g).to(device=device, dtype=torch.bfloat16)
    out = x @ w.t()
    tolerance = tolerance_for("gemm.exact", platform, arch)
    results = []
    for label, part in (("first", slice(0, rows)), ("last", slice(m - rows, m))):
        golden = x[part].float() @ w.float().t()
        results.append(compare(f"gemm.exact [bf16 {m}x{n}x{k}, {label} {rows} rows]", out[part], golden, tolerance))
    return results
