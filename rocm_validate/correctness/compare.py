"""The one comparator of the correctness suite: candidate vs golden, measured against a reference.

`compare` takes the candidate (the fast path under test), the golden (float64, or exact by
construction) and optionally the plain low-precision reference (same dtype, unfused eager math,
or the golden correctly rounded). The candidate passes when

* no element's error exceeds max(allowance, k x the reference's worst error), the allowance
  being atol + rtol_of_max x max|golden| (max over the whole tensor);
* its error norm stays within k_norm x the reference's error norm (a wrong result spread thinly
  over many elements, such as a halved gradient, fails here);
* it has no NaN or Inf where the golden is finite;
* its SQNR reaches the tolerance's minimum, if it has one;
* its error norm stays within the row's `Accuracy` factor of the error norm a correct
  implementation in its precision makes on the same inputs (a kernel that loses one bit of
  accuracy, such as split-K partial sums reduced in bf16, fails here);
* it is no farther from the golden than correct arithmetic in its precision can be, by the row's
  `ErrorModel` (`rocm_validate.correctness.error_model`): every element, the error norm, and the
  lean (mean signed error and mean error away from zero, over mean|golden|, in ulps of the
  precision, when statistically significant). This bound needs no reference, so a bug in a kernel
  the candidate and the reference share cannot hide behind their ratio; the lean sees a
  systematic change (a 0.1% scale, rounding the wrong way) far below one rounding per element.

Where the golden is zero or tiny, every criterion falls back to the allowance
(the precision's underflow, and the row's atol), never a ratio of zeros. See
`rocm_validate.correctness.tolerances` for the numbers. The result is a frozen `Comparison`
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
from typing import TYPE_CHECKING

from rocm_validate.correctness.error_model import (
    Accuracy,
    ErrorModel,
    accumulator,
    bits_lost,
    growth,
    underflow,
    unit_roundoff,
)
from rocm_validate.correctness.tolerances import Tolerance
from rocm_validate.results.margins import CheckMargins

if TYPE_CHECKING:
    import torch


__all__ = ["Comparison", "assert_passed", "compare", "sqnr_db"]


@dataclass(frozen=True)
class ModelJudgement:
    """How the candidate stands against its row's error model (float64 golden, no reference)."""

    precision: str  # the dtype whose unit roundoff the model is written in
    unit: float  # that unit roundoff u
    ratio: float = 0.0  # max over elements of |c - g| / bound; above 1 fails
    mismatches: int = 0  # elements beyond their bound
    worst_index: tuple[int, ...] = ()
    worst_bound: float = math.nan  # the bound at the worst element
    norm_ratio: float | None = None  # ||c - g|| / (norm u ||g||); None without a norm bound
    lean: float = 0.0  # the larger significant systematic error, over mean|golden| (signed)
    lean_direction: str = ""  # "high", "low", "away from zero" or "towards zero"
    lean_sigmas: float = 0.0  # how many standard errors the lean lies from zero

    @property
    def lean_ulps(self) -> float:
        return abs(self.lean) / self.unit if self.unit else 0.0

    def lean_ok(self, model: ErrorModel) -> bool:
        return abs(self.lean) <= model.allowed_lean(self.precision)


