"""Payloads whose collective results are known bit for bit, and the check of every rank's result.

Rank r's element i is ((i x 7 + r x 13) mod 61) + 1: a small integer, different per rank and per
position, so a result built from the wrong rank's data or the wrong chunk differs somewhere, and
any sum over ranks stays an integer well inside float32's exact range (61 x world < 2^24). The
expected result is computed on each rank from the same formula; equality is exact, not a
tolerance. Sizes follow nccl-tests' size column (the largest buffer on a rank).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

ELEMENT_BYTES = 4  # float32, nccl-tests' default data type


def pattern(rank: int, count: int, device: Any, offset: int = 0) -> torch.Tensor:
    """Rank `rank`'s elements offset .. offset+count-1, built in int32 (reduced mod 61 first, so
    no product overflows) to keep a 1 GiB payload's scratch memory small."""
    index = torch.arange(offset, offset + count, device=device, dtype=torch.int32)
    return (((index % 61) * 7 + (rank * 13) % 61) % 61 + 1).to(torch.float32)


def element_count(nbytes: int, world: int, element_bytes: int = ELEMENT_BYTES) -> int:
    """Elements of the largest buffer: as many as fit in `nbytes`, a multiple of `world` so
    every rank's chunk is equal (at least one element each)."""
    return max(world, (nbytes // element_bytes) // world * world)


def _gather(output: torch.Tensor, chunk: torch.Tensor) -> Any:
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
    return gather(output, chunk)


def _reduce_scatter(output: torch.Tensor, full: torch.Tensor) -> Any:
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return scatter(output, full)


_CALLS: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "all_reduce": lambda send, recv: dist.all_reduce(recv),
    "broadcast": lambda send, recv: dist.broadcast(recv, src=0),
    "all_gather": lambda send, recv: _gather(recv, send),
    "reduce_scatter": lambda send, recv: _reduce_scatter(recv, send),
    "all_to_all": lambda send, recv: dist.all_to_all_single(recv, send),
}


def buffers(op: str, rank: int, world: int, count: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(send, receive) buffers of `op` for rank `rank`: the same tensor for the in-place ones."""
    if op in ("all_reduce", "broadcast"):
        data = pattern(rank, count, device)
        return data, data
    if op == "all_gather":
        return pattern(rank, count // world, device), torch.empty(count, device=device)
    if op == "reduce_scatter":
        return pattern(rank, count, device), torch.empty(count // world, device=device)
    if op == "all_to_all":
        return pattern(rank, count, device), torch.empty(count, device=device)
    raise ValueError(f"unknown collective {op!r}")


def call(op: str, send: torch.Tensor, recv: torch.Tensor) -> None:
    _CALLS[op](send, recv)


def expected(op: str, rank: int, world: int, count: int, device: Any) -> torch.Tensor:
    """What rank `rank`'s receive buffer must hold after `op` (root 0 for broadcast)."""
    chunk = count // world
    if op == "all_reduce":
        return sum((pattern(j, count, device) for j in range(world)), torch.zeros(count, device=device))
    if op == "broadcast":
        return pattern(0, count, device)
    if op == "all_gather":
        return torch.cat([pattern(j, chunk, device) for j in range(world)])
    if op == "reduce_scatter":
        return sum((pattern(j, chunk, device, rank * chunk) for j in range(world)), torch.zeros(chunk, device=device))
    if op == "all_to_all":
        return torch.cat([pattern(j, chunk, device, rank * chunk) for j in range(world)])
    raise ValueError(f"unknown collective {op!r}")


def check(op: str, rank: int, world: int, count: int, recv: torch.Tensor) -> str | None:
    """None when rank `rank`'s result of `op` is exactly what it must hold."""
    return mismatch(recv, expected(op, rank, world, count, recv.device))


def mismatch(found: torch.Tensor, want: torch.Tensor) -> str | None:
    """None when equal bit for bit; else how many elements differ, the first one and the largest
    difference (as torch.testing.assert_close words it)."""
    if found.shape != want.shape:
        return f"shape {tuple(found.shape)}, expected {tuple(want.shape)}"
    wrong = found != want
    count = int(wrong.sum())
    if count == 0:
        return None
    first = int(wrong.nonzero()[0, 0])
    largest = float((found - want).abs().nan_to_num(float("inf")).max())
    return (
        f"{count} / {found.numel()} elements differ ({count / found.numel():.1%}); first at index {first}: "
        f"expected {want[first].item():g}, found {found[first].item():g}; greatest difference {largest:g}"
    )
