"""Attention over packed sequences: every path a packed batch takes to a kernel, each sequence
against its own float64 attention.

A packed block holds several sequences; attention must stay inside each. The golden is computed
per sequence, from attention's definition (`attention.golden_attention` on that sequence's
queries, keys and values alone), so a kernel that lets one token see across a boundary differs
from it where the leak is, whatever the rest of the block does. The paths:

* `mask-<backend>`: the dense [blocks, heads, L, D] layout with the block-diagonal boolean mask,
  through one SDPA backend (flash takes no mask and skips as a platform limit);
* `njt-<backend>`: the sequences as a nested jagged tensor (`torch.nested`, `layout=torch.jagged`)
  through SDPA, the varlen kernels on GPUs (flash, mem_efficient; math on the CPU);
* `flash_attn_varlen`: flash-attn's `flash_attn_varlen_func` with `cu_seqlens`, when installed
  (on ROCm, ROCm/flash-attention's CK backend).

Each is measured against the math backend with the mask in the same dtype and bounded by its
backend's `sdpa.<backend>.<part>` rows; a failure names the sequence its worst element is in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rocm_validate.correctness.attention import (
    PARTS,
    AttentionInputs,
    golden_attention,
    rocm_flash_library,
    run_sdpa,
    torch_sdpa_backend,
)
from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.errors import BackendRefused
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.packing import (
    ATTENTION_PACKS,
    Pack,
    block_length,
    block_mask,
    cu_seqlens,
    segment_of,
    segments,
)

HEAD_DIM = 64  # BERT-L's
HEADS = {"full": 16, "tiny": 2}
FLASH_ATTN_INSTALL = "flash-attn (Dao-AILab/flash-attention; on ROCm, ROCm/flash-attention)"
NJT_BACKENDS = ("flash", "mem_efficient", "cudnn", "math")
MASK_BACKENDS = ("flash", "mem_efficient", "cudnn")


@dataclass(frozen=True)
class PackedPath:
    """One way to a kernel: 'mask', 'njt' or 'varlen', and the SDPA backend it is pinned to."""

    kind: str
    backend: str

    @property
    def name(self) -> str:
        return "flash_attn_varlen" if self.kind == "varlen" else f"{self.kind}-{self.backend}"

    def describe(self) -> str:
        return {"mask": "a block-diagonal mask", "njt": "a nested jagged tensor", "varlen": "cu_seqlens"}[self.kind]

    def meant_for(self, device: DeviceInfo) -> bool:
        """Whether the backend is documented to take this path, so a refusal leaves it not
        validated: mem_efficient takes any mask; on GPUs flash and mem_efficient take nested
        jagged tensors (their varlen kernels); flash-attn's varlen API is what it is for."""
        if self.kind == "mask":
            return self.backend == "mem_efficient"
        if self.kind == "njt":
            return device.is_gpu and self.backend in ("flash", "mem_efficient")
        return True


PATHS: dict[str, PackedPath] = {
    p.name: p
    for p in (
        *(PackedPath("mask", b) for b in MASK_BACKENDS),
        *(PackedPath("njt", b) for b in NJT_BACKENDS),
        PackedPath("varlen", "flash"),
    )
}


def packed_inputs(
    packs: tuple[Pack, ...], heads: int, dtype: str, device: torch.device | str, seed: int = 0
) -> AttentionInputs:
    """Standard-normal q, k, v and upstream in the dense [blocks, heads, L, D] layout, drawn on
    the CPU (every device sees the same numbers), with the block-diagonal mask."""
    g = torch.Generator().manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    shape = (len(packs), heads, block_length(packs), HEAD_DIM)

    def normal() -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=torch_dtype)

    q, k, v = (normal().requires_grad_(True) for _ in range(3))
    return AttentionInputs(q, k, v, block_mask(packs, device), False, normal())


