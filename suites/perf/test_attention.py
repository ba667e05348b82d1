"""Scaled dot-product attention throughput, forward and backward, in bf16 at the BERT-L
(48x16x512x64) and Llama-3.1-8B (8x32x4096x128, causal) shapes, with the backend PyTorch picks.

Attention draws the board to its power cap as a large GEMM does, so it is timed the same way: a
sustained window after the boost phase. In 0.4 s windows on three H100 VMs the Llama-shape forward
read 513-540 TFLOP/s, and its window clock (1510-1680 MHz) did not track it, so neither the
figure nor the figure per clock cycle could catch a 5% slowdown against another VM's baseline
(docs/perf.md)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from rocm_validate.perf.timing import sustained_changes
from rocm_validate.workloads.shapes import (
    ATTENTION_BENCHMARKS,
    AttentionBenchmark,
    attention_flops,
)


@pytest.mark.parametrize("case", ATTENTION_BENCHMARKS, ids=lambda c: c.label)
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_sdpa_throughput(perf, rocm_device, torch_device, direction: str, case: AttentionBenchmark) -> None:
    batch, heads, seq, dim = case.shape(perf.scale)
    backward = direction == "backward"

    def make(_index: int) -> tuple[Any, ...]:
        q, k, v = (
            torch.randn(batch, heads, seq, dim, device=torch_device, dtype=torch.bfloat16, requires_grad=backward)
            for _ in range(3)
        )
        if not backward:
            return q, k, v
        out = F.scaled_dot_product_attention(q, k, v, is_causal=case.causal)
        return out, (q, k, v), torch.randn_like(out)

    tensor_bytes = batch * heads * seq * dim * 2
    rotation = perf.rotation(make, tensor_bytes * (5 if backward else 3))

    if backward:

        def call() -> Any:
            out, inputs, grad = rotation.next()
            return torch.autograd.grad(out, inputs, grad, retain_graph=True)
    else:

        def call() -> Any:
            return F.scaled_dot_product_attention(*rotation.next(), is_causal=case.causal)

    measured = perf.measure(call, **sustained_changes(rocm_device.backend))
    name = f"sdpa.{direction}.{case.label}.{batch}x{heads}x{seq}x{dim}"
    flops = attention_flops(batch, heads, seq, dim, case.causal, backward)
    perf.throughput(name, measured, flops, "TFLOP/s", peak="bf16")
    result = call()
    outputs = result if backward else (result,)
    assert all(torch.isfinite(t).all() for t in outputs), f"{name}: the timed kernel produced non-finite values"
