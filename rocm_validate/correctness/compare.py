"""The one comparator of the correctness suite: candidate vs golden, measured against a reference.

`compare` takes the candidate (the fast path under test), the golden (float64, or exact by
construction) and optionally the plain low-precision reference (same dtype, unfused eager math,
or the golden correctly rounded). The candidate passes when

* no element's error exceeds max(floor, k x the reference's worst error);
* its error norm stays within k_norm x the reference's error norm (a wrong result spread thinly
  over many elements, such as a halved gradient, fails here);
* it has no NaN or Inf where the golden is finite;
* its SQNR reaches the tolerance's minimum, if it has one;
* its systematic error (mean signed error, and mean error towards zero) is no larger than
  max_bias x the reference's RMS error, or not statistically significant: rounding the wrong way
  stays within an ulp per element, but every error leans one way and accumulates in training.

See `rocm_validate.correctness.tolerances` for the numbers. The result is a frozen `Comparison`
whose `message()` is shaped like `torch.testing.assert_close`'s: mismatch count, the worst
element with its index, the errors, their ratio, norms, SQNR, bias and the tolerance with its
source.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    norm_error: float = math.nan  # ||candidate - golden||_2 over finite golden entries
    reference_norm_error: float | None = None
    allowed_norm: float | None = None  # the bound the error norm must meet; None without k_norm
    bias: float = 0.0  # the larger systematic error, over the reference's RMS error (0 when not significant)
    bias_direction: str = ""  # "high", "low", "towards zero" or "away from zero"
    bias_sigmas: float = 0.0  # how many standard errors the systematic error lies from zero
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
    def norm_ok(self) -> bool:
        return self.allowed_norm is None or self.norm_error <= self.allowed_norm

    @property
    def bias_ok(self) -> bool:
        return self.tolerance.max_bias is None or self.bias <= self.tolerance.max_bias

    @property
    def passed(self) -> bool:
        return not self.problem and self.mismatches == 0 and self.sqnr_ok and self.norm_ok and self.bias_ok

    def headline(self) -> str:
        if self.problem:
            return self.problem
        if self.nonfinite:
            return "the candidate has NaN or Inf where the golden is finite"
        if self.mismatches:
            return "the candidate differs from the golden beyond tolerance"
        if not self.norm_ok:
            return (
                f"the candidate's error norm {self.norm_error:.3g} exceeds the allowed {self.allowed_norm:.3g} "
                f"({self.tolerance.k_norm:g} x the reference's {self.reference_norm_error:.3g})"
            )
        if not self.sqnr_ok:
            return f"SQNR {_db(self.sqnr_db)} is below the required {self.tolerance.min_sqnr_db:g} dB"
        if not self.bias_ok:
            return (
                f"the candidate's errors lean {self.bias_direction}: a systematic error of {self.bias:.2f} x the "
                f"reference's RMS error ({self.bias_sigmas:.0f} standard errors from zero), more than the "
                f"{self.tolerance.max_bias:g} allowed"
            )
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
        if self.allowed_norm is not None:
            lines.append(
                f"Error norm: candidate {self.norm_error:.3g}, reference {_number(self.reference_norm_error)}, "
                f"allowed {self.allowed_norm:.3g} (k_norm = {self.tolerance.k_norm:g})"
            )
        if self.tolerance.max_bias is not None:
            lines.append(
                f"Systematic error: {self.bias:.3g} x the reference's RMS error, leaning {self.bias_direction or 'nowhere'} "
                f"({self.bias_sigmas:.1f} standard errors; allowed {self.tolerance.max_bias:g})"
            )
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


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


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
    both = finite & candidate_finite
    norm_error = (
        float(torch.linalg.vector_norm(torch.where(both, c - g, 0.0))) if not bool(nonfinite.any()) else math.inf
    )
    reference_norm = (
        None if r is None else float(torch.linalg.vector_norm(torch.where(finite & torch.isfinite(r), r - g, 0.0)))
    )
    allowed_norm = None
    if tolerance.k_norm is not None:
        count = int(finite.sum())
        floor = tolerance.atol * math.sqrt(count) + tolerance.rtol * float(torch.linalg.vector_norm(g[finite]))
        allowed_norm = max(floor, tolerance.k_norm * (reference_norm or 0.0))
    bias = _systematic_error(g, c, r, both)

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
        norm_error=norm_error,
        reference_norm_error=reference_norm,
        allowed_norm=allowed_norm,
        bias=bias.ratio,
        bias_direction=bias.direction,
        bias_sigmas=bias.sigmas,
    )


# A systematic error counts when it lies this many standard errors from zero: far beyond chance
# for the millions of elements a check compares, so only a real lean is ever reported.
BIAS_SIGMAS = 6.0


@dataclass(frozen=True)
class _Bias:
    ratio: float  # |mean error| over the reference's RMS error; 0 when not significant
    direction: str
    sigmas: float


_NO_BIAS = _Bias(0.0, "", 0.0)


def _systematic_error(g: torch.Tensor, c: torch.Tensor, r: torch.Tensor | None, both: torch.Tensor) -> _Bias:
    """The larger of two systematic errors of the candidate: its mean signed error (leaning high
    or low) and its mean error along the golden's sign (leaning towards or away from zero, as
    truncation does), each in units of the reference's RMS error, counted only when it lies
    BIAS_SIGMAS standard errors from zero. Without a reference (or an exact one) there is no
    scale to judge a lean against, and no bias is reported."""
    import torch

    if r is None:
        return _NO_BIAS
    mask = both & torch.isfinite(r)
    count = int(mask.sum())
    if count < 2:
        return _NO_BIAS
    error = (c - g)[mask]
    reference_rms = float(torch.sqrt(torch.mean(((r - g)[mask]) ** 2)))
    if reference_rms == 0:
        return _NO_BIAS
    worst = _NO_BIAS
    for values, directions in (
        (error, ("high", "low")),
        (error * torch.sign(g[mask]), ("away from zero", "towards zero")),
    ):
        mean = float(values.mean())
        standard_error = float(values.std()) / math.sqrt(count)
        sigmas = math.inf if standard_error == 0 else abs(mean) / standard_error
        if mean != 0 and sigmas >= BIAS_SIGMAS and abs(mean) / reference_rms > worst.ratio:
            worst = _Bias(abs(mean) / reference_rms, directions[0] if mean > 0 else directions[1], sigmas)
    return worst


def _structural(check: str, tolerance: Tolerance, shape: tuple[int, ...], problem: str) -> Comparison:
    numel = math.prod(shape)
    return Comparison(check, tolerance, shape, numel, candidate_error=math.inf, mismatches=numel, problem=problem)


def margins(comparison: Comparison) -> dict[str, Any]:
    """How close a comparison came to each of its bounds, JSON-ready: what the report records for
    every check, so a healthy run shows the margin each tolerance leaves."""
    tol = comparison.tolerance

    def finite(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else round(value, 4)

    norm_ratio = None
    if comparison.reference_norm_error:
        norm_ratio = comparison.norm_error / comparison.reference_norm_error
    return {
        "check": comparison.check,
        "passed": comparison.passed,
        "ratio": finite(comparison.ratio),
        "k": tol.k,
        "norm_ratio": finite(norm_ratio),
        "k_norm": tol.k_norm,
        "sqnr_db": finite(comparison.sqnr_db),
        "reference_sqnr_db": finite(comparison.reference_sqnr_db),
        "min_sqnr_db": tol.min_sqnr_db,
        "bias": finite(comparison.bias),
        "max_bias": tol.max_bias,
    }


_RECORDED: contextvars.ContextVar[list[Comparison] | None] = contextvars.ContextVar(
    "rocm_validate_comparisons", default=None
)


@contextlib.contextmanager
def recording_comparisons() -> Iterator[list[Comparison]]:
    """Collect every comparison `assert_passed` judges inside the block (the correctness suite
    records them per test, so the report shows each check's margins)."""
    found: list[Comparison] = []
    token = _RECORDED.set(found)
    try:
        yield found
    finally:
        _RECORDED.reset(token)


def assert_passed(comparisons: Iterable[Comparison]) -> None:
    """Fail the test with every failed comparison's message, or return when all passed."""
    __tracebackhide__ = True
    done = list(comparisons)
    sink = _RECORDED.get()
    if sink is not None:
        sink.extend(done)
    failed = [c for c in done if not c.passed]
    if failed:
        header = f"{len(failed)} of {len(done)} checks failed"
        raise AssertionError("\n\n".join([header, *(c.message() for c in failed)]))
