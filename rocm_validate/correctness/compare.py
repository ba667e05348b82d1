"""The one comparator of the correctness suite: candidate vs golden, measured against a reference.

`compare` takes the candidate (the fast path under test), the golden (float64, or exact by
construction) and optionally the plain low-precision reference (same dtype, unfused eager math).
The candidate passes when its worst error is within max(floor, k * the reference's worst error)
(see `rocm_validate.correctness.tolerances`), it has no NaN or Inf where the golden is finite, and its SQNR
reaches the tolerance's minimum if it has one. The result is a frozen `Comparison` whose
`message()` is shaped like `torch.testing.assert_close`'s: mismatch count, the worst element
with its index, the errors, their ratio, SQNR and the tolerance with its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from rocm_validate.correctness.tolerances import Tolerance

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Comparison:
    """What one check measured, and whether it passed."""

    check: str
    tolerance: Tolerance
    shape: tuple[int, ...]
    numel: int
    candidate_error: float  # max |candidate - golden| over finite golden entries (inf if non-finite there)
    mismatches: int
    reference_error: float | None = None  # same for the low-precision reference; None without one
    allowed: float | None = None  # the bound the candidate error must meet; None for SQNR-only checks
    nonfinite: int = 0  # candidate NaN/Inf where the golden is finite
    worst_index: tuple[int, ...] = ()
    worst_candidate: float = math.nan
    worst_golden: float = math.nan
    worst_relative: float = math.nan
    worst_relative_index: tuple[int, ...] = ()
    sqnr_db: float = math.nan
    reference_sqnr_db: float | None = None
    problem: str = ""  # a structural failure (shape mismatch) that makes the numbers meaningless

    @property
    def ratio(self) -> float | None:
        """candidate error / reference error, the quantity k bounds."""
        if self.reference_error is None:
            return None
        if self.reference_error == 0:
            return 0.0 if self.candidate_error == 0 else math.inf
        return self.candidate_error / self.reference_error

    @property
    def sqnr_ok(self) -> bool:
        return self.tolerance.min_sqnr_db is None or self.sqnr_db >= self.tolerance.min_sqnr_db

    @property
    def passed(self) -> bool:
        return not self.problem and self.mismatches == 0 and self.sqnr_ok

    def headline(self) -> str:
        if self.problem:
            return self.problem
        if self.nonfinite:
            return "the candidate has NaN or Inf where the golden is finite"
        if self.mismatches:
            return "the candidate differs from the golden beyond tolerance"
        if not self.sqnr_ok:
            return f"SQNR {_db(self.sqnr_db)} is below the required {self.tolerance.min_sqnr_db:g} dB"
        return "within tolerance"

    def message(self) -> str:
        """assert_close-shaped report of this comparison."""
        lines = [f"{self.check}: {self.headline()}"]
        if self.problem:
            return "\n".join(lines + [f"Tolerance: {self.tolerance.describe()}"])
        percent = 100.0 * self.mismatches / self.numel if self.numel else 0.0
        lines.append(f"Mismatched elements: {self.mismatches} / {self.numel} ({percent:.1f}%)")
        allowed = "" if self.allowed is None else f"; allowed up to {self.allowed:.3g}"
        lines.append(
            f"Greatest absolute difference: {self.candidate_error:.3g} at index {self.worst_index} "
            f"(candidate {self.worst_candidate:.6g}, golden {self.worst_golden:.6g}{allowed})"
        )
        lines.append(f"Greatest relative difference: {self.worst_relative:.3g} at index {self.worst_relative_index}")
        lines.append(self._error_line())
        required = "" if self.tolerance.min_sqnr_db is None else f" (needs >= {self.tolerance.min_sqnr_db:g} dB)"
        reference = "" if self.reference_sqnr_db is None else f", reference {_db(self.reference_sqnr_db)}"
        lines.append(f"SQNR against the golden: candidate {_db(self.sqnr_db)}{reference}{required}")
        lines.append(f"Non-finite in the candidate where the golden is finite: {self.nonfinite}")
        lines.append(f"Tolerance: {self.tolerance.describe()}")
        return "\n".join(lines)

    def _error_line(self) -> str:
        tol = self.tolerance
        if tol.k is None:
            return f"Error: candidate {self.candidate_error:.3g} (not bounded: this check gates on SQNR)"
        floor = f"floor {tol.atol:g} + {tol.rtol:g} x max|golden|"
        if self.reference_error is None:
            return f"Error: candidate {self.candidate_error:.3g}; allowed {self.allowed:.3g} = {floor} (no reference)"
        ratio = self.ratio if self.ratio is not None else math.nan
        return (
            f"Error: candidate {self.candidate_error:.3g}, low-precision reference {self.reference_error:.3g}, "
            f"ratio {ratio:.3g} (k = {tol.k:g}); allowed {self.allowed:.3g} = max({floor}, "
            f"{tol.k:g} x {self.reference_error:.3g})"
        )


def _db(value: float) -> str:
    if math.isnan(value):
        return "n/a (non-finite values)"
    return "inf dB (identical)" if math.isinf(value) and value > 0 else f"{value:.1f} dB"


def sqnr_db(golden: torch.Tensor, candidate: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio 20*log10(||golden|| / ||golden - candidate||) in dB.

    inf when identical; NaN when either holds NaN or Inf.
    """
    import torch

    g = golden.detach().to(torch.float64)
    c = candidate.detach().to(device=g.device, dtype=torch.float64)
    if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(c).all())):
        return math.nan
    noise = float(torch.linalg.vector_norm(g - c))
    signal = float(torch.linalg.vector_norm(g))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 20.0 * math.log10(signal / noise)


