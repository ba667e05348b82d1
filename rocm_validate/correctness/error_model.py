"""What correct arithmetic in a precision can do: the absolute bound of every check against float64.

The relative test of `compare` (k x the low-precision reference's error) cannot see a bug in a
kernel that the candidate and the reference share: both move and their ratio stays near 1. An
`ErrorModel` bounds the candidate against the float64 golden by itself, from the standard model of
floating-point arithmetic (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
section 2.2: every rounding is x(1 + d), |d| <= u):

    |c_i - g_i|  <=  u_p (rounding |g_i| + spread m_i + scale max|g|)  +  u_acc accumulation growth(K) m_i  +  s_p

* u_p is the unit roundoff of the precision whose rounding bounds the result (the candidate's
  dtype, or the dtype an autocast region computes in); s_p its underflow (the smallest
  normal where subnormals may be flushed to zero);
* `rounding` counts the roundings of the output itself (1: correctly rounded);
* `spread` the roundings of intermediates held in that precision (a bf16 composite), applied to the
  element's magnitude m_i: the sum of the absolute values of the terms that make it (|x||W| for a
  GEMM, (|x| + |mean|) rstd |gamma| for a LayerNorm), or max|golden| when the check gives none;
* `scale` roundings whose size follows the whole result rather than the element (partial sums a
  split-K GEMM rounds to bf16, probabilities fp16 flushes below its smallest normal): a normwise
  term, as in normwise error bounds;
* `accumulation` the error of float32 accumulators over K terms, grown like sqrt(K) (Higham and
  Mary's probabilistic bound, SISC 41(5) 2019: lambda sqrt(K) u with lambda = the coefficient), log2(K)
  (pairwise trees), K (the worst case) or not at all.

Two more bounds complete the model: the error norm within `norm` x u_p x ||golden|| (for
composites whose elements are not bounded one by one), and the *lean*: the mean signed error and
the mean error away from zero, each over mean|golden|, at most `max_lean` ulps of u_p when it is
also statistically significant. A correct rounding does not lean; a 0.1% scale leans 0.26 ulp in
bf16 and 16,800 in float32, so the lean test sees a systematic change far below one rounding.
Where healthy arithmetic in a precision leans by itself (a bf16 model's gradients, fp16 attention
flushing small probabilities), `lean_against="reference"` bounds the candidate's lean beyond the
low-precision reference's, which shares that arithmetic; float32 runs keep the absolute bound.

This module is torch-free: precisions are named by their torch dtype names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Unit roundoff u (half the machine epsilon) and the underflow (absolute error) of each format
# (Blanchard, D. Higham, N. Higham, IMA J. Numer. Anal. 41(4) 2021, Table 1; OCP FP8 and the fnuz
# variants: fnuz moves the exponent bias by one, halving the smallest subnormal). The underflow is
# twice the smallest normal number where kernels may flush subnormals to zero (float32
# arithmetic, and so bf16 computed in it: CPUs' DAZ / FTZ, GPUs' ftz): a result below the
# smallest normal may come out as zero. Elsewhere it is the smallest subnormal.
PRECISIONS: dict[str, tuple[float, float]] = {
    "float64": (2.0**-53, 2.0**-1022),
    "float32": (2.0**-24, 2.0**-125),
    "bfloat16": (2.0**-8, 2.0**-125),
    "float16": (2.0**-11, 2.0**-24),
    "float8_e4m3fn": (2.0**-4, 2.0**-9),
    "float8_e4m3fnuz": (2.0**-4, 2.0**-10),
    "float8_e5m2": (2.0**-3, 2.0**-16),
    "float8_e5m2fnuz": (2.0**-3, 2.0**-17),
}
GROWTHS = ("none", "sqrt", "log2", "linear")


def unit_roundoff(precision: str) -> float:
    """u of `precision` ('bfloat16', 'float32', ...): the largest relative error of one rounding."""
    try:
        return PRECISIONS[precision][0]
    except KeyError:
        raise ValueError(f"no unit roundoff for precision {precision!r}; known: {', '.join(PRECISIONS)}") from None


def underflow(precision: str) -> float:
    """The absolute error of `precision` where a result underflows, or is flushed to zero."""
    unit_roundoff(precision)
    return PRECISIONS[precision][1]


def accumulator(precision: str) -> str:
    """The precision kernels accumulate in for results of `precision`: float32 for every format
    narrower than it (PyTorch's acc type, `ATen/AccumulateType.h`), float64 for float64."""
    return "float64" if precision == "float64" else "float32"


def growth(kind: str, terms: int) -> float:
    """How an accumulated error grows over `terms` terms."""
    n = max(int(terms), 1)
    if kind == "none":
        return 1.0
    if kind == "sqrt":
        return math.sqrt(n)
    if kind == "log2":
        return max(math.log2(n), 1.0)
    if kind == "linear":
        return float(n)
    raise ValueError(f"growth must be one of {', '.join(GROWTHS)}, found {kind!r}")


@dataclass(frozen=True)
class ErrorModel:
    """The absolute bound of one tolerance row against float64 (see the module docstring).

    precision: "" for the candidate's dtype, else the dtype whose rounding dominates (bfloat16 for
    a layer under bf16 autocast, whose output is float32). rounding: None leaves elements
    unbounded (a check judged on its norm, SQNR and lean). accumulate_in: "float32" (PyTorch's
    acc type, as GPU kernels accumulate) or "precision" (the kernel accumulates in the result's
    own precision, as some CPU kernels do for bf16 and fp16). norm: None, no norm bound.
    max_lean: the largest systematic error, in ulps (u) of the precision; min_lean: the relative
    lean always allowed (float32 accumulations lean a few 1e-7 when healthy; 1e-5 still fails a
    0.01% scale), so the allowed lean is max(max_lean u, min_lean).
    """

    precision: str = ""
    rounding: float | None = 1.0
    spread: float = 0.0
    scale: float = 0.0
    accumulation: float = 0.0
    growth: str = "sqrt"
    accumulate_in: str = "float32"
    norm: float | None = None
    max_lean: float = 0.1
    min_lean: float = 1e-5
    lean_against: str = "golden"
    source: str = ""

    def __post_init__(self) -> None:
        if self.precision:
            unit_roundoff(self.precision)
        growth(self.growth, 1)
        if self.accumulate_in not in ("float32", "precision"):
            raise ValueError(f"accumulate_in must be 'float32' or 'precision', found {self.accumulate_in!r}")
        if self.lean_against not in ("golden", "reference"):
            raise ValueError(f"lean_against must be 'golden' or 'reference', found {self.lean_against!r}")
        for name in ("rounding", "spread", "scale", "accumulation", "norm", "max_lean", "min_lean"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"error model {name} must be a finite number >= 0, found {value!r}")

    def allowed_lean(self, precision: str) -> float:
        """The largest relative lean that passes for a result in `precision`."""
        return max(self.max_lean * unit_roundoff(precision), self.min_lean)

    def accumulator_of(self, precision: str) -> str:
        """The precision the accumulated term is counted in, for a result in `precision`."""
        return precision if self.accumulate_in == "precision" else accumulator(precision)

    def precision_of(self, candidate_dtype: str) -> str:
        """The precision this model measures a candidate of `candidate_dtype` in."""
        return self.precision or candidate_dtype

    def describe(self) -> str:
        parts = []
        if self.rounding is not None:
            terms = [f"{self.rounding:g} u|g|"]
            if self.spread:
                terms.append(f"{self.spread:g} u m")
            if self.scale:
                terms.append(f"{self.scale:g} u max|g|")
            if self.accumulation:
                grown = {"none": "", "sqrt": " sqrt(K)", "log2": " log2(K)", "linear": " K"}[self.growth]
                unit = "u" if self.accumulate_in == "precision" else "u_acc"
                terms.append(f"{self.accumulation:g} {unit}{grown} m")
            parts.append("|c - g| <= " + " + ".join(terms))
        if self.norm is not None:
            parts.append(f"||c - g|| <= {self.norm:g} u ||g||")
        beyond = " beyond the reference's" if self.lean_against == "reference" else ""
        parts.append(f"lean{beyond} <= max({self.max_lean:g} u, {self.min_lean:g})")
        where = f" in {self.precision}" if self.precision else ""
        return f"model{where}: " + "; ".join(parts) + (f" ({self.source})" if self.source else "")


# The RMS relative error of one round-to-nearest, for data spread over binades: u sqrt(1 / (8 ln 2))
# = 0.425 u (error-model facts; u / sqrt(3) is the uniform-error upper model).
ROUNDING_RMS = math.sqrt(1.0 / (8.0 * math.log(2.0)))
AGAINST = ("model", "reference")
# How many standard deviations of a few roundings' RMS the accuracy factor allows beyond itself.
SMALL_SAMPLE_SIGMAS = 6.0


@dataclass(frozen=True)
class Accuracy:
    """The error norm a *correct* implementation of the op makes on the same inputs, and how far
    beyond it a candidate may go: the precision test beside the lean.

    Against "model", the prediction adds in quadrature (independent, mean-zero roundings: Higham
    and Mary's probabilistic analysis, SISC 41(5) 2019) `roundings` roundings of the output: the
    first exactly as rounding the golden to the precision errs on these inputs, every further one
    ROUNDING_RMS u ||g|| (`roundings_float32` for a float32 result, whose healthy error comes
    from its arithmetic more than from its last rounding: accumulation order, conditioning); `spread`
    roundings of intermediates held in the accumulator's precision, ROUNDING_RMS u_acc ||m|| (m: the
    magnitudes of the terms that make each element); and the accumulation of K
    terms in the accumulator's precision, `accumulation` sqrt(K) u_acc ||g|| (the probabilistic
    sqrt(K) u, not the worst-case K u; partial sums the size of the result). Against
    "reference", the prediction is the same-precision reference's error norm (flash-attention's
    rule: error <= 2 x the reference's), for ops whose healthy error varies too much across
    backends to predict. Either way the precision's underflow (per element) is
    added, so a zero or tiny golden is judged against it, never a ratio of
    zeros. `factor`: the candidate's error norm may reach factor x the prediction; a factor below
    2 fails a kernel that loses one bit (doubles its error).
    """

    op: str
    factor: float
    roundings: float = 1.0
    roundings_float32: float | None = None
    spread: float = 0.0
    accumulation: float = 0.0
    against: str = "model"
    source: str = ""

    def __post_init__(self) -> None:
        if self.against not in AGAINST:
            raise ValueError(f"accuracy against must be one of {', '.join(AGAINST)}, found {self.against!r}")
        for name in ("factor", "roundings", "roundings_float32", "spread", "accumulation"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"accuracy {name} must be a finite number >= 0, found {value!r}")
        if self.roundings < 1 or (self.roundings_float32 is not None and self.roundings_float32 < 1):
            raise ValueError("accuracy roundings must be >= 1: a correct kernel rounds its output once")
        if self.factor < 1:
            raise ValueError(
                f"accuracy factor must be >= 1 (a correct kernel meets its prediction), found {self.factor}"
            )

    def predicted(
        self,
        precision: str,
        accumulator_precision: str,
        golden_norm: float,
        magnitude_norm: float,
        terms: int,
        rounded_norm: float,
    ) -> float:
        """The error norm of a correct implementation in `precision` (against "model"), without the
        underflow; rounded_norm: ||golden rounded to the precision - golden||, the output's own rounding."""
        u, u_acc = unit_roundoff(precision), unit_roundoff(accumulator_precision)
        further = max(self.roundings_of(precision) - 1.0, 0.0)
        return math.sqrt(
            rounded_norm**2
            + further * (ROUNDING_RMS * u * golden_norm) ** 2
            + (self.spread * ROUNDING_RMS * u_acc * magnitude_norm) ** 2
            + (self.accumulation * growth("sqrt", terms) * u_acc * golden_norm) ** 2
        )

    def roundings_of(self, precision: str) -> float:
        """The output roundings a correct kernel's error amounts to, for a result in `precision`."""
        if precision == "float32" and self.roundings_float32 is not None:
            return self.roundings_float32
        return self.roundings

    def allowed(self, count: int) -> float:
        """The factor for an error norm over `count` elements: the norm of few roundings is itself
        uncertain (one rounding's relative error ranges over 0 to 2.35 x its RMS; the RMS of n has a
        relative standard deviation of about 0.45 / sqrt(n)), so SMALL_SAMPLE_SIGMAS of it are added."""
        return self.factor * (1.0 + SMALL_SAMPLE_SIGMAS * 0.45 / math.sqrt(max(count, 1)))

    def describe(self) -> str:
        if self.against == "reference":
            what = "the same-precision reference's error norm"
        else:
            fp32 = "" if self.roundings_float32 is None else f" ({self.roundings_float32:g} in float32)"
            terms = [f"{self.roundings:g}{fp32} roundings of the output"]
            if self.spread:
                terms.append(f"{self.spread:g} u_acc ||m||")
            if self.accumulation:
                terms.append(f"{self.accumulation:g} sqrt(K) u_acc ||g||")
            what = "a correct kernel's error norm (" + " + ".join(terms) + ", in quadrature)"
        source = f" ({self.source})" if self.source else ""
        return f"accuracy: error norm <= {self.factor:g} x {what}{source}"


def bits_lost(ratio: float) -> float:
    """How many bits of accuracy an error norm `ratio` x a correct kernel's amounts to."""
    return math.log2(ratio) if ratio > 0 else -math.inf
