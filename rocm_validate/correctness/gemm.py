"""Dense GEMM checks: torch's linear layer through the device BLAS against a float64 golden.

Candidate: F.linear(x, W, b) in the test dtype (the GEMM plus its bias epilogue, as layers run it).
Golden: x W^T + b in float64 on the device (a matmul, not F.linear); its magnitude |x||W|^T + |b|
scales the error model's accumulation over K. Reference: the golden correctly rounded to the dtype,
the best any kernel can do, so the check needs no second GEMM library and cannot share a bug
with the candidate. The fp32 factor allows for accumulation over K (a CPU BLAS measures up to
22x the rounding error); an fp32 GEMM silently running in TF32 is thousands of times worse.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.shapes import GemmProblem


def linear_operands(problem: GemmProblem, dtype: str, device: torch.device | str, seed: int = 0) -> list[torch.Tensor]:
    """Seeded x [m, k], W [n, k] and bias [n] in `dtype`, drawn on the device (fast at real sizes)."""
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator(device=device).manual_seed(seed)
    shapes = ((problem.m, problem.k), (problem.n, problem.k), (problem.n,))
    return [torch.randn(*shape, generator=g, device=device).to(torch_dtype) for shape in shapes]


def judge_product(
    check: str,
    dtype: str,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None,
    candidate: torch.Tensor,
    device: DeviceInfo,
) -> Comparison:
    """A candidate for a @ b (+ bias), batched or not, against float64 computed outside the call
    under test, measured against the correctly rounded result."""
    golden = a.double() @ b.double()
    magnitude = a.double().abs() @ b.double().abs()
    if bias is not None:
        golden, magnitude = golden + bias.double(), magnitude + bias.double().abs()
    return compare(
        check,
        candidate,
        golden,
        tolerance_for(f"gemm.{dtype}", device.backend, device.arch),
        golden.to(getattr(torch, dtype)),
        magnitude=magnitude,
        terms=a.shape[-1],
    )


def judge_linear(
    problem: GemmProblem,
    dtype: str,
    operands: list[torch.Tensor],
    candidate: torch.Tensor,
    device: DeviceInfo,
    bias: bool = True,
) -> Comparison:
    """A candidate for x W^T (+ b) against float64 (see judge_product)."""
    x, w, b = operands
    label = f"gemm.{dtype} [{problem.describe()}{'' if bias else ', no bias'}]"
    return judge_product(label, dtype, x, w.t(), b if bias else None, candidate, device)


def check_linear(
    problem: GemmProblem, dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0
) -> Comparison:
    """F.linear on the device in `dtype` vs float64, measured against the correctly rounded result."""
    operands = linear_operands(problem, dtype, torch_device, seed)
    return judge_linear(problem, dtype, operands, F.linear(*operands), device)


def small_integers(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Entries in {-1, 0, 1}: products and sums of up to 256 of them are exact in every float dtype."""
    return torch.randint(-1, 2, shape, generator=generator).float()


def check_exact_gemm(
    dtype: str, device: DeviceInfo, torch_device: torch.device, m: int = 256, n: int = 192, k: int = 64
) -> Comparison:
    """x @ W^T + b on small integers must be exact: any rounding or dropped tile shows up bitwise."""
    g = torch.Generator().manual_seed(7)
    torch_dtype = getattr(torch, dtype)
    x, w, b = (small_integers(s, g).to(device=torch_device, dtype=torch_dtype) for s in ((m, k), (n, k), (n,)))
    golden = F.linear(x.double(), w.double(), b.double())
    return compare(
        f"gemm.exact [{dtype}, M={m}, N={n}, K={k}]",
        F.linear(x, w, b),
        golden,
        tolerance_for("gemm.exact", device.backend, device.arch),
    )


LARGE_OUTPUT = (32896, 32768, 64)  # M % 256 = 128; bf16 output 2 GiB + 8 MiB: its last 128 rows lie past 2 GiB


def check_large_output(device: DeviceInfo, torch_device: torch.device, rows: int = 256) -> list[Comparison]:
    """A bf16 GEMM whose output passes 2 GiB with M % 256 != 0 (hipBLASLt#2299 dropped such stores):
    small-integer inputs make it exact, so the first and last `rows` rows are compared bitwise."""
    m, n, k = LARGE_OUTPUT
    g = torch.Generator().manual_seed(11)
    x = small_integers((m, k), g).to(device=torch_device, dtype=torch.bfloat16)
    w = small_integers((n, k), g).to(device=torch_device, dtype=torch.bfloat16)
    out = x @ w.t()
    tolerance = tolerance_for("gemm.exact", device.backend, device.arch)
    results = []
    for label, part in (("first", slice(0, rows)), ("last", slice(m - rows, m))):
        golden = x[part].float() @ w.float().t()
        results.append(compare(f"gemm.exact [bf16 {m}x{n}x{k}, {label} {rows} rows]", out[part], golden, tolerance))
    return results
