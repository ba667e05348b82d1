"""The one registry of problem shapes: every GEMM and attention shape the suites run, derived
from the model architectures of `rocm_validate.workloads.models`.

Correctness checks real model sizes on a GPU and the same shapes shrunk on a CPU: a test is
parametrized by the problem's name (`gemm_problem(name, is_gpu)` turns it into sizes), so test
ids are identical across devices; on a CPU every dimension is divided by 16 (K and N stay
multiples of 16, which FP8 GEMMs need) so CI finishes in minutes.

Perf measures benchmark shapes at two scales: `full` on a GPU (8192^3, BERT-L pretraining at
batch 48 x 512 tokens, Llama-3.1-8B training at 2 x 4096 tokens) and `tiny` on the CPU, the same
layers of the `tiny` model configs, so the CPU run exercises the same code paths.
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
        return {
            "qkv": (3 * hidden, hidden),
            "attn_out": (hidden, hidden),
            "ffn_up": (ffn, hidden),
            "ffn_down": (hidden, ffn),
        }
    return {
        "qkv": (hidden + 2 * kv_width, hidden),
        "attn_out": (hidden, hidden),
        "gate_up": (2 * ffn, hidden),
        "down": (hidden, ffn),
    }


GEMM_SHAPES: dict[str, tuple[int, int]] = {
    f"{model}.{layer}": shape
    for model in ("bert-large", "llama-3.1-8b")
    for layer, shape in _model_gemms(model).items()
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


def block_dtypes(backend: str) -> tuple[str, ...]:
    """Building blocks run in fp32, bf16 and fp16 on GPUs; fp32 and bf16 on the CPU."""
    return ("float32", "bfloat16") if backend == "cpu" else ("float32", "bfloat16", "float16")


def training_dtype(backend: str) -> str:
    """The dtype compiled and optimizer checks train in: bf16 on GPUs, fp32 on the CPU."""
    return "float32" if backend == "cpu" else "bfloat16"


def gemm_dtypes(backend: str) -> tuple[str, ...]:
    """Dense GEMMs are checked in every training dtype on GPUs, fp32 and bf16 on the CPU."""
    return ("float32", "bfloat16") if backend == "cpu" else ("bfloat16", "float16", "float32")


# --- perf benchmark shapes --------------------------------------------------------------------

BENCHMARK_TOKENS = {"bert-large": {"full": 48 * 512, "tiny": 2 * 128}, "llama-3.1-8b": {"full": 2 * 4096, "tiny": 128}}
ATTENTION_BATCH = {"bert-large": {"full": 48, "tiny": 4}, "llama-3.1-8b": {"full": 8, "tiny": 1}}


@dataclass(frozen=True)
class GemmBenchmark:
    """C[M, N] = A[M, K] @ B[K, N], timed at both scales."""

    label: str
    full: tuple[int, int, int]
    tiny: tuple[int, int, int]

    def shape(self, scale: str) -> tuple[int, int, int]:
        return self.full if scale == "full" else self.tiny


@dataclass(frozen=True)
class AttentionBenchmark:
    """Scaled dot-product attention on (batch, heads, sequence, head dim), timed at both scales."""

    label: str
    full: tuple[int, int, int, int]
    tiny: tuple[int, int, int, int]
    causal: bool

    def shape(self, scale: str) -> tuple[int, int, int, int]:
        return self.full if scale == "full" else self.tiny


def _ffn_up(model: str, scale: str) -> tuple[int, int, int]:
    """(tokens, FFN width, hidden): the first FFN projection of `model` at its benchmark batch."""
    spec = MODELS[model].config_kwargs(scale)
    return BENCHMARK_TOKENS[model][scale], spec["intermediate_size"], spec["hidden_size"]


def _attention(model: str, scale: str) -> tuple[int, int, int, int]:
    """(batch, heads, sequence, head dim) of `model`'s self-attention at its benchmark batch."""
    spec = MODELS[model].config_kwargs(scale)
    heads = spec["num_attention_heads"]
    return ATTENTION_BATCH[model][scale], heads, MODELS[model].seq_len[scale], spec["hidden_size"] // heads


GEMM_BENCHMARKS: tuple[GemmBenchmark, ...] = (
    GemmBenchmark("square-8192", (8192, 8192, 8192), (128, 128, 128)),
    GemmBenchmark("bert-large-ffn", _ffn_up("bert-large", "full"), _ffn_up("bert-large", "tiny")),
    GemmBenchmark("llama-8b-mlp", _ffn_up("llama-3.1-8b", "full"), _ffn_up("llama-3.1-8b", "tiny")),
)

ATTENTION_BENCHMARKS: tuple[AttentionBenchmark, ...] = (
    AttentionBenchmark("bert-large", _attention("bert-large", "full"), _attention("bert-large", "tiny"), causal=False),
    AttentionBenchmark("llama-8b", _attention("llama-3.1-8b", "full"), _attention("llama-3.1-8b", "tiny"), causal=True),
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
