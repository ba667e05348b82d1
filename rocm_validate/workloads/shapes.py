"""What the correctness suite runs at: real model sizes on a GPU, the same shapes shrunk on a CPU.

GEMM problems come from the architectures in `rocm_validate.workloads.models` (BERT-L and Llama-3.1-8B at
full width), so a checked shape is one those models really run. A test is parametrized by the
problem's name; `gemm_problem(name, is_gpu)` turns it into sizes, keeping test ids identical
across devices. On a CPU every dimension is divided by 16 (K and N stay multiples of 16, which
FP8 GEMMs need) so CI finishes in minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocm_validate.workloads.models import MODELS

CPU_SHRINK = 16
GPU_TOKENS = 2048  # rows of activations: BERT-L 4 x 512 tokens, Llama 2048 tokens
CPU_TOKENS = 64


@dataclass(frozen=True)
class GemmProblem:
    """y[m, n] = x[m, k] @ W[n, k]^T, named after the layer it comes from."""

    name: str
    m: int
    n: int
    k: int

    def describe(self) -> str:
        return f"{self.name} (M={self.m}, N={self.n}, K={self.k})"


def _model_gemms(model: str) -> dict[str, tuple[int, int]]:
    """(N, K) of each projection of one transformer layer of `model` at full size."""
    spec = MODELS[model].full
    hidden, ffn, heads = spec["hidden_size"], spec["intermediate_size"], spec["num_attention_heads"]
    kv_width = hidden * spec.get("num_key_value_heads", heads) // heads
    if MODELS[model].family == "bert":
        return {"qkv": (3 * hidden, hidden), "attn_out": (hidden, hidden), "ffn_up": (ffn, hidden),
                "ffn_down": (hidden, ffn)}
    return {"qkv": (hidden + 2 * kv_width, hidden), "attn_out": (hidden, hidden), "gate_up": (2 * ffn, hidden),
            "down": (hidden, ffn)}


GEMM_SHAPES: dict[str, tuple[int, int]] = {
    f"{model}.{layer}": shape for model in ("bert-large", "llama-3.1-8b") for layer, shape in _model_gemms(model).items()
}


def gemm_problem(name: str, is_gpu: bool) -> GemmProblem:
    """The named GEMM at real size on a GPU, shrunk by CPU_SHRINK on a CPU."""
    if name not in GEMM_SHAPES:
        raise KeyError(f"unknown GEMM {name!r}; known: {', '.join(GEMM_SHAPES)}")
    n, k = GEMM_SHAPES[name]
    if is_gpu:
        return GemmProblem(name, GPU_TOKENS, n, k)
    return GemmProblem(name, CPU_TOKENS, n // CPU_SHRINK, k // CPU_SHRINK)


@dataclass(frozen=True)
class AttentionSize:
    batch: int
    heads: int
    seq: int


def attention_size(head_dim: int, is_gpu: bool) -> AttentionSize:
    """Head dim 64 is BERT-L's attention (16 heads, 512 tokens), 128 Llama-3.1-8B's (32 heads;
    1024 tokens keeps the float64 golden small). A CPU runs 2 x 2 heads x 64 tokens."""
    if not is_gpu:
        return AttentionSize(batch=2, heads=2, seq=64)
    if head_dim <= 64:
        return AttentionSize(batch=4, heads=16, seq=512)
    return AttentionSize(batch=2, heads=32, seq=1024)


def attention_dtypes(backend: str) -> tuple[str, ...]:
    """Attention runs in bf16 and fp16 on GPUs; the CPU checks fp32, its kernels' main dtype."""
    return ("float32",) if backend == "cpu" else ("bfloat16", "float16")


def training_dtype(backend: str) -> str:
    """The dtype compiled and optimizer checks train in: bf16 on GPUs, fp32 on the CPU."""
    return "float32" if backend == "cpu" else "bfloat16"


def gemm_dtypes(backend: str) -> tuple[str, ...]:
    """Dense GEMMs are checked in every training dtype on GPUs, fp32 and bf16 on the CPU."""
    return ("float32", "bfloat16") if backend == "cpu" else ("bfloat16", "float16", "float32")
