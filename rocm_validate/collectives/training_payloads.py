"""Payloads of the training collectives (`formats.TRAINING_COLLECTIVES`) and their checks.

Gradients (all_reduce, reduce_scatter in bf16 / fp16). Rank r's element i is
sign_i x (1 + k_ri / 2^t) x 2^(b_i): t the format's fraction bits, k_ri the top t bits of a
multiplicative hash of i and r (different per rank and position), the sign and the binade b_i in
-2..2 the same on every rank. Every value is exact in the format; the exact sum s_i over the
ranks is exact in float64. Each element's terms share a sign and a binade, so sum |x| = |s|:
nothing cancels, the rounding a wrong reduction adds is as large relative to the bound as it can
be, and a dropped or doubled contribution moves the result by |x_ri| >= 2^(b_i), against a bound of
gamma_(n-1) x sum |x| < gamma_(n-1) x n x 2^(b_i + 1): caught at every element while
2 n gamma_(n-1) < 1, i.e. up to 11 ranks in bf16 and 32 in fp16 (more ranks widen the bound past
one rank's contribution; the check stays sound, only blinder).

The check (`bounded`): on every rank, |result_i - s_i| <= gamma_(n-1) x sum_j |x_ji| for every
element (`formats.sum_bound`: any order or tree of n-1 roundings to the format), NaN never; the
largest error / bound is reported as the margin. The golden is built in slices of CHUNK
elements, so a 1 GiB payload's float64 scratch stays a few hundred MiB.

FP8 weights (all_gather): torchao's float8 all-gather sends the float8 tensor's uint8 view, so
rank r's chunk is the codes (37 i + 101 r) mod 256: every one of the 256 codes in each 256
elements, the formats' NaN codes (e4m3fn 0x7f, 0xff; e5m2 0x7d-0x7f, 0xfd-0xff) and e5m2's
infinities included, checked bit for bit (a NaN whose payload changed is a wrong result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rocm_validate.collectives import payloads
from rocm_validate.collectives.formats import WireFormat, split, sum_bound

CHUNK = 1 << 24  # elements per slice of the golden: 128 MiB of float64
_HASH = 2654435761  # Knuth's multiplicative hash constant (a prime near 2^32 / golden ratio)
_RANK_SALT = 0x9E3779B1


def torch_dtype(fmt: WireFormat) -> torch.dtype:
    return getattr(torch, fmt.dtype)


def gradient(rank: int, offset: int, count: int, fmt: WireFormat, device: Any) -> torch.Tensor:
    """Rank `rank`'s gradient elements offset .. offset+count-1, in float64 (exact in `fmt`)."""
    index = torch.arange(offset, offset + count, device=device, dtype=torch.int64)
    hashed = (index * _HASH + (rank + 1) * _RANK_SALT) % (1 << 31)
    fraction = (hashed >> (31 - fmt.fraction_bits)).to(torch.float64) / 2**fmt.fraction_bits
    sign = 1.0 - 2.0 * ((index // 3) % 2).to(torch.float64)
    binade = torch.exp2(((index % 5) - 2).to(torch.float64))
    return sign * (1.0 + fraction) * binade


def codes(rank: int, count: int, device: Any) -> torch.Tensor:
    """Rank `rank`'s FP8 chunk as its uint8 view: every code in each 256 elements."""
    index = torch.arange(count, device=device, dtype=torch.int64)
    return ((index * 37 + rank * 101) % 256).to(torch.uint8)


def buffers(name: str, rank: int, world: int, count: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(send, receive) buffers of training collective `name` for rank `rank`."""
    op, fmt = split(name)
    if op == "all_gather":
        return codes(rank, count // world, device), torch.empty(count, device=device, dtype=torch.uint8)
    data = _filled(rank, count, fmt, device)
    if op == "all_reduce":
        return data, data
    if op == "reduce_scatter":
        return data, torch.empty(count // world, device=device, dtype=torch_dtype(fmt))
    raise ValueError(f"no training payload for {name!r}")


def _filled(rank: int, count: int, fmt: WireFormat, device: Any) -> torch.Tensor:
    data = torch.empty(count, device=device, dtype=torch_dtype(fmt))
    for start in range(0, count, CHUNK):
        size = min(CHUNK, count - start)
        data[start : start + size] = gradient(rank, start, size, fmt, device).to(data.dtype)
    return data


def _reduced_range(op: str, rank: int, world: int, count: int) -> tuple[int, int]:
    """(offset, elements) of the reduction this rank's result holds."""
    return (0, count) if op == "all_reduce" else (rank * (count // world), count // world)


def corrupt(name: str, rank: int, world: int, count: int, recv: torch.Tensor) -> None:
    """The planted wrong result: this rank's own contribution dropped from every 7th reduced
    element; a gathered FP8 code's lowest bit flipped (a NaN's payload, for the NaN codes)."""
    op, fmt = split(name)
    if op == "all_gather":
        recv[::7] ^= 1
        return
    offset, size = _reduced_range(op, rank, world, count)
    own = gradient(rank, offset, size, fmt, recv.device)
    recv[::7] = (recv[::7].to(torch.float64) - own[::7]).to(recv.dtype)


@dataclass(frozen=True)
class Excess:
    """The elements of a reduced result outside its error bound, and the margin of the rest."""

    count: int  # elements beyond the bound (NaN included)
    first: int | None  # the first of them
    first_found: float
    first_expected: float
    first_bound: float
    largest_ratio: float  # max |found - expected| / bound over the elements

    def merged(self, later: Excess, shift: int) -> Excess:
        """This slice's excess followed by `later`'s, whose indices start at `shift`."""
        keep = self if self.first is not None or later.first is None else later
        first = keep.first if keep is self else (None if later.first is None else later.first + shift)
        return Excess(
            self.count + later.count,
            first,
            keep.first_found,
            keep.first_expected,
            keep.first_bound,
            max(self.largest_ratio, later.largest_ratio),
        )


NO_EXCESS = Excess(0, None, 0.0, 0.0, 0.0, 0.0)


def excess(found: torch.Tensor, exact: torch.Tensor, magnitude: torch.Tensor, terms: int, fmt: WireFormat) -> Excess:
    """Compare a reduced result with the float64 sum `exact` of `terms` contributions whose
    absolute values sum to `magnitude`: every element within sum_bound(terms) x magnitude."""
    bound = sum_bound(terms, fmt) * magnitude
    error = (found.to(torch.float64) - exact).abs().nan_to_num(float("inf"))
    ratio = error / bound
    beyond = ratio > 1
    count = int(beyond.sum())
    largest = float(ratio.max()) if ratio.numel() else 0.0
    if count == 0:
        return Excess(0, None, 0.0, 0.0, 0.0, largest)
    first = int(beyond.nonzero()[0, 0])
    return Excess(count, first, float(found[first]), float(exact[first]), float(bound[first]), largest)


def describe(result: Excess, total: int, name: str, world: int) -> str | None:
    """None within the bound; else how many elements are beyond it, the first and the margin."""
    if result.count == 0:
        return None
    fmt = split(name)[1]
    return (
        f"{result.count} / {total} elements beyond the {fmt.dtype} reduction's error bound "
        f"({result.count / total:.1%}; gamma_{world - 1} x sum|x| = {sum_bound(world, fmt):.3g} x sum|x|); "
        f"first at index {result.first}: expected {result.first_expected:.9g} (float64 sum), found "
        f"{result.first_found:.9g}, bound {result.first_bound:.3g}; greatest error / bound {result.largest_ratio:.3g}"
    )


def bounded(name: str, rank: int, world: int, count: int, recv: torch.Tensor) -> tuple[str | None, float]:
    """A reduced result against the float64 sum of every rank's contribution, in slices."""
    op, fmt = split(name)
    offset, size = _reduced_range(op, rank, world, count)
    total = NO_EXCESS
    for start in range(0, size, CHUNK):
        part = min(CHUNK, size - start)
        exact = torch.zeros(part, device=recv.device, dtype=torch.float64)
        magnitude = torch.zeros_like(exact)
        for j in range(world):  # float64 adds these values exactly, in any order
            term = gradient(j, offset + start, part, fmt, recv.device)
            exact += term
            magnitude += term.abs()
        total = total.merged(excess(recv[start : start + part], exact, magnitude, world, fmt), start)
    return describe(total, size, name, world), total.largest_ratio


def check(name: str, rank: int, world: int, count: int, recv: torch.Tensor) -> tuple[str | None, float | None]:
    """(what is wrong or None, the largest error / bound: None for the bit-for-bit payloads)."""
    op, fmt = split(name)
    if op != "all_gather":
        return bounded(name, rank, world, count, recv)
    want = torch.cat([codes(j, count // world, recv.device) for j in range(world)])
    return byte_mismatch(recv, want, fmt), None


def byte_mismatch(found: torch.Tensor, want: torch.Tensor, fmt: WireFormat) -> str | None:
    """None when the uint8 views are equal; else the count and the first code that differs, in
    hex and as the format reads it."""
    wrong = found != want
    count = int(wrong.sum())
    if count == 0:
        return None
    first = int(wrong.nonzero()[0, 0])
    dtype = torch_dtype(fmt)

    def code(value: torch.Tensor) -> str:
        return f"0x{int(value):02x} ({float(value.view(1).view(dtype).float()):g})"

    return (
        f"{count} / {found.numel()} {fmt.dtype} codes differ ({count / found.numel():.1%}); first at index {first}: "
        f"expected {code(want[first])}, found {code(found[first])}"
    )


def call(name: str, send: torch.Tensor, recv: torch.Tensor) -> None:
    payloads.call(split(name)[0], send, recv)
