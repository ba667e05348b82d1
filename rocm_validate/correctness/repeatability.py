"""Silent data corruption under sustained load: deterministic kernels (a GEMM, an attention
forward) on fixed inputs, run for a stated time with every result compared bit for bit with the
first, and a pattern written over a large share of free device memory and read back.

A healthy GPU gives the same bits every time: cuBLAS / hipBLASLt GEMMs and the flash / memory-
efficient attention forward are deterministic for a fixed shape on one device (attention backward
is not: its kernels may accumulate with atomics). One differing element is a hardware fault,
named with the iteration, the element and both values. DCGM's diagnostic runs GEMMs for 180 s
comparing each repeat with the first; RVS's GST has a self-check (reference/node-validation-facts.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# Seconds each workload runs, per validation level, on a GPU. The CPU runs the same code path on
# tiny sizes for CI_SECONDS whatever the level.
SUSTAINED_SECONDS = {"quick": 5.0, "standard": 15.0, "extended": 60.0}
CI_SECONDS = 1.0
MIN_ITERATIONS = 3
# Share of the free device memory the pattern test fills, leaving room for the runtime and allocator.
MEMORY_SHARE = 0.85
CHUNK_BYTES = 1 << 30  # on a GPU; the CPU writes CI_MEMORY_BYTES in 4 chunks
CI_MEMORY_BYTES = 16 << 20
PATTERNS = ("zeros", "ones", "0xaaaaaaaa", "0x55555555", "address")


def sustained_seconds(level: str, is_gpu: bool) -> float:
    """How long each repeatability workload runs: by level on a GPU, CI-sized on the CPU."""
    if level not in SUSTAINED_SECONDS:
        raise ValueError(f"level must be one of {', '.join(SUSTAINED_SECONDS)}; found {level!r}")
    return SUSTAINED_SECONDS[level] if is_gpu else CI_SECONDS


@dataclass(frozen=True)
class Mismatch:
    """Where a result first differed from the expected bits."""

    iteration: int  # 0 is the reference run; for the memory test, the pattern's pass
    where: str  # the element: '(1023, 17)' or 'chunk 3 element 12345'
    expected: str
    found: str
    count: int  # elements that differ in that result

    def describe(self, what: str, device: str) -> str:
        return (
            f"{device}: {what}: iteration {self.iteration}, element {self.where}: expected {self.expected}, found "
            f"{self.found} ({self.count} element(s) differ). A deterministic kernel on fixed inputs gave different bits: "
            "a hardware fault (memory, compute unit, power); drain this GPU and run the vendor's diagnostics"
        )


@dataclass(frozen=True)
class RepeatResult:
    """How a sustained run went: iterations done, seconds taken, the first mismatch if any."""

    iterations: int
    seconds: float
    mismatch: Mismatch | None = None


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as integers, so NaNs and -0.0 compare exactly."""
    kinds = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return tensor.contiguous().view(kinds[tensor.element_size()])


def _value(tensor: torch.Tensor, index: tuple[int, ...]) -> str:
    element = tensor[index]
    bits = int(_bits(element.reshape(1))[0].item()) & ((1 << (8 * tensor.element_size())) - 1)
    return f"{element.item():.9g} (bits {bits:#0{2 + 2 * tensor.element_size()}x})"


def first_difference(expected: torch.Tensor, found: torch.Tensor, iteration: int) -> Mismatch | None:
    """None when `found` has exactly the bits of `expected`, else the first differing element."""
    if torch.equal(_bits(expected), _bits(found)):
        return None
    differ = _bits(expected) != _bits(found)
    index = tuple(int(i) for i in differ.nonzero()[0].tolist())
    return Mismatch(iteration, str(index), _value(expected, index), _value(found, index), int(differ.sum().item()))


def repeat_until(
    run: Callable[[], torch.Tensor],
    seconds: float,
    min_iterations: int = MIN_ITERATIONS,
    clock: Callable[[], float] = time.monotonic,
) -> RepeatResult:
    """Run `run` for `seconds` (at least `min_iterations` times after the first), comparing every
    result bit for bit with the first; stop at the first mismatch."""
    started = clock()
    reference = run().clone()
    iteration = 0
    while iteration < min_iterations or clock() - started < seconds:
        iteration += 1
        mismatch = first_difference(reference, run(), iteration)
        if mismatch is not None:
            return RepeatResult(iteration, clock() - started, mismatch)
    return RepeatResult(iteration, clock() - started)


def gemm_workload(device: torch.device | str, size: int, dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    """A square GEMM on fixed random inputs (seeded on the host, so every GPU gets the same)."""
    g = torch.Generator().manual_seed(1414)
    a = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    return lambda: a @ b


def attention_workload(
    device: torch.device | str, shape: Sequence[int], dtype: torch.dtype
) -> Callable[[], torch.Tensor]:
    """A causal SDPA forward on fixed random inputs (batch, heads, sequence, head dim)."""
    g = torch.Generator().manual_seed(2718)
    q, k, v = (torch.randn(*shape, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def pattern_values(pattern: str, start: int, count: int, device: torch.device | str) -> torch.Tensor:
    """A chunk's expected int32 contents: a constant, or (for 'address') a hash of each element's
    position in the whole allocation, which also catches writes landing at the wrong address."""
    if pattern == "address":
        index = torch.arange(start, start + count, device=device, dtype=torch.int64)
        return ((index * 2654435761) & 0xFFFFFFFF).to(torch.int64).sub_(1 << 31).to(torch.int32)
    constant = {"zeros": 0, "ones": -1, "0xaaaaaaaa": 0xAAAAAAAA - (1 << 32), "0x55555555": 0x55555555}[pattern]
    return torch.full((count,), constant, device=device, dtype=torch.int32)


def memory_chunks(device: torch.device | str, total_bytes: int, chunk_bytes: int) -> list[torch.Tensor]:
    """Allocate up to `total_bytes` as int32 chunks (fewer when an allocation fails)."""
    chunks: list[torch.Tensor] = []
    while sum(c.numel() * 4 for c in chunks) + chunk_bytes <= total_bytes:
        try:
            chunks.append(torch.empty(chunk_bytes // 4, device=device, dtype=torch.int32))
        except torch.OutOfMemoryError:
            break
    return chunks


def memory_pattern(
    chunks: list[torch.Tensor],
    patterns: Sequence[str] = PATTERNS,
    after_write: Callable[[list[torch.Tensor]], None] | None = None,
) -> Mismatch | None:
    """Write each pattern over every chunk, then read every chunk back: the data sits in memory
    while the other chunks are written. `after_write` lets a test corrupt an element (the
    negative control). Returns the first mismatch (chunk and element named)."""
    for number, pattern in enumerate(patterns, start=1):
        offsets = [sum(c.numel() for c in chunks[:i]) for i in range(len(chunks))]
        for chunk, offset in zip(chunks, offsets):
            chunk.copy_(pattern_values(pattern, offset, chunk.numel(), chunk.device))
        if after_write is not None:
            after_write(chunks)
        for position, (chunk, offset) in enumerate(zip(chunks, offsets)):
            mismatch = first_difference(pattern_values(pattern, offset, chunk.numel(), chunk.device), chunk, number)
            if mismatch is not None:
                element = mismatch.where.strip("(),")
                return Mismatch(
                    number,
                    f"chunk {position} element {element} (pattern {pattern})",
                    mismatch.expected,
                    mismatch.found,
                    mismatch.count,
                )
    return None
