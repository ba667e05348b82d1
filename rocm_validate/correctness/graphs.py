"""CUDA / HIP graph capture of a BERT layer's forward + backward: every replay must equal eager
and every other replay bit for bit (HIP graph replay has corrupted output intermittently on
MI300X, ROCm/clr#279). Attention runs on the math backend here, because fused attention
backward kernels may accumulate with atomics and so differ run to run in their last bits.
"""

from __future__ import annotations

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.layers import bert_layer, math_sdpa
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo

WARMUP_STEPS = 3
SCRATCH_BYTES = 64 << 20


def check_graph_replay(
    scale: str, batch: int, seq: int, device: DeviceInfo, torch_device: torch.device, replays: int = 5
) -> list[Comparison]:
    """Capture forward + backward of a bf16 BERT-L layer, replay it `replays` times while other
    allocations churn the caching allocator, and compare each replay with eager and replay 0."""
    layer = bert_layer(scale, torch_device).to(torch.bfloat16)
    hidden = layer.attention.self.query.in_features
    g = torch.Generator().manual_seed(21)
    x = torch.randn(batch, seq, hidden, generator=g).to(device=torch_device, dtype=torch.bfloat16).requires_grad_(True)
    upstream = torch.randn(batch, seq, hidden, generator=g).to(device=torch_device, dtype=torch.bfloat16)
    named = list(layer.named_parameters())

    def step() -> list[torch.Tensor]:
        with math_sdpa():
            out = layer(x)
            out = out[0] if isinstance(out, tuple) else out
            grads = torch.autograd.grad(out, [x, *(p for _, p in named)], upstream)
        return [out, *grads]

    side = torch.cuda.Stream(torch_device)
    side.wait_stream(torch.cuda.current_stream(torch_device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_STEPS):
            step()
    torch.cuda.current_stream(torch_device).wait_stream(side)
    eager = [t.detach().clone() for t in step()]

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    replayed = []
    for i in range(replays):
        scratch = torch.full((SCRATCH_BYTES,), i + 1, dtype=torch.uint8, device=torch_device)
        graph.replay()
        torch.cuda.synchronize(torch_device)
        replayed.append([t.detach().clone() for t in static])
        del scratch

    names = ["out", "grad_input", *(f"grad_{name}" for name, _ in named)]
    tolerance = tolerance_for("graph.replay", device.backend, device.arch)
    results = []
    for i, run in enumerate(replayed):
        for name, got, want, first in zip(names, run, eager, replayed[0]):
            results.append(compare(f"graph.replay {name} [replay {i} vs eager]", got, want, tolerance))
            if i:
                results.append(compare(f"graph.replay {name} [replay {i} vs replay 0]", got, first, tolerance))
    return results