def golden_per_sequence(
    inputs: AttentionInputs, packs: tuple[Pack, ...]
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Each sequence's attention by itself, in float64 (attention.golden_attention), placed back
    where the sequence sits in its block: outputs and gradients, and their magnitudes."""
    parts = [torch.zeros(inputs.q.shape, dtype=torch.float64, device=inputs.q.device) for _ in range(2 * len(PARTS))]
    for s in segments(packs):
        rows = (slice(s.block, s.block + 1), slice(None), slice(s.start, s.end))
        alone = AttentionInputs(
            inputs.q[rows].detach(),
            inputs.k[rows].detach(),
            inputs.v[rows].detach(),
            None,
            False,
            inputs.upstream[rows],
        )
        golden, sizes = golden_attention(alone)
        for target, value in zip(parts, (*golden, *sizes)):
            target[rows] = value
    return tuple(parts[: len(PARTS)]), tuple(parts[len(PARTS) :])


def _as_values(dense: torch.Tensor) -> torch.Tensor:
    """[blocks, heads, L, D] -> [blocks * L, heads, D]: every sequence end to end (packs are full)."""
    blocks, heads, length, dim = dense.shape
    return dense.transpose(1, 2).reshape(blocks * length, heads, dim)


def _as_dense(values: torch.Tensor, blocks: int) -> torch.Tensor:
    total, heads, dim = values.shape
    return values.reshape(blocks, total // blocks, heads, dim).transpose(1, 2)


def _run_values(
    attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor], inputs: AttentionInputs
) -> tuple[torch.Tensor, ...]:
    """A varlen-layout kernel's output and gradients, back in the dense layout."""
    blocks = inputs.q.shape[0]
    leaves = [_as_values(t.detach()).contiguous().requires_grad_(True) for t in (inputs.q, inputs.k, inputs.v)]
    out = attend(*leaves)
    grads = torch.autograd.grad(out, leaves, _as_values(inputs.upstream).contiguous())
    return tuple(_as_dense(t.detach(), blocks) for t in (out, *grads))


def _njt(backend: str, packs: tuple[Pack, ...]) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention import sdpa_kernel

        offsets = torch.tensor(cu_seqlens(packs), device=q.device, dtype=torch.int64)
        nested = [torch.nested.nested_tensor_from_jagged(t, offsets).transpose(1, 2) for t in (q, k, v)]
        try:
            with sdpa_kernel([torch_sdpa_backend(backend)]):
                out = torch.nn.functional.scaled_dot_product_attention(nested[0], nested[1], nested[2])
        except RuntimeError as exc:
            if "No viable backend" not in str(exc) and "No available kernel" not in str(exc):
                raise
            raise BackendRefused(
                f"{backend} SDPA refuses nested jagged inputs here: {str(exc).splitlines()[0]}"
            ) from None
        return out.transpose(1, 2).values()

    return attend


def _flash_attn_varlen(packs: tuple[Pack, ...]) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from rocm_validate.platform.libraries import import_library

        flash_attn = import_library("flash_attn", FLASH_ATTN_INSTALL)
        offsets = torch.tensor(cu_seqlens(packs), device=q.device, dtype=torch.int32)
        longest = max(length for pack in packs for length in pack)
        return flash_attn.flash_attn_varlen_func(
            q, k, v, offsets, offsets, longest, longest, dropout_p=0.0, causal=False
        )

    return attend


def run_path(path: PackedPath, inputs: AttentionInputs, packs: tuple[Pack, ...]) -> tuple[torch.Tensor, ...]:
    """(out, grad_q, grad_k, grad_v) of a path in the dense layout; BackendRefused if it declines."""
    if path.kind == "mask":
        return run_sdpa(path.backend, inputs)
    if path.kind == "njt":
        return _run_values(_njt(path.backend, packs), inputs)
    return _run_values(_flash_attn_varlen(packs), inputs)


def check_packed_attention(
    path_name: str, dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0
) -> list[Comparison]:
    """One path over packed BERT-L blocks against each sequence's float64 attention, measured
    against the masked math backend in `dtype`."""
    path = PATHS[path_name]
    scale = "full" if device.is_gpu else "tiny"
    packs = ATTENTION_PACKS[scale]
    inputs = packed_inputs(packs, HEADS[scale], dtype, torch_device, seed)
    candidate = run_path(path, inputs, packs)
    reference = run_sdpa("math", inputs)
    golden, sizes = golden_per_sequence(inputs, packs)
    library = rocm_flash_library() if device.backend == "rocm" else ""
    if path.kind == "varlen" and device.backend == "rocm":
        library = "ck"
    layout = " | ".join("+".join(str(n) for n in pack) for pack in packs)
    longest = max(n for pack in packs for n in pack)
    results = []
    for i, part in enumerate(PARTS):
        comparison = compare(
            f"packed.{path.name}.{part} [{len(packs)} blocks of {block_length(packs)} tokens ({layout}), "
            f"H{inputs.q.shape[1]} D{HEAD_DIM}, {dtype}]",
            candidate[i],
            golden[i],
            tolerance_for(
                f"sdpa.{path.backend}.{part}", device.backend, device.arch, library, seq_k=longest, dtype=dtype
            ),
            reference[i],
            magnitude=sizes[i],
            terms=longest,
        )
        results.append(comparison if comparison.passed else _name_sequence(comparison, packs))
    return results


def _name_sequence(comparison: Comparison, packs: tuple[Pack, ...]) -> Comparison:
    """The failed comparison, its name saying which sequence its worst element is in."""
    index = comparison.worst_index
    if len(index) != 4 or math.isnan(comparison.candidate_error):
        return comparison
    where = segment_of(packs, index[0], index[2])
    return dataclasses.replace(comparison, check=f"{comparison.check} worst in {where.describe()}")