@dataclass(frozen=True)
class AccuracyJudgement:
    """The candidate's error norm against the error norm a correct implementation makes."""

    precision: str
    predicted: float  # the correct implementation's error norm (with the precision's underflow)
    ratio: float  # the candidate's error norm / predicted
    allowed: float  # the largest ratio that passes: the row's factor, widened for few elements

    @property
    def bits_lost(self) -> float:
        return bits_lost(self.ratio)

    def ok(self) -> bool:
        return self.ratio <= self.allowed

    def describe(self, accuracy: Accuracy) -> str:
        """'error norm 2.1x what a correct bfloat16 GEMM makes here: about 1.1 bits lost'."""
        what = (
            f"the {self.precision} reference's"
            if accuracy.against == "reference"
            else f"what a correct {self.precision} {accuracy.op} makes here"
        )
        lost = self.bits_lost
        bits = f"about {lost:.1f} bit{'' if round(lost, 1) == 1 else 's'} lost" if lost > 0 else "no bit lost"
        return f"error norm {self.ratio:.3g}x {what}: {bits} (allowed {self.allowed:.3g}x)"


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
    model: ModelJudgement | None = None  # the absolute test against float64; None for exact rows
    accuracy: AccuracyJudgement | None = None  # the precision test; None where the row has none
    norm_allowance: float = 0.0  # the error norm always allowed: the allowance over every element
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
        """SQNR reaches its minimum, or the error is within the allowance (a zero golden has no signal)."""
        minimum = self.tolerance.min_sqnr_db
        return minimum is None or self.sqnr_db >= minimum or self.norm_error <= self.norm_allowance

    @property
    def accuracy_ok(self) -> bool:
        accuracy = self.tolerance.accuracy
        return self.accuracy is None or accuracy is None or self.accuracy.ok()

    @property
    def norm_ok(self) -> bool:
        return self.allowed_norm is None or self.norm_error <= self.allowed_norm

    @property
    def model_ok(self) -> bool:
        """Within the error model: every element, the norm (when bounded) and the lean."""
        judged = self.model
        if judged is None:
            return True
        within_norm = judged.norm_ratio is None or judged.norm_ratio <= 1.0
        return judged.mismatches == 0 and within_norm and self.lean_ok

    @property
    def lean_ok(self) -> bool:
        model = self.tolerance.model
        return self.model is None or model is None or self.model.lean_ok(model)

    @property
    def passed(self) -> bool:
        return (
            not self.problem
            and self.mismatches == 0
            and self.sqnr_ok
            and self.norm_ok
            and self.model_ok
            and self.accuracy_ok
        )

    def headline(self) -> str:
        if self.problem:
            return self.problem
        if self.nonfinite:
            return "the candidate has NaN or Inf where the golden is finite"
        if self.mismatches:
            return "the candidate differs from the golden beyond tolerance"
        judged, model = self.model, self.tolerance.model
        if judged is not None and model is not None and judged.mismatches:
            return (
                f"the candidate is farther from float64 than correct {judged.precision} arithmetic can be: "
                f"{judged.mismatches} elements beyond the error model, the worst {judged.ratio:.3g} x its bound"
            )
        if not self.norm_ok:
            return (
                f"the candidate's error norm {self.norm_error:.3g} exceeds the allowed {self.allowed_norm:.3g} "
                f"({self.tolerance.k_norm:g} x the reference's {self.reference_norm_error:.3g})"
            )
        if judged is not None and judged.norm_ratio is not None and judged.norm_ratio > 1.0:
            return (
                f"the candidate's error norm is {judged.norm_ratio:.3g} x what correct {judged.precision} "
                "arithmetic allows"
            )
        if self.accuracy is not None and self.tolerance.accuracy is not None and not self.accuracy_ok:
            return f"the candidate lost accuracy: {self.accuracy.describe(self.tolerance.accuracy)}"
        if not self.sqnr_ok:
            return f"SQNR {_db(self.sqnr_db)} is below the required {self.tolerance.min_sqnr_db:g} dB"
        if judged is not None and model is not None and not self.lean_ok:
            return (
                f"the candidate leans {judged.lean_direction} by {100 * abs(judged.lean):.3g}% of |golden| "
                f"({judged.lean_ulps:.3g} ulp of {judged.precision}, {judged.lean_sigmas:.0f} standard errors "
                f"from zero; allowed {_percent(model.allowed_lean(judged.precision))})"
            )
        return "within tolerance"

    def message(self) -> str:
        """assert_close-shaped report of this comparison."""
        lines = [f"{self.check}: {self.headline()}"]
        if self.problem:
            return "\n".join([*lines, f"Tolerance: {self.tolerance.describe()}"])
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
        lines.extend(self._model_lines())
        if self.accuracy is not None and self.tolerance.accuracy is not None:
            lines.append(
                f"Accuracy: {self.accuracy.describe(self.tolerance.accuracy)}; candidate error norm "
                f"{self.norm_error:.3g}, predicted {self.accuracy.predicted:.3g}"
            )
        required = "" if self.tolerance.min_sqnr_db is None else f" (needs >= {self.tolerance.min_sqnr_db:g} dB)"
        reference = "" if self.reference_sqnr_db is None else f", reference {_db(self.reference_sqnr_db)}"
        lines.append(f"SQNR against the golden: candidate {_db(self.sqnr_db)}{reference}{required}")
        lines.append(f"Non-finite in the candidate where the golden is finite: {self.nonfinite}")
        lines.append(f"Tolerance: {self.tolerance.describe()}")
        return "\n".join(lines)

    def _model_lines(self) -> list[str]:
        judged, model = self.model, self.tolerance.model
        if judged is None or model is None:
            return []
        lines = []
        if model.rounding is not None:
            lines.append(
                f"Against the {judged.precision} error model: {judged.mismatches} / {self.numel} elements beyond "
                f"their bound; the worst at index {judged.worst_index} is {judged.ratio:.3g} x its bound "
                f"{judged.worst_bound:.3g}"
            )
        if judged.norm_ratio is not None:
            lines.append(f"Error norm against the model: {judged.norm_ratio:.3g} x the allowed {model.norm:g} u ||g||")
        direction = judged.lean_direction or "nowhere significant"
        lines.append(
            f"Lean: {100 * abs(judged.lean):.3g}% of |golden| {direction} = {judged.lean_ulps:.3g} ulp of "
            f"{judged.precision} ({judged.lean_sigmas:.1f} standard errors; allowed "
            f"{_percent(model.allowed_lean(judged.precision))})"
        )
        return lines

    def _error_line(self) -> str:
        tol = self.tolerance
        if tol.k is None:
            return f"Error: candidate {self.candidate_error:.3g} (not bounded: this check gates on SQNR)"
        allowance = f"atol {tol.atol:g} + {tol.rtol_of_max:g} x max|golden|"
        if self.reference_error is None:
            return (
                f"Error: candidate {self.candidate_error:.3g}; allowed {self.allowed:.3g} = {allowance} (no reference)"
            )
        ratio = self.ratio if self.ratio is not None else math.nan
        return (
            f"Error: candidate {self.candidate_error:.3g}, low-precision reference {self.reference_error:.3g}, "
            f"ratio {ratio:.3g} (k = {tol.k:g}); allowed {self.allowed:.3g} = max({allowance}, "
            f"{tol.k:g} x {self.reference_error:.3g})"
        )


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


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


