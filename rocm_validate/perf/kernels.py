"""The shapes the perf suite measures, at full size (GPU) and tiny size (CPU), and their work.

Full sizes come from the issue: 8192^3, and the GEMMs and attention of BERT-L pretraining
(batch 48 x sequence 512 = 24576 tokens, hidden 1024, FFN 4096, 16 heads of 64) and of
Llama-3.1-8B training (8192 tokens, hidden 4096, MLP 14336, 32 heads of 128 at 4096 positions).
Tiny sizes mirror the `tiny` model configs so the CPU run exercises the same code paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

GEMM_DTYPES = ("bf16", "fp16", "fp32", "fp8")


@dataclass(frozen=True)
class GemmCase:
    """C[M, N] = A[M, K] @ B[K, N] at both scales."""

    label: str
    full: tuple[int, int, int]
    tiny: tuple[int, int, int]

    def shape(self, scale: str) -> tuple[int, int, int]:
        return self.full if scale == "full" else self.tiny


@dataclass(frozen=True)
class AttentionCase:
    """Scaled dot-product attention on (batch, heads, sequence, head dim) at both scales."""

    label: str
    full: tuple[int, int, int, int]
    tiny: tuple[int, int, int, int]
    causal: bool

    def shape(self, scale: str) -> tuple[int, int, int, int]:
        return self.full if scale == "full" else self.tiny


GEMM_CASES: tuple[GemmCase, ...] = (
    GemmCase("square-8192", (8192, 8192, 8192), (128, 128, 128)),
    GemmCase("bert-large-ffn", (24576, 4096, 1024), (256, 512, 128)),
    GemmCase("llama-8b-mlp", (8192, 14336, 4096), (128, 896, 256)),
)

ATTENTION_CASES: tuple[AttentionCase, ...] = (
    AttentionCase("bert-large", (48, 16, 512, 64), (4, 4, 128, 32), causal=False),
    AttentionCase("llama-8b", (8, 32, 4096, 128), (1, 8, 128, 32), causal=True),
)


def gemm_flops(m: int, n: int, k: int) -> float:
    """A multiply and an add per term: 2*M*N*K."""
    return 2.0 * m * n * k


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool, backward: bool) -> float:
    """FLOPs of SDPA as FlashAttention counts them: forward 4*B*H*S^2*D (QK^T and PV), backward
    2.5x the forward (five matmuls to the forward's two), halved for a causal mask."""
    forward = 4.0 * batch * heads * seq * seq * head_dim
    if causal:
        forward /= 2
    return forward * 2.5 if backward else forward


def gemm_set_bytes(dtype: str, m: int, n: int, k: int) -> int:
    """Bytes of one operand set (A and B) of a GEMM in `dtype`."""
    element = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}[dtype]
    return element * (m * k + k * n)


def gemm_operands(dtype: str, m: int, n: int, k: int, device: Any, fp8_format: str | None = None) -> tuple[Any, Any]:
    """Random A[M,K] and B[K,N]; for FP8 (`fp8_format` e4m3fn or e4m3fnuz) B is column-major, as
    torch._scaled_mm requires."""
    import torch

    if dtype == "fp8":
        fp8 = getattr(torch, f"float8_{fp8_format}")
        return torch.randn(m, k, device=device).to(fp8), torch.randn(n, k, device=device).to(fp8).t()
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    return torch.randn(m, k, device=device, dtype=torch_dtype), torch.randn(k, n, device=device, dtype=torch_dtype)


def gemm_kernel(dtype: str, device: Any) -> Callable[[Any, Any], Any]:
    """kernel(A, B) -> C: torch.matmul, or for FP8 torch._scaled_mm with unit scales and bf16 output."""
    import torch

    if dtype != "fp8":
        return torch.matmul
    one = torch.ones((), device=device)

    def scaled_mm(a: Any, b: Any) -> Any:
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    return scaled_mm
