"""The data types collectives move, and the names that carry them: 'all_reduce' moves float32
(nccl-tests' default), 'all_reduce_bf16' moves bfloat16, 'all_gather_fp8e4m3' moves FP8 bytes.

Training moves its gradients in bf16 or fp16 (FSDP's and DDP's reduce-scatter and all-reduce
with a low-precision reduce dtype) and its FP8 weights as bytes: torchao's float8 all-gather
sends the float8 tensor's uint8 view. So the suite runs all_reduce and reduce_scatter in bf16
and fp16, checked against the float64 sum within the reduction's error bound (`sum_bound`), and
all_gather of e4m3fn and e5m2 payloads, checked bit for bit, NaN codes included. Pure, torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WireFormat:
    """A data type on the wire: its tag in a collective's name, torch's name for it, its size,
    its stored significand bits, and whether its result is known bit for bit (`exact`) or only
    within the reduction's error bound."""

    tag: str  # '' for float32: the original names stay unchanged
    dtype: str  # torch's name: 'bfloat16', 'float8_e4m3fn'
    nbytes: int
    fraction_bits: int
    exact: bool

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-(t+1) for t stored fraction bits: the largest relative error of one rounding."""
        return 2.0 ** -(self.fraction_bits + 1)


FLOAT32 = WireFormat("", "float32", 4, 23, exact=True)
BF16 = WireFormat("bf16", "bfloat16", 2, 7, exact=False)
FP16 = WireFormat("fp16", "float16", 2, 10, exact=False)
FP8_E4M3 = WireFormat("fp8e4m3", "float8_e4m3fn", 1, 3, exact=True)
FP8_E5M2 = WireFormat("fp8e5m2", "float8_e5m2", 1, 2, exact=True)
FORMATS: dict[str, WireFormat] = {f.tag: f for f in (BF16, FP16, FP8_E4M3, FP8_E5M2)}

# The collectives as training calls them: gradient reduction in bf16 / fp16, FP8 weights gathered.
TRAINING_COLLECTIVES: tuple[str, ...] = (
    "all_reduce_bf16",
    "all_reduce_fp16",
    "reduce_scatter_bf16",
    "reduce_scatter_fp16",
    "all_gather_fp8e4m3",
    "all_gather_fp8e5m2",
)


def split(name: str) -> tuple[str, WireFormat]:
    """'reduce_scatter_bf16' -> ('reduce_scatter', BF16); a name without a known tag is float32."""
    op, _, tag = name.rpartition("_")
    if op and tag in FORMATS:
        return op, FORMATS[tag]
    return name, FLOAT32


def gamma(k: int, u: float) -> float:
    """gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
    Lemma 3.1): the relative error bound of k roundings; infinite once k u reaches 1."""
    if k < 0:
        raise ValueError(f"gamma needs k >= 0 roundings, found {k}")
    return k * u / (1 - k * u) if k * u < 1 else float("inf")


def sum_bound(terms: int, fmt: WireFormat) -> float:
    """The factor of sum |x_j| that bounds |computed - exact| for a sum of `terms` values of
    `fmt` added in any order, each partial sum rounded to `fmt`: gamma_(n-1) (Higham ch. 4, the
    recursive bound, which holds for every order and tree: a ring passes n-1 partial sums, a tree
    rounds at most n-1 times on any path). Accumulating in float32 and rounding once to `fmt`
    errs by at most u |s| + gamma_(n-1)(u_fp32) sum |x_j|, within this bound for every n >= 2."""
    return gamma(max(terms - 1, 0), fmt.unit_roundoff)