def dtype_name(dtype: torch.dtype) -> str:
    """'torch.bfloat16' -> 'bfloat16'."""
    return str(dtype).removeprefix("torch.")


def compare(
    check: str,
    candidate: torch.Tensor,
    golden: torch.Tensor,
    tolerance: Tolerance,
    reference: torch.Tensor | None = None,
    *,
    magnitude: torch.Tensor | None = None,
    terms: int = 1,
    precision: str | None = None,
) -> Comparison:
    """Compare `candidate` with `golden` under `tolerance`, measured against `reference` and
    bounded by the row's error model.

    All arithmetic is float64 on the golden's device. Where the golden is NaN the candidate must
    be NaN; where it is +-Inf, the same infinity; where it is finite, a finite value within the bound.
    magnitude: per element, the sum of the absolute values of the terms that make the golden
    (broadcastable to it; default max|golden|), which scales the model's accumulated error;
    terms: how many terms each element accumulates (K of a GEMM, the row length of a norm);
    precision: the dtype whose arithmetic produced the candidate, where it is not the candidate's
    own dtype nor the row's (an op autocast runs in bf16 and returns as float32).
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
        allowed = max(tolerance.atol + tolerance.rtol_of_max * scale, tolerance.k * (reference_error or 0.0))
    bound = math.inf if allowed is None else allowed
    mismatched = (diff > bound) | nonfinite | special_wrong
    both = finite & candidate_finite
    norm_error = (
        float(torch.linalg.vector_norm(torch.where(both, c - g, 0.0))) if not bool(nonfinite.any()) else math.inf
    )
    reference_norm = (
        None if r is None else float(torch.linalg.vector_norm(torch.where(finite & torch.isfinite(r), r - g, 0.0)))
    )
    judged_in = precision or dtype_name(candidate.dtype)
    if tolerance.model is not None:
        judged_in = precision or tolerance.model.precision_of(dtype_name(candidate.dtype))
    count = int(finite.sum())
    golden_norm = float(torch.linalg.vector_norm(g[finite])) if count else 0.0
    norm_allowance = max(tolerance.atol, _underflow_or_zero(judged_in)) * math.sqrt(count)
    allowed_norm = None
    if tolerance.k_norm is not None:
        allowance = norm_allowance + tolerance.rtol_of_max * golden_norm
        allowed_norm = max(allowance, tolerance.k_norm * (reference_norm or 0.0))
    judged = None
    if tolerance.model is not None:
        aligned = _Aligned(candidate=c, golden=g, reference=r, diff=diff, both_finite=both, golden_scale=scale)
        judged = _judge_model(
            tolerance.model,
            aligned,
            precision=judged_in,
            candidate_dtype=candidate.dtype,
            magnitude=magnitude,
            terms=terms,
        )
    accuracy = None
    if tolerance.accuracy is not None:
        accuracy = _judge_accuracy(
            tolerance, judged_in, norm_error, golden_norm, reference_norm, g, finite, magnitude, terms, count
        )

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
        model=judged,
        accuracy=accuracy,
        norm_allowance=norm_allowance,
    )


def _underflow_or_zero(precision: str) -> float:
    """The precision's underflow per element; 0 for a dtype without one (integers)."""
    try:
        return underflow(precision)
    except ValueError:
        return 0.0


