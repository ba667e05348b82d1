"""Adversarial inputs that expose a reduction's precision directly, whatever the accumulation order.

A kernel that reduces in the output's type instead of float32 (a split-K GEMM with a bf16 or fp16
workspace, a sum with a narrow accumulator) is wrong by far more than an ulp on these inputs, and
the correct result is exact, so the check is bitwise:

* **overflow** (fp16): rows of 65504 (fp16's largest) times +1 for half of K and -1 for the other
  half give exactly 0; any partial sum held in fp16 overflows to inf (PyTorch's
  `test_cublas_addmm_no_reduced_precision` does this for cuBLAS);
* **stagnation** (bf16, fp16): one large term 2^p (256 in bf16, 2048 in fp16), then ones, then -2^p:
  an accumulator in the dtype stops growing at 2^p (2^p + 1 rounds back to 2^p), float32's adds
  every one. Each row draws its own order, so every split of K leaves partial sums the narrow
  type cannot hold in some row.

Every row and column is a permutation of the same terms, and the exact result is representable
in the dtype, so a correct kernel returns it bitwise.

The GEMMs run with PyTorch's reduced-precision reductions off
(`torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction` and its bf16 twin, both on by
default), as PyTorch's own test does: with them on, cuBLAS may reduce split-K partial sums in the
output type, which is the documented contract, not a defect (the healthy H200, torch 2.11, cuBLASLt:
2047 for 2048 in 144 of 1024 fp16 stagnation elements with the default; the accuracy test judges
the default path). float32 results have no such input small
enough to run (its stagnation needs 2^24 terms): float32 GEMMs are judged by the accuracy test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo

# The largest term an accumulator in the dtype stagnates at: 2^(mantissa bits + 1).
STAGNATION = {"bfloat16": 256.0, "float16": 2048.0}
FP16_MAX = 65504.0


def _shuffled_rows(terms: torch.Tensor, rows: int, generator: torch.Generator) -> torch.Tensor:
    """`rows` rows, each a random permutation of `terms`."""
    order = torch.argsort(torch.rand(rows, terms.numel(), generator=generator), dim=1)
    return terms[order]


def stagnation_terms(dtype: str) -> torch.Tensor:
    """2^p, 2^p ones, -2^p: the sum is 2^p, exact in the dtype; an accumulator in it returns 0."""
    big = STAGNATION[dtype]
    return torch.cat([torch.tensor([big, -big]), torch.ones(int(big))])


def overflow_signs(k: int) -> torch.Tensor:
    """+1 for half of K, -1 for the other half."""
    return torch.cat([torch.ones(k // 2), -torch.ones(k // 2)])


def gemm_cases(dtype: str, generator: torch.Generator, rows: int = 64) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(label, x [rows, K], W [cols, K]) whose product is exact in `dtype` and wrong by far more
    than an ulp when K is reduced in it."""
    if dtype not in STAGNATION:
        return []
    terms = stagnation_terms(dtype)
    k = terms.numel()
    cases = [
        (
            f"stagnation: {STAGNATION[dtype]:g}, {k - 2} ones, -{STAGNATION[dtype]:g} in every row's own order, K={k}",
            _shuffled_rows(terms, rows, generator),
            torch.ones(16, k),
        )
    ]
    if dtype == "float16":
        k = 4096
        cases.append(
            (
                f"overflow: 65504 x (+1 for half of K, -1 for the other), K={k}",
                torch.full((rows, k), FP16_MAX),
                _shuffled_rows(overflow_signs(k), 16, generator),
            )
        )
    return cases


@contextlib.contextmanager
def full_precision_reductions() -> Iterator[None]:
    """PyTorch's permission for the GPU BLAS libraries to reduce fp16 / bf16 split-K partial sums in
    the output type, withdrawn inside the block and restored after it."""
    matmul = torch.backends.cuda.matmul
    saved = (matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction)
    matmul.allow_fp16_reduced_precision_reduction = False
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction = saved


def check_gemm_reduction(dtype: str, device: DeviceInfo, torch_device: torch.device) -> list[Comparison]:
    """x @ W^T on the adversarial inputs of `dtype`, reduced-precision reductions off: bitwise equal
    to float64."""
    generator = torch.Generator().manual_seed(35)
    torch_dtype = getattr(torch, dtype)
    tolerance = tolerance_for("reduction.exact", device.backend, device.arch)
    results = []
    for label, x, w in gemm_cases(dtype, generator):
        golden = x.double() @ w.double().t()
        x, w = x.to(device=torch_device, dtype=torch_dtype), w.to(device=torch_device, dtype=torch_dtype)
        with full_precision_reductions():
            found = x @ w.t()
        results.append(compare(f"reduction.exact [GEMM, {dtype} {label}]", found, golden, tolerance))
    return results


def check_sum_reduction(dtype: str, device: DeviceInfo, torch_device: torch.device) -> list[Comparison]:
    """torch.sum over rows of the adversarial terms (long reductions): bitwise equal to float64."""
    generator = torch.Generator().manual_seed(35)
    torch_dtype = getattr(torch, dtype)
    tolerance = tolerance_for("reduction.exact", device.backend, device.arch)
    results = []
    for label, x, w in gemm_cases(dtype, generator):
        terms = x * w[0] if "overflow" in label else x
        golden = terms.double().sum(-1)
        found = terms.to(device=torch_device, dtype=torch_dtype).sum(-1)
        results.append(
            compare(f"reduction.exact [torch.sum, {dtype} {label.split(' x ')[0]}]", found, golden, tolerance)
        )
    return results