def _unravel(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return tuple(reversed(index))


def _max_error(golden: torch.Tensor, other: torch.Tensor, finite: torch.Tensor) -> float:
    """max |other - golden| over entries where both are finite."""
    import torch

    both = finite & torch.isfinite(other)
    if not bool(both.any()):
        return 0.0
    return float((other[both] - golden[both]).abs().max())


def compare(
    check: str,
    candidate: torch.Tensor,
    golden: torch.Tensor,
    tolerance: Tolerance,
    reference: torch.Tensor | None = None,
) -> Comparison:
    """Compare `candidate` with `golden` under `tolerance`, measured against `reference`.

    All arithmetic is float64 on the golden's device. Where the golden is NaN the candidate must
    be NaN; where it is +-Inf, the same infinity; where it is finite, a finite value within the bound.
    """
    import torch

    g = golden.detach().to(torch.float64)
    c = candidate.detach().to(device=g.device, dtype=torch.float64)
    shape = tuple(g.shape)
    if tuple(c.shape) != shape:
        return _structural(check, tolerance, shape, f"candidate shape {tuple(c.shape)} != golden shape {shape}")
    r = None if reference is None else reference.detach().to(device=g.device, dtype=torch.float64)
    if r is not None and tuple(r.shape) != shape:
        return _structural(check, tolerance, shape, f"reference shape {tuple(r.shape)} != golden shape {shape}")

    finite = torch.isfinite(g)
    candidate_finite = torch.isfinite(c)
    nonfinite = finite & ~candidate_finite
    special_wrong = ~finite & ~((torch.isnan(g) & torch.isnan(c)) | (g == c))
    diff = torch.where(finite & candidate_finite, (c - g).abs(), torch.zeros_like(g))
    diff = torch.where(nonfinite | special_wrong, torch.full_like(g, math.inf), diff)

    reference_error = None if r is None else _max_error(g, r, finite)
    scale = float(g[finite].abs().max()) if bool(finite.any()) else 0.0
    allowed = None
    if tolerance.k is not None:
        allowed = max(tolerance.atol + tolerance.rtol * scale, tolerance.k * (reference_error or 0.0))
    bound = math.inf if allowed is None else allowed
    mismatched = (diff > bound) | nonfinite | special_wrong

    numel = g.numel()
    worst_flat = int(diff.reshape(-1).argmax()) if numel else 0
    relative = torch.where(g != 0, diff / g.abs(), torch.where(diff > 0, math.inf, 0.0))
    relative = torch.where(finite, relative, diff)
    worst_rel_flat = int(relative.reshape(-1).argmax()) if numel else 0
    return Comparison(
        check=check,
        tolerance=tolerance,
        shape=shape,
        numel=numel,
        candidate_error=float(diff.reshape(-1)[worst_flat]) if numel else 0.0,
        reference_error=reference_error,
        allowed=allowed,
        mismatches=int(mismatched.sum()),
        nonfinite=int(nonfinite.sum()),
        worst_index=_unravel(worst_flat, shape),
        worst_candidate=float(c.reshape(-1)[worst_flat]) if numel else 0.0,
        worst_golden=float(g.reshape(-1)[worst_flat]) if numel else 0.0,
        worst_relative=float(relative.reshape(-1)[worst_rel_flat]) if numel else 0.0,
        worst_relative_index=_unravel(worst_rel_flat, shape),
        sqnr_db=sqnr_db(g[finite], c[finite]) if not bool(nonfinite.any()) else math.nan,
        reference_sqnr_db=None if r is None else sqnr_db(g[finite], r[finite]),
    )


def _structural(check: str, tolerance: Tolerance, shape: tuple[int, ...], problem: str) -> Comparison:
    numel = math.prod(shape)
    return Comparison(check, tolerance, shape, numel, candidate_error=math.inf, mismatches=numel, problem=problem)


def assert_passed(comparisons: Iterable[Comparison]) -> None:
    """Fail the test with every failed comparison's message, or return when all passed."""
    __tracebackhide__ = True
    done = list(comparisons)
    failed = [c for c in done if not c.passed]
    if failed:
        header = f"{len(failed)} of {len(done)} checks failed"
        raise AssertionError("\n\n".join([header, *(c.message() for c in failed)]))