def _judge_accuracy(
    tolerance: Tolerance,
    precision: str,
    norm_error: float,
    golden_norm: float,
    reference_norm: float | None,
    g: torch.Tensor,
    finite: torch.Tensor,
    magnitude: torch.Tensor | None,
    terms: int,
    count: int,
) -> AccuracyJudgement | None:
    """The candidate's error norm over a correct implementation's (None where the row judges
    against a reference and none was given): the prediction plus the precision's underflow per
    element (against a reference, the row's atol where larger, as flash-attention's rule adds).
    A zero golden is judged by the magnitudes of the terms that make it (the `spread` term)."""
    import torch

    accuracy = tolerance.accuracy
    assert accuracy is not None
    underflow_norm = _underflow_or_zero(precision) * math.sqrt(count)
    if accuracy.against == "reference":
        if reference_norm is None:
            return None
        predicted = reference_norm + max(underflow_norm, tolerance.atol * math.sqrt(count))
    else:
        m = g.abs() if magnitude is None else magnitude.to(g).expand_as(g).abs()
        magnitude_norm = float(torch.linalg.vector_norm(m[finite])) if count else 0.0
        model = tolerance.model
        summed_in = model.accumulator_of(precision) if model is not None else accumulator(precision)
        rounded = g[finite].to(getattr(torch, precision)).double()
        rounded_norm = float(torch.linalg.vector_norm(torch.where(torch.isfinite(rounded), rounded - g[finite], 0.0)))
        predicted = (
            accuracy.predicted(precision, summed_in, golden_norm, magnitude_norm, terms, rounded_norm) + underflow_norm
        )
    ratio = norm_error / predicted if predicted > 0 else (0.0 if norm_error == 0 else math.inf)
    return AccuracyJudgement(precision=precision, predicted=predicted, ratio=ratio, allowed=accuracy.allowed(count))


# A lean counts when it lies this many standard errors from zero: far beyond chance for the
# thousands to millions of elements a check compares, so only a real lean is ever reported.
LEAN_SIGMAS = 6.0


