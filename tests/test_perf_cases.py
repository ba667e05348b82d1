"""Work counts of the perf suite's shapes, and out-of-memory descriptions."""

from __future__ import annotations

import pytest

from rocm_validate.core import oom
from rocm_validate.workloads.shapes import (
    ATTENTION_BENCHMARKS,
    GEMM_BENCHMARKS,
    attention_flops,
    gemm_flops,
)


def test_a_gemm_counts_a_multiply_and_an_add_per_term() -> None:
    assert gemm_flops(8192, 8192, 8192) == 2 * 8192**3


def test_attention_counts_flash_attention_flops_and_halves_them_when_causal() -> None:
    forward = attention_flops(48, 16, 512, 64, causal=False, backward=False)
    assert forward == 4 * 48 * 16 * 512**2 * 64
    assert attention_flops(48, 16, 512, 64, causal=False, backward=True) == 2.5 * forward
    assert attention_flops(48, 16, 512, 64, causal=True, backward=False) == forward / 2


def test_the_full_benchmark_shapes_are_the_model_layers_at_training_batch_sizes() -> None:
    assert {c.shape("full") for c in GEMM_BENCHMARKS} >= {(8192, 8192, 8192), (24576, 4096, 1024), (8192, 14336, 4096)}
    assert {c.shape("full") for c in ATTENTION_BENCHMARKS} == {(48, 16, 512, 64), (8, 32, 4096, 128)}


def test_an_oom_message_states_need_and_found() -> None:
    facts = oom.MemoryFacts(free=int(1.2 * oom.GIB), total=80 * oom.GIB, allocated=70 * oom.GIB, reserved=78 * oom.GIB)
    torch_text = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    message = oom.describe_oom("suites/perf/test_x.py::test_y", torch_text, facts)
    assert "needed 2.00 GiB more, found 1.20 GiB free of 80.00 GiB" in message
    assert "70.00 GiB in tensors" in message
    assert "an allocation failed, found unknown free" in oom.describe_oom(
        "t", "HIP error", oom.MemoryFacts(None, None, None, None)
    )


def test_only_torchs_out_of_memory_error_counts_as_oom() -> None:
    torch = pytest.importorskip("torch")
    assert oom.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert not oom.is_out_of_memory(MemoryError("host"))
    assert not oom.is_out_of_memory(RuntimeError("CUDA out of memory"))