def _rounded(g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The golden correctly rounded to the candidate's dtype (where representable), in float64."""
    import torch

    rounded = g.to(dtype).to(torch.float64)
    return torch.where(torch.isfinite(rounded), rounded, g)


@dataclass(frozen=True)
class _Aligned:
    """A comparison's tensors in float64 on the golden's device, and what the element check found."""

    candidate: torch.Tensor
    golden: torch.Tensor
    reference: torch.Tensor | None
    diff: torch.Tensor  # |candidate - golden|, inf where the candidate is wrongly non-finite
    both_finite: torch.Tensor  # golden and candidate both finite
    golden_scale: float  # max |golden| over its finite elements


def _judge_model(
    model: ErrorModel,
    aligned: _Aligned,
    *,
    precision: str,
    candidate_dtype: torch.dtype,
    magnitude: torch.Tensor | None,
    terms: int,
) -> ModelJudgement:
    """The candidate against the model's element, norm and lean bounds, in `precision`'s unit
    roundoff; `magnitude` and `terms` as `compare` takes them."""
    import torch

    c, g, r = aligned.candidate, aligned.golden, aligned.reference
    diff, both, scale = aligned.diff, aligned.both_finite, aligned.golden_scale

    u = unit_roundoff(precision)
    worst_index: tuple[int, ...] = ()
    ratio, mismatches, worst_bound = 0.0, 0, math.nan
    if model.rounding is not None and g.numel():
        m = torch.full_like(g, scale) if magnitude is None else magnitude.to(g).expand_as(g).abs()
        u_acc = unit_roundoff(model.accumulator_of(precision))
        bound = (
            u * (model.rounding * g.abs() + model.spread * m + model.scale * scale)
            + u_acc * model.accumulation * growth(model.growth, terms) * m
            + underflow(precision)
        )
        over = torch.where(both | torch.isinf(diff), diff / bound, torch.zeros_like(g))
        flat = int(over.reshape(-1).argmax())
        ratio = float(over.reshape(-1)[flat])
        mismatches = int((over > 1.0).sum())
        worst_index, worst_bound = _unravel(flat, tuple(g.shape)), float(bound.reshape(-1)[flat])
    norm_ratio = None
    if model.norm is not None:
        signal = float(torch.linalg.vector_norm(g[both])) if bool(both.any()) else 0.0
        if magnitude is not None:
            signal = max(signal, float(torch.linalg.vector_norm(magnitude.to(g).expand_as(g))))
        error = float(torch.linalg.vector_norm(torch.where(both, c - g, 0.0))) if not math.isinf(ratio) else math.inf
        allowed = model.norm * u * signal + underflow(precision)
        norm_ratio = error / allowed
    if model.lean_against == "reference" and r is not None:
        lean, direction, sigmas = _lean(c, r, g, both & torch.isfinite(r))  # beyond the reference's own lean
    else:
        lean, direction, sigmas = _lean(c, _rounded(g, candidate_dtype), g, both)
    return ModelJudgement(
        precision=precision,
        unit=u,
        ratio=ratio,
        mismatches=mismatches,
        worst_index=worst_index,
        worst_bound=worst_bound,
        norm_ratio=norm_ratio,
        lean=lean,
        lean_direction=direction,
        lean_sigmas=sigmas,
    )


# A lean is judged on at least this many samples (rows, or elements of a vector): fewer give a
# standard error too uncertain for LEAN_SIGMAS to mean anything.
LEAN_MIN_SAMPLES = 16


def _lean(c: torch.Tensor, rounded: torch.Tensor, g: torch.Tensor, both: torch.Tensor) -> tuple[float, str, float]:
    """The larger of two systematic errors, each relative to the golden's size: the mean signed
    error (leaning high or low) and the mean error along the golden's sign (away from or towards
    zero, as a scale or truncation does), counted only when LEAN_SIGMAS standard errors from zero.

    Errors are taken from `rounded`: the golden correctly rounded to the candidate's dtype (a value
    that repeats, as a bf16 input or a target's gradient in every row does, rounds the same way
    every time, and that correct rounding is no lean), or the reference. In a tensor of rows (2-D and up), each
    row of the last dimension is one sample, its lean the sum of its errors over the sum of its
    |golden|: the elements of a row share its mean, rstd or log-sum-exp, so their errors are
    correlated, and counting them as independent would call a row's shared rounding a lean."""
    import torch

    count = g.numel() // max(g.shape[-1], 1) if g.dim() >= 2 else int(both.sum())
    if count < LEAN_MIN_SAMPLES:
        return 0.0, "", 0.0
    shape = (-1, g.shape[-1]) if g.dim() >= 2 else (1, -1)
    rows, mask = g.reshape(shape), both.reshape(shape)
    error = torch.where(mask, c.reshape(shape) - rounded.reshape(shape), 0.0)
    size = torch.where(mask, rows.abs(), 0.0)
    worst = (0.0, "", 0.0)
    # along the golden's sign first: a scale leans away from (or towards) zero, and where every
    # value has one sign that is also its signed lean, which then adds nothing
    for values, directions in (
        (error * torch.sign(rows), ("away from zero", "towards zero")),
        (error, ("high", "low")),
    ):
        if g.dim() >= 2:
            weight = size.sum(-1)
            used = weight > 0
            row_leans = (values.sum(-1)[used] / weight[used]).double()
            lean = float(row_leans.mean()) if row_leans.numel() else 0.0
            spread = float(row_leans.std()) if row_leans.numel() > 1 else math.inf
            standard_error = spread / math.sqrt(max(row_leans.numel(), 1))
        else:  # a ratio estimator: its standard error from the residuals of error = lean |golden|
            kept, sizes, magnitude = values[mask], size[mask], float(size.sum())
            if magnitude == 0:
                continue
            lean = float(kept.sum()) / magnitude
            residual = kept - lean * sizes
            kept_count = kept.numel()
            standard_error = math.sqrt(float((residual * residual).sum()) * kept_count / (kept_count - 1)) / magnitude
        sigmas = math.inf if standard_error == 0 else abs(lean) / standard_error
        if lean != 0 and sigmas >= LEAN_SIGMAS and abs(lean) > abs(worst[0]):
            worst = (lean, directions[0] if lean > 0 else directions[1], sigmas)
    return worst


def _structural(check: str, tolerance: Tolerance, shape: tuple[int, ...], problem: str) -> Comparison:
    numel = math.prod(shape)
    return Comparison(check, tolerance, shape, numel, candidate_error=math.inf, mismatches=numel, problem=problem)


def margins(comparison: Comparison) -> CheckMargins:
    """How close a comparison came to each of its bounds: what the report records for every
    check, so a healthy run shows the margin each tolerance leaves."""
    tol = comparison.tolerance

    def finite(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else round(value, 4)

    def significant(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else float(f"{value:.3g}")

    norm_ratio = None
    if comparison.reference_norm_error:
        norm_ratio = comparison.norm_error / comparison.reference_norm_error
    judged = comparison.model
    return CheckMargins(
        check=comparison.check,
        passed=comparison.passed,
        ratio=finite(comparison.ratio),
        k=tol.k,
        norm_ratio=finite(norm_ratio),
        k_norm=tol.k_norm,
        sqnr_db=finite(comparison.sqnr_db),
        reference_sqnr_db=finite(comparison.reference_sqnr_db),
        min_sqnr_db=tol.min_sqnr_db,
        precision=None if judged is None else judged.precision,
        model_ratio=None if judged is None or tol.model is None or tol.model.rounding is None else finite(judged.ratio),
        model_norm_ratio=None if judged is None else finite(judged.norm_ratio),
        lean=None if judged is None else significant(judged.lean),
        lean_ulps=None if judged is None else finite(judged.lean_ulps),
        allowed_lean=None if judged is None or tol.model is None else tol.model.allowed_lean(judged.precision),
        accuracy_ratio=None if comparison.accuracy is None else finite(comparison.accuracy.ratio),
        accuracy_factor=None if tol.accuracy is None else tol.accuracy.factor,
    )


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
        try:
            _RECORDED.reset(token)
        except ValueError:  # torn down in another thread's context: the watchdog finishing a hung run
            _RECORDED.set(None)


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
