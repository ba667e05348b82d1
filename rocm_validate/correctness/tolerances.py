"""The one table of tolerances of the correctness suite, with the source of every number.

Every check compares a candidate (fused kernel, fast library, compiled graph) with a golden
computed in float64 (or from exactly representable inputs), and passes when

    max |candidate - golden|  <=  max(atol + rtol_of_max * max|golden|,  k * max |reference - golden|)

where the reference is the plain low-precision computation (same dtype, unfused eager math).
This is the method of PyTorch's SDPA tests (`_check_equal` in test/test_transformers.py); k is
their "fudge factor". A check may instead (or also) require a signal-to-quantization-noise
ratio, for FP8 where the comparison is against the unquantized computation.

A rule applies to a check on a platform: backend "*" (any), "cpu", "cuda" or "rocm", optionally
narrowed to an arch prefix ("gfx95") and a library ("ck" flash attention), and from a key
sequence length on. The most specific rule wins (see `tolerance_for`), so every number the suite
uses is in `RULES` below and nowhere else.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable
from dataclasses import InitVar, dataclass
from typing import Any

from rocm_validate.correctness.error_model import Accuracy, ErrorModel
from rocm_validate.errors import UnknownCheckError

__all__ = ["RULES", "Rule", "Tolerance", "tolerance_for"]


@dataclass(frozen=True)
class Tolerance:
    """How far a candidate may be from the golden.

    k: multiple of the low-precision reference's worst error allowed for any element (None: no
    element bound, only finiteness, SQNR and the norm bound are checked); atol / rtol_of_max: the
    allowance, absolute and as a fraction of the golden's largest magnitude over the whole tensor
    (max|golden|, unlike torch.testing's per-element rtol; `rtol=` is its former name); min_sqnr_db: the smallest SQNR
    against the golden, if any; k_norm: multiple of the reference's error norm allowed for the
    candidate's error norm (a wrong result spread over many elements, such as a halved gradient,
    fails it while each element may still sit under k x the reference's worst element);
    model: the absolute bound against float64 from an error model of the op in its precision
    (elements, norm, and the lean: rounding the wrong way or a 0.1% scale stays within one ulp
    per element but leans one way), judged without the reference, so a bug the candidate shares
    with the reference cannot hide; accuracy: the error norm against what a correct implementation
    in the precision makes on the same inputs (a kernel that loses a bit fails it). A check passes
    only when every bound it has holds.
    """

    k: float | None
    atol: float = 0.0
    rtol_of_max: float = 0.0
    min_sqnr_db: float | None = None
    source: str = ""
    k_norm: float | None = None
    model: ErrorModel | None = None
    accuracy: Accuracy | None = None
    rtol: InitVar[float | None] = None  # the former name of rtol_of_max: still read, with a warning

    def __post_init__(self, former_rtol: float | None) -> None:
        if former_rtol is not None:
            warnings.warn(
                "Tolerance(rtol=...) is now Tolerance(rtol_of_max=...): a fraction of max|golden| over the whole "
                "tensor, not torch.testing's per-element rtol",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "rtol_of_max", former_rtol)
        bounds = (self.k, self.min_sqnr_db, self.k_norm, self.model, self.accuracy)
        if all(bound is None for bound in bounds):
            raise ValueError(
                "a tolerance needs an error bound (k, k_norm, a model or an accuracy) or a minimum SQNR, found none"
            )
        for name in ("k", "atol", "rtol_of_max", "k_norm"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"tolerance {name} must be a finite number >= 0, found {value!r}")

    @property
    def exact(self) -> bool:
        return self.k == 0 and self.atol == 0 and self.rtol_of_max == 0

    def describe(self) -> str:
        parts = []
        if self.k is not None:
            parts.append(
                "exact" if self.exact else f"k={self.k:g}, atol={self.atol:g}, rtol_of_max={self.rtol_of_max:g}"
            )
        if self.k_norm is not None:
            parts.append(f"error norm <= {self.k_norm:g} x the reference's")
        if self.min_sqnr_db is not None:
            parts.append(f"SQNR >= {self.min_sqnr_db:g} dB")
        described = "; ".join(parts)
        if self.source:
            described = f"{described} ({self.source})" if described else self.source
        for extra in (self.model, self.accuracy):
            if extra is not None:
                described = f"{described}; {extra.describe()}" if described else extra.describe()
        return described


@dataclass(frozen=True)
class Rule:
    """One row of the table: the tolerance of `check` on a platform."""

    check: str
    tolerance: Tolerance
    backend: str = "*"  # "*", "cpu", "cuda", "rocm"
    arch: str = ""  # arch prefix, e.g. "gfx95"; "" for any
    library: str = ""  # e.g. "ck" or "aotriton" for ROCm flash attention; "" for any
    min_seq_k: int = 0  # applies from this key sequence length on
    dtype: str = ""  # the checked dtype, e.g. "float16"; "" for any

    def matches(self, check: str, backend: str, arch: str, library: str, seq_k: int, dtype: str = "") -> bool:
        return (
            self.check == check
            and self.backend in ("*", backend)
            and arch.lower().startswith(self.arch.lower())
            and self.library in ("", library)
            and seq_k >= self.min_seq_k
            and self.dtype in ("", dtype)
        )

    @property
    def specificity(self) -> tuple[int, int]:
        narrowing = (self.backend != "*") + bool(self.arch) + bool(self.library) + bool(self.dtype)
        return narrowing, self.min_seq_k


# Sources, cited once each.
_PT_FLASH = "PyTorch test_transformers.py test_flash_attention_vs_math_ref_grads"
_PT_FLASH_ROCM = _PT_FLASH + " (ROCm AOTriton branch)"
_PT_FLASH_CK = _PT_FLASH + " (ROCm CK branch)"
_PT_MEM_EFF = "PyTorch test_transformers.py test_mem_efficient_attention(_attn_mask)_vs_math_ref_grads"
_PT_CUDNN = "PyTorch flash factors; its cuDNN/fused cudagraph test passes with 3/110/8/3"
_H100_NORMS = (
    "; k_norm measured on the H100 (torch 2.11, standard normal inputs, every case of the suite and its fuzz test): "
    "error-norm ratios at most out 1.35, grad_q 5.0, grad_k 4.7, grad_v 1.46, SQNR at least 42.6 dB"
)
_CPU_MEASURED = (
    "measured on x86 CPU, torch 2.13, fp32, standard normal inputs, worst of the suite's cases (out/q/k/v): "
    "element ratios 1.7/3.4/4.2/8.6, error-norm ratios 1.1/3.1/3.1/14.2 (grad_v of the x8 inputs)"
)
_PT_SCALED_MM = "PyTorch test_scaled_matmul_cuda.py: fp8 GEMM vs fp32 emulation of the same operands"
_PT_SCALED_MM_FP32 = _PT_SCALED_MM + "; fp32 output allowed 3e-3 there (FP8 MMA accumulates in reduced precision)"
_FP8_PATHS = "same FP8 operands through _scaled_mm and the fp32 emulation: output rounding + accumulation order"
_TORCHAO = "torchao float8 tests: SQNR of casts and GEMMs >= 25 dB, Float8Linear out >= 20 dB, grads >= 17 dB"
_MATH_PACKED = (
    "the math backend per sequence of a nested jagged tensor against the same backend over the masked block: masked "
    "keys add exact zeros, so only the summation order differs"
)
_EPILOGUE = (
    "the unfused eager chain in the same dtype as reference (GEMM, then F.gelu / F.relu): PyTorch's own "
    "_addmm_activation tests compare with it; fused epilogues round once where it rounds twice"
)
_EPILOGUE_FP32_GPU = (
    _EPILOGUE + "; on a GPU the float32 GEMMs of the two paths accumulate in different blocks: the healthy H200 "
    "(cuBLASLt GELU epilogue, torch 2.11) reached element ratio 1.41 and error-norm ratio 4.1"
)
_MATH_PACKED_GPU = (
    _MATH_PACKED + "; on a GPU the nested path's per-sequence GEMMs block the sums differently from the masked "
    "block's: the healthy H200 (torch 2.11, CUDA 13.0) reached element ratios 5.7 (fp16 out) and 4.5 (bf16 grad_q), "
    "error-norm ratios 3.6, with every element inside the float64 error model (worst 0.03 of its bound)"
)
_GEMM_LOW = "reference = golden correctly rounded; split-K reductions in the dtype add a few ulps"
_FP8_LINEAR_OUT = (
    "delayed-scaling E4M3 linear vs nn.Linear in float64: healthy 28.6 dB (x86 CPU, torch 2.13); "
    "an output scaled by 0.92 gives about 21 dB, one 128x128 output tile zeroed about 25 dB"
)
_FP8_LINEAR_GRAD = (
    "E5M2 gradients vs float64: healthy 24.5 dB on the CPU (torch 2.13), 24.6 on the H100; one 128x128 tile "
    "of grad_weight zeroed gives 21.3 dB, a 0.92 scale 21.2 (torchao's 17 dB minimum passes both)"
)
_GEMM_FP32 = "reference = golden correctly rounded; x86 MKL measured up to 22x over 46 shapes (K <= 14336); TF32 ~8000x"
_OPTIM = "PyTorch test_optim fused/foreach vs for-loop; apex allows 1e-3 abs vs torch Adam"
_GEMM_FP32_GPU = (
    "reference = golden correctly rounded; H100 cuBLAS / cuBLASLt (torch 2.11, CUDA 13.0) measured 64x at K=4096 "
    "and 110x at K=14336 (blocked / split-K accumulation grows like sqrt(K)), error norm 85x; TF32 ~8000x"
)
_OPTIM_STATE_GPU = (
    _OPTIM + "; the CUDA fused kernel computes 1 - beta2 from beta2 rounded to float32 (0.999f), a 1.3e-5 "
    "relative offset of exp_avg_sq measured on the H100 (torch 2.11): rtol_of_max 3e-5 admits it, a wrong step does not"
)
_INDUCTOR = "Inductor check_model: compiled vs eager on upcast inputs; fusion may reorder reductions"
_AUTOCAST = "bf16 autocast: the layer with fused attention vs the same layer with math attention"
_AUTOCAST_GRAD = (
    _AUTOCAST + "; fused attention's grad_q alone may reach 180x the math error (PyTorch), bf16 GEMMs dilute it"
)
_EXACT = "exact by construction: representable inputs, no rounding anywhere"
_BLOCKS = "the op alone vs its definition in float64 from elementary operations"
_BLOCK_SOURCE = (
    "coefficients with 3x or more over what the healthy suite needed on an H100 (torch 2.11) and an x86 CPU "
    "(torch 2.13), listed in BLOCK_ROWS; detection per op and dtype in docs/correctness.md"
)
_CPU_DROPOUT = (
    _BLOCKS + "; the CPU kernel rounds 1 / (1 - p) to the dtype (aten/src/ATen/native/Dropout.cpp), leaning "
    "-0.156% in bf16 at p = 0.1, measured -0.155% (x86, torch 2.13)"
)
_KEEP_RATE = "the kept count of N elements is binomial(N, 1 - p): its z-score within 6 standard deviations"
_GRAPHS = "graph replay runs the captured kernels on the same data: bitwise, as PyTorch and TE assert"
_APEX_LAMB = "apex test_fused_lamb: FusedLAMB vs a Python reference LAMB"
_RECIPE_H100 = "; H100 (torch 2.11, torchao 0.17), Llama-3.1-8B blocks 2x1024 tokens: "
_TORCHAO_FFN = (
    "torchao test_numerics_integration (Llama-3-70B FFN): output SQNR > 20 dB vs bf16"
    + _RECIPE_H100
    + "22.97-23.63 dB across the four recipes, eager and compiled"
)
_TORCHAO_GRADS = (
    "torchao Float8Linear tests: weight grad >= 17 dB (their FFN test's 20 dB uses an all-ones upstream gradient, "
    "exact in E5M2; with a random one, E5M2 gradients measured 20.2-22 dB on the CPU, tiny Llama)"
    + _RECIPE_H100
    + "grad_input 18.7-20.7 dB (decoder), 20.6+ (FFN); FFN weight grads 20.4-25.3 dB"
)
_DECODER_WEIGHT_GRADS = (
    "measured" + _RECIPE_H100 + "decoder weight grads 16.1-23.6 dB; tensor-wise scaling (torchao-tensorwise, "
    "project-delayed) puts the attention projections and the input RMSNorm weight at 16.1-16.7 dB, below torchao's "
    "17 dB (an FFN-only figure); 14.5 dB keeps 1.6 dB of margin, a 2x-scaled or zeroed gradient is near 0 dB"
)
_RECIPE_TILE = (
    "worst 128x128 tile: a zeroed or 2x-scaled tile has SQNR <= 6 dB; healthy worst tiles measured 14.3 dB (decoder, "
    "RMSNorm weight grad, tensor-wise) and 20.2 dB (FFN)" + _RECIPE_H100.rstrip(": ")
)
_RECIPE_LOSS = (
    "6 AdamW steps (lr 1e-3) vs float64: every FP8 recipe measured within 0.4% of the first loss on the CPU, tiny "
    "Llama; the H100 loss curves sit at 44.6-46.7 dB SQNR against float64"
)


# Every SDPA row, on every platform: an output or gradient that is all zero (0 dB), halved (6.0 dB)
# or of the wrong sign (-6.0 dB) fails, whatever its element factor k allows. On the suite's
# standard normal inputs healthy fp32 attention sits above 85 dB (CPU) and bf16 far above this minimum.
SDPA_MIN_SQNR_DB = 20.0
# --- error models: how far from float64 correct arithmetic in each precision can land -----------
# (rocm_validate.correctness.error_model; u is the unit roundoff of the result's precision, u_acc
# float32's, m the element's magnitude: the terms that make it, or max|golden|.)
_H100 = "H100 80GB HBM3, torch 2.11, CUDA 13.0"
_X86 = "x86 CPU, torch 2.13"
SDPA_GPU = ErrorModel(
    rounding=2,
    spread=8,
    scale=4,
    accumulation=16,
    lean_against="reference",
    source=f"element ratios at most 0.95 (fp16 grad_v, where fp16 flushes small probabilities) on the {_H100}, "
    "every backend; fp16 attention leans with its math reference (grad_v -0.22% with x8 inputs), so the lean "
    "beyond the reference is bounded",
)
SDPA_FP16_GRAD_V = dataclasses.replace(
    SDPA_GPU,
    min_lean=5e-3,
    source=SDPA_GPU.source + "; fp16 grad_v of x8 inputs leans -0.216% beyond the math reference in flash, "
    "mem_efficient and cudnn alike (the fused kernels flush the probabilities fp16 keeps as subnormals)",
)
SDPA_CPU = ErrorModel(rounding=2, spread=1, accumulation=2, source=f"element ratios at most 0.25 on the {_X86}, fp32")
SDPA_ROCM = dataclasses.replace(
    SDPA_GPU,
    spread=16,
    scale=8,
    accumulation=64,
    source="the CUDA model with twice its coefficients and four times the accumulation, as PyTorch's ROCm "
    "tolerances are wider than CUDA's (not measured: no AMD GPU was lent)",
)
GEMM_LOW = ErrorModel(
    rounding=1,
    scale=8,
    accumulation=1,
    growth="sqrt",
    max_lean=0.08,
    source=f"{_H100}: bf16 GEMMs of odd K (162, 189) reach 5 ulps of max|golden| (partial sums rounded to "
    "bf16); healthy leans 0.009 bf16, 0.057 fp16 of the rounding error, none fp32",
)
GEMM_FP32 = ErrorModel(
    rounding=1,
    accumulation=4,
    growth="sqrt",
    max_lean=0.08,
    source=f"accumulation needed 0.05 on the {_H100} (cuBLAS, K <= 14336) and 0.61 on the {_X86} (MKL); "
    "TF32 is 2^13 times worse",
)
SCALED_MM = ErrorModel(
    rounding=1,
    accumulation=512,
    growth="sqrt",
    min_lean=1e-4,
    source="Hopper's FP8 tensor cores accumulate with about 14 mantissa bits (DeepSeek-V3 technical report, "
    f"3.3.2), 2^10 float32 ulps; the {_H100} needed 150, and its float32 outputs lean -4e-5",
)
FP8_LEAN = ErrorModel(
    precision="float8_e4m3fn",
    rounding=None,
    max_lean=0.2,
    source=f"against the unquantized product E4M3 leans towards zero (values below its smallest subnormal "
    f"vanish): -0.14% (_scaled_mm), -0.05 to -0.11% (FP8 linears' outputs), -0.41% (their weight gradients) "
    f"on the {_H100}; the emulation check judges _scaled_mm's own lean in bf16",
)
FP8_RECIPE_LEAN = ErrorModel(
    precision="float8_e4m3fn",
    rounding=None,
    max_lean=0.8,
    source=f"FP8 recipes' decoder weight gradients lean towards zero by up to 2.5% (tensor-wise scaling "
    f"underflows small gradients) on the {_H100}, 0.9% on the {_X86}",
)
OPTIMIZER = ErrorModel(
    rounding=1,
    spread=20,
    max_lean=10,
    source="20 steps, each rounding the parameter and both moments once; bf16 parameters lean 2% away from "
    f"zero after 20 steps (weight decay of 1e-3 per step is below half an ulp and rounds away), {_X86} and H100",
)
OPTIMIZER_STATE_GPU = dataclasses.replace(
    OPTIMIZER,
    scale=512,
    min_lean=3e-5,
    source=OPTIMIZER.source + "; the CUDA fused kernel's 1 - beta2 from a float32 beta2 offsets exp_avg_sq by "
    "1.3e-5 relative (H100)",
)
COMPILED = ErrorModel(
    rounding=None,
    norm=64,
    lean_against="reference",
    source=f"error norms at most 4.1 u of the gradients' scale on the {_H100} and 1.7 u on the {_X86}, fp32; "
    "the lean beyond eager's is bounded",
)
COMPILED_GRAD = dataclasses.replace(
    COMPILED,
    max_lean=4,
    source=COMPILED.source + f"; a bf16 tiny BERT's gradients lean 0.2-0.64% towards zero beyond eager's on the "
    f"{_H100} (Inductor keeps intermediates eager rounds to bf16), 1.6 ulp; the outputs do not",
)
AUTOCAST_LAYER = ErrorModel(
    precision="bfloat16",
    rounding=None,
    norm=16,
    lean_against="reference",
    source=f"error norms at most 0.6 u of bf16 on the {_H100} and the {_X86}; the lean beyond math "
    "attention's is bounded",
)
# Fused GEMM epilogues (rocm_validate.correctness.epilogues): a dense layer's output rounds once
# after a float32 epilogue (twice where the pre-activation is rounded first), its gradients a few
# times; bf16 GEMMs add GEMM_LOW's split-K allowance, and the accumulated error runs over K.
EPILOGUE = ErrorModel(
    rounding=2,
    spread=8,
    scale=8,
    accumulation=2,
    growth="sqrt",
    source=f"dense + bias + activation: a GEMM_LOW bound carried through the activation's slope and curvature "
    f"(magnitudes); healthy paths reached 0.32 of the output bound and 0.02 of the gradients' on the {_X86} "
    "(fp32 and bf16); on the 2 x H200 (torch 2.11) every bf16 and fp16 output and every gradient passed with these "
    "coefficients (margins not recorded); float32 outputs on a GPU: EPILOGUE_FP32_GPU",
)
EPILOGUE_GRAD = dataclasses.replace(EPILOGUE, rounding=4, accumulation=4)
# float32 on a GPU: cuBLASLt's GELU epilogue computes its activation to a few ulps of the output's scale
# (an approximate tanh), not to the output's own rounding: twice the scale term.
EPILOGUE_FP32_GPU = dataclasses.replace(
    EPILOGUE,
    scale=16,
    source="dense + bias + activation, the activation's error a few ulps of max|golden|: on the H200 (torch 2.11, "
    "CUDA 13.0, cuBLASLt's GELU epilogue) the healthy float32 output reached 1.25-1.32 x the CPU-measured bound "
    "(scale 8), whose scale term (8 u max|g|, max|g| ~ 6) made 0.9 of the worst element's bound; at 16, three runs on "
    "2 x H200 (2026-11-26) put the worst element at 0.68 of its bound on every GPU",
)
CPU_DROPOUT_LEAN = 0.6


def _block_model(name: str, part: str, backend: str) -> ErrorModel:
    """A building block's error model from its BLOCK_ROWS row: rounding 2 for the output and 4 for
    gradients; on the CPU, dropout's own lean."""
    row = BLOCK_ROWS[name]
    out = part == "out"
    return ErrorModel(
        rounding=2 if out else 4,
        accumulation=row.accumulation_out if out else row.accumulation_grad,
        growth="sqrt",
        spread=row.spread_out if out else row.spread_grad,
        scale=row.scale,
        max_lean=CPU_DROPOUT_LEAN if backend == "cpu" and name == "dropout" else 0.1,
        source=_BLOCK_SOURCE,
    )


# --- accuracy: the error norm against a correct implementation's (error_model.Accuracy) ----------
# One bit lost doubles the error norm, so a factor below 2 fails it where the prediction is tight.
# `roundings` (in quadrature, of ROUNDING_RMS u ||golden|| each) are set so the worst healthy case of
# each family sits at or below 1: from the lowest SQNR of each family on the H100 (torch 2.11, every
# test of the suite: docs/measurements/correctness-truth-*.json; 20 log10 of the one-rounding
# SQNR's margin squared) and the x86 CPU (torch 2.13), whichever is larger.
ONE_BIT = 1.8
_ACC_H100 = "roundings from the worst healthy error norm of the H100 (torch 2.11) and the x86 CPU (torch 2.13)"


@dataclass(frozen=True)
class Roundings:
    """A block's accuracy test: roundings (in quadrature) of its output and its gradients, in bf16 /
    fp16 and in float32."""

    low_out: float
    low_grad: float
    float32_out: float
    float32_grad: float


@dataclass(frozen=True)
class BlockRow:
    """A building block's row of the table (`block.<name>.out` / `.grad`): its error model's
    coefficients for the output and the gradients, and its accuracy test's roundings (the CPU's
    own where its kernels need more)."""

    accumulation_out: float
    accumulation_grad: float
    spread_out: float
    spread_grad: float
    scale: float
    roundings: Roundings
    cpu_roundings: Roundings | None = None


# Building blocks: an output rounds twice at most (a float32 result, then the dtype), a gradient up
# to four times. Per block, BlockRow's fields:
# - accumulation_out / _grad: float32 accumulation over K terms (the row, the vocabulary, the tokens
#   of a weight gradient), grown like sqrt(K), times the magnitude each block defines; the comment
#   gives the coefficients (out, grad) the healthy suite needed on the H100 (torch 2.11) and the x86
#   CPU (torch 2.13; the CPU sums float32 reductions in float64);
# - spread_out / _grad: roundings of intermediates held in bf16 / fp16 (the CPU's bf16 kernels, a
#   residual sum rounded before its norm, autocast's bf16 cross-entropy gradients), in ulps of the
#   dtype times the magnitude; at most 0.9 needed on the CPU, 5.8 on the H100 (residual LayerNorm, fp16);
# - scale: a normwise term in ulps of max|golden| for results through saved bf16 / fp16 values
#   (fp16 flushes the small ones);
# - roundings: the accuracy test's, of the output and the gradients in bf16 / fp16 and in float32;
# - cpu_roundings: the x86 CPU's kernels' (torch 2.13), where they need more (its worst healthy ratio
#   x 1.05, squared): its bf16 LayerNorm backward sums the weight and bias gradients over tokens less
#   accurately (12 roundings), its float32 log-sum-exp over 128,256 logits leaves the cross-entropy
#   gradients at 42-73 roundings, its float32 GELU (erf) 2.6 x its output's own rounding.
BLOCK_ROWS: dict[str, BlockRow] = {
    "layer_norm": BlockRow(
        accumulation_out=4,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.83 / 0.19, 0.009 / 0.16
        roundings=Roundings(
            low_out=1.2, low_grad=1.3, float32_out=7400, float32_grad=7400
        ),  # fp32: rows with |mean| / std = 100 (85 roundings on the H100)
        cpu_roundings=Roundings(low_out=1.2, low_grad=180, float32_out=10400, float32_grad=12100),
    ),
    "rms_norm": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.03 / 0.02, 0.008 / 0.20
        roundings=Roundings(low_out=1.2, low_grad=1.2, float32_out=5, float32_grad=45),
    ),
    "llama_rms_norm": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.03 / 0.02, 0.008 / 0.20
        roundings=Roundings(low_out=2.2, low_grad=3.2, float32_out=5, float32_grad=21),
    ),
    "residual_layer_norm": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=16,
        spread_grad=16,
        scale=0,  # needed H100 / CPU: 0.28 / 0.15, 0.009 / 0.14
        roundings=Roundings(
            low_out=32, low_grad=31, float32_out=110, float32_grad=140
        ),  # the residual sum rounds before its norm
        cpu_roundings=Roundings(low_out=32, low_grad=90, float32_out=155, float32_grad=176),
    ),
    "residual_rms_norm": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.04 / 0.04, 0.007 / 0.20
        roundings=Roundings(low_out=2.3, low_grad=2.2, float32_out=6, float32_grad=45),
    ),
    "gelu": BlockRow(
        accumulation_out=16,
        accumulation_grad=8,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.57 / 5.1, 0.56 / 2.2 (|x| u: 1 + erf(x / sqrt 2) cancels for x < 0)
        roundings=Roundings(
            low_out=1.0, low_grad=1.2, float32_out=1, float32_grad=3.2
        ),  # correctly rounded outputs: exactly one rounding
        cpu_roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=1.4, float32_grad=17),
    ),
    "gelu_tanh": BlockRow(
        accumulation_out=4,
        accumulation_grad=12,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.83 / 0.51, 1.5 / 2.9
        roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=1, float32_grad=7.5),
        cpu_roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=1.1, float32_grad=9.6),
    ),
    "silu": BlockRow(
        accumulation_out=4,
        accumulation_grad=4,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.44 / 0.10, 0.90 / 0.87
        roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=1.9, float32_grad=45),
    ),
    "swiglu": BlockRow(
        accumulation_out=4,
        accumulation_grad=4,
        spread_out=8,
        spread_grad=8,
        scale=4,  # needed H100 / CPU: 0.81 / 0.61, 0.89 / 0.63; fp16 reached 1.14 of spread 8 alone
        roundings=Roundings(low_out=2.2, low_grad=2.2, float32_out=4, float32_grad=8),
    ),
    "softmax": BlockRow(
        accumulation_out=1,
        accumulation_grad=8,
        spread_out=8,
        spread_grad=8,
        scale=4,  # needed H100 / CPU: 0.10 / 0.04, 1.6 / 1.3
        roundings=Roundings(low_out=1.2, low_grad=4.6, float32_out=13, float32_grad=80),
        cpu_roundings=Roundings(low_out=1.2, low_grad=4.6, float32_out=26, float32_grad=127),
    ),
    "log_softmax": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=4,  # needed H100 / CPU: 0.003 / 0.001, 0.05 / 0.02
        roundings=Roundings(low_out=1.2, low_grad=1.2, float32_out=2.3, float32_grad=7.2),
        cpu_roundings=Roundings(low_out=1.2, low_grad=2.8, float32_out=2.3, float32_grad=31),
    ),
    "cross_entropy": BlockRow(
        accumulation_out=1,
        accumulation_grad=32,
        spread_out=8,
        spread_grad=16,
        scale=4,  # needed H100 / CPU: -, 0.49 / 9.8 (the CPU's log-sum-exp over 128,256 logits)
        roundings=Roundings(low_out=1.2, low_grad=1.5, float32_out=4.8, float32_grad=11.5),
        cpu_roundings=Roundings(low_out=1.2, low_grad=1.5, float32_out=4.8, float32_grad=2100),
    ),
    "cross_entropy_mean": BlockRow(
        accumulation_out=1,
        accumulation_grad=32,
        spread_out=8,
        spread_grad=16,
        scale=4,  # needed H100 / CPU: 0.13 / 0, 0.36 / 7.2
        roundings=Roundings(
            low_out=1.2, low_grad=1.2, float32_out=4.7e6, float32_grad=14
        ),  # fp32: a scalar mean over every token
        cpu_roundings=Roundings(low_out=1.2, low_grad=1.2, float32_out=4.7e6, float32_grad=6400),
    ),
    "embedding": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: -, 0.02 / 0.08
        roundings=Roundings(low_out=1.2, low_grad=1.2, float32_out=1, float32_grad=7.9),
    ),
    "dropout": BlockRow(
        accumulation_out=1,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: one rounding of x / (1 - p)
        roundings=Roundings(low_out=1.2, low_grad=1.2, float32_out=4.8, float32_grad=4.8),
        cpu_roundings=Roundings(
            low_out=2.1, low_grad=2.1, float32_out=4.8, float32_grad=4.8
        ),  # the CPU rounds 1 / (1 - p) to bf16
    ),
    "sum": BlockRow(
        accumulation_out=2,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.0005 / 0 (a GPU's float32 partial sums)
        roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=2.2, float32_grad=2.2),
        cpu_roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=4.7, float32_grad=2.2),
    ),
    "mean": BlockRow(
        accumulation_out=2,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.0005 / 0
        roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=2.2, float32_grad=2.2),
        cpu_roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=4.7, float32_grad=2.2),
    ),
    "var": BlockRow(
        accumulation_out=4,
        accumulation_grad=1,
        spread_out=8,
        spread_grad=8,
        scale=0,  # needed H100 / CPU: 0.0005 / 0 (Welford on rows with |mean| / std = 4)
        roundings=Roundings(low_out=1.0, low_grad=1.2, float32_out=5, float32_grad=5),
    ),
}
# SDPA part: roundings (the H100's flash, memory-efficient and cuDNN kernels: out 1.35, grad_q 5.0,
# grad_k 4.7, grad_v 1.5 roundings in bf16 and fp16), plus one rounding of the magnitudes in the
# accumulator's precision (a gradient whose golden is exactly 0, as grad_q with one key, is still
# the difference of rounded terms)
SDPA_ROUNDINGS = {"out": 2.0, "grad_q": 25.0, "grad_k": 25.0, "grad_v": 2.3}
# The math kernel on nested jagged tensors on a GPU (the packed check's njt-math path) rounds its
# bf16 / fp16 intermediates to the input precision: the healthy H200 (torch 2.11) reached 2.05 (out)
# and 1.91 (grad_v) of the prediction above, and 2.9 x the dense math reference's error norm. Its out
# and grad_v are predicted with 2 x 2.05^2 x 1.3 roundings, so a loss of about 1.2 bits fails there,
# not one; grad_q / grad_k (0.73) keep the table above.
SDPA_ROUNDINGS_GPU_MATH = {**SDPA_ROUNDINGS, "out": 11.0, "grad_v": 11.0}
# float32 on the x86 CPU (torch 2.13), per kernel and part: its fused kernel's error is up to 16
# (out) and 20 (grad_v) output roundings (the worst healthy ratio x 1.1, squared)
SDPA_ROUNDINGS_CPU_FLOAT32 = {
    "flash": {"out": 310.0, "grad_q": 60.0, "grad_k": 60.0, "grad_v": 470.0},
    "math": {"out": 12.0, "grad_q": 12.0, "grad_k": 12.0, "grad_v": 12.0},
}
# ROCm's kernels were not measured (no AMD GPU was lent): PyTorch's ROCm fudge factors are 1.5-5 x
# CUDA's, so their factor is 4: a loss of two bits fails there, one may not.
ROCM_FACTOR = 4.0
GEMM_ACCURACY = {
    # cuBLAS reduces some split-K partial sums in bf16 itself: the H100's healthy bf16 GEMMs reached
    # 1.78 roundings (odd K, fuzzed shapes); the GPU's bf16 factor is set above it, so a loss of 1.1
    # bits fails there (the CPU's factor is ONE_BIT: it reached 1.12)
    "bfloat16": Accuracy("GEMM", factor=2.2, accumulation=0.5, source="H100 bf16 GEMMs reached 1.78"),
    "float16": Accuracy("GEMM", factor=ONE_BIT, accumulation=0.5, source="H100 fp16 GEMMs reached 1.0"),
    # float32: the accumulation order dominates (K = 14336: 85 roundings on the H100, 22 with MKL)
    "float32": Accuracy(
        "GEMM",
        factor=2.0,
        accumulation=0.5,
        source="H100 cuBLAS float32 reached 0.85 of this prediction at K = 4096 and 0.6 at 14336",
    ),
}
# Checks judged against their same-precision reference (flash-attention's rule), as no correct
# kernel's error can be predicted: optimizers (the for-loop), compiled graphs (eager), the autocast
# layer (math attention), fused epilogues (the unfused chain). Factors above 2 say why.
REFERENCE_ACCURACY: dict[str, float] = {
    "adamw.param": 2.0,
    "adamw.state": 2.0,
    "lamb.param": 2.0,
    "compiled.out": 2.0,
    "compiled.grad": 2.0,
    "bert_layer.out": 2.0,
    "bert_layer.grad": 2.5,  # H100: the key bias's gradient, exactly 0 in float64, 2.15 x the math layer's noise
    "epilogue.out": 2.0,
    "epilogue.grad": 2.0,
}
# Rows where the reference shares less than the precision with the candidate: no bit can be seen.
REFERENCE_ACCURACY_WIDE: dict[tuple[str, str, str], float] = {
    # the CUDA fused AdamW computes 1 - beta2 from a float32 beta2: exp_avg_sq 52 x the for-loop's error
    ("adamw.state", "cuda", ""): 64.0,
    # the two float32 GEMM paths of an epilogue block K differently on a GPU: 4.1 x (H200)
    ("epilogue.out", "cuda", "float32"): 8.0,
    ("epilogue.out", "rocm", "float32"): 8.0,
}


def _accuracy_of(rule: Rule) -> Accuracy | None:
    """The accuracy test of a row, by its family (None for exact, FP8 and graph rows, whose
    precision is not the question: FP8's error is its quantization, judged by SQNR)."""
    check, backend = rule.check, rule.backend
    parts = check.split(".")
    if parts[0] == "sdpa":
        roundings = SDPA_ROUNDINGS[parts[-1]]
        wide = SDPA_ROUNDINGS_CPU_FLOAT32[parts[1]][parts[-1]] if backend == "cpu" else roundings
        low = SDPA_ROUNDINGS_GPU_MATH[parts[-1]] if parts[1] == "math" and backend != "cpu" else roundings
        return Accuracy(
            "attention", factor=ONE_BIT, roundings=low, roundings_float32=wide, spread=1.0, source=_ACC_H100
        )
    if parts[0] == "gemm" and parts[1] in GEMM_ACCURACY:
        found = GEMM_ACCURACY[parts[1]]
        if backend == "cpu":
            return dataclasses.replace(found, factor=ONE_BIT, source="x86 CPU (oneDNN / MKL) reached 1.12")
        return found  # on ROCm, tolerance_for widens every accuracy test (_on_rocm)
    if parts[0] == "block" and parts[1] in BLOCK_ROWS and parts[2] in ("out", "grad"):
        row = BLOCK_ROWS[parts[1]]
        chosen = row.cpu_roundings if backend == "cpu" and row.cpu_roundings is not None else row.roundings
        out = parts[2] == "out"
        return Accuracy(
            parts[1].replace("_", " "),
            factor=ONE_BIT,
            roundings=chosen.low_out if out else chosen.low_grad,
            roundings_float32=chosen.float32_out if out else chosen.float32_grad,
            source=_ACC_H100,
        )
    allowed = REFERENCE_ACCURACY_WIDE.get((check, backend, rule.dtype), REFERENCE_ACCURACY.get(check))
    if allowed is not None:
        return Accuracy(parts[0], factor=allowed, against="reference", source="the same-precision reference's error")
    return None


def _has_cpu_roundings(block: str) -> bool:
    row = BLOCK_ROWS.get(block)
    return row is not None and row.cpu_roundings is not None


def with_accuracy(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """Each row with its family's accuracy test (`_accuracy_of`), unless it sets its own or is
    exact; a block row the CPU needs its own roundings for gains a CPU twin."""
    rules = tuple(rules)
    twins = tuple(
        dataclasses.replace(rule, backend="cpu")
        for rule in rules
        if rule.backend == "*"
        and (rule.check in ("gemm.bfloat16", "gemm.float16") or _has_cpu_roundings(rule.check.split(".")[1]))
        and not any(other.check == rule.check and other.backend == "cpu" for other in rules)
    )
    return tuple(
        rule
        if rule.tolerance.accuracy is not None or rule.tolerance.exact or _accuracy_of(rule) is None
        else dataclasses.replace(rule, tolerance=dataclasses.replace(rule.tolerance, accuracy=_accuracy_of(rule)))
        for rule in (*rules, *twins)
    )


def _t(k: float | None, atol: float = 1e-5, source: str = "", **more: Any) -> Tolerance:
    """A row's tolerance; atol defaults to PyTorch _check_equal's (float32's default atol)."""
    return Tolerance(k=k, atol=atol, source=source, **more)


EXACT = Tolerance(k=0, source=_EXACT)

BLOCK_NAMES = tuple(BLOCK_ROWS)
# A dropout keep count further than this many binomial standard deviations from N (1 - p) fails:
# a healthy kernel does so once in 5e8 runs; p and 1 - p swapped is thousands of deviations off.
KEEP_RATE_SIGMAS = 6.0

RULES: tuple[Rule, ...] = with_accuracy(
    (
        # --- scaled_dot_product_attention, per backend: k over the math backend in the test dtype ---
        Rule(
            "sdpa.flash.out",
            _t(4, source=_PT_FLASH + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(180, source=_PT_FLASH + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(16, source=_PT_FLASH + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.flash.grad_v",
            _t(4, source=_PT_FLASH + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        Rule(
            "sdpa.flash.out",
            _t(6, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=8),
            backend="rocm",
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(360, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(45, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(70, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=1024,
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(190, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(650, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.flash.grad_v",
            _t(6, source=_PT_FLASH_ROCM, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
        ),
        Rule(
            "sdpa.flash.out",
            _t(5, source=_PT_FLASH_CK, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=8),
            backend="rocm",
            library="ck",
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(855, source=_PT_FLASH_CK, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            library="ck",
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(145, source=_PT_FLASH_CK, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            library="ck",
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(1550, source=_PT_FLASH_CK, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            library="ck",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(190, source=_PT_FLASH_CK, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            library="ck",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.flash.out",
            _t(8, source=_CPU_MEASURED, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_CPU, k_norm=4),
            backend="cpu",
        ),
        Rule(
            "sdpa.flash.grad_q",
            _t(32, source=_CPU_MEASURED, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_CPU, k_norm=16),
            backend="cpu",
        ),
        Rule(
            "sdpa.flash.grad_k",
            _t(32, source=_CPU_MEASURED, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_CPU, k_norm=8),
            backend="cpu",
        ),
        Rule(
            "sdpa.flash.grad_v",
            _t(16, source=_CPU_MEASURED, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_CPU, k_norm=32),
            backend="cpu",
        ),
        Rule(
            "sdpa.mem_efficient.out",
            _t(4, source=_PT_MEM_EFF + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        Rule(
            "sdpa.mem_efficient.grad_q",
            _t(160, source=_PT_MEM_EFF + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.mem_efficient.grad_k",
            _t(25, source=_PT_MEM_EFF + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.mem_efficient.grad_v",
            _t(8.5, source=_PT_MEM_EFF + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        Rule(
            "sdpa.mem_efficient.out",
            _t(6, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=8),
            backend="rocm",
        ),
        Rule(
            "sdpa.mem_efficient.grad_q",
            _t(360, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
        ),
        Rule(
            "sdpa.mem_efficient.grad_k",
            _t(45, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
        ),
        Rule(
            "sdpa.mem_efficient.grad_k",
            _t(70, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=1024,
        ),
        Rule(
            "sdpa.mem_efficient.grad_k",
            _t(160, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.mem_efficient.grad_q",
            _t(670, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            min_seq_k=2048,
        ),
        Rule(
            "sdpa.mem_efficient.grad_v",
            _t(16, source=_PT_MEM_EFF, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_ROCM, k_norm=32),
            backend="rocm",
            arch="gfx95",
        ),
        Rule(
            "sdpa.cudnn.out",
            _t(4, source=_PT_CUDNN + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        Rule(
            "sdpa.cudnn.grad_q",
            _t(180, source=_PT_CUDNN + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.cudnn.grad_k",
            _t(16, source=_PT_CUDNN + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=16),
        ),
        Rule(
            "sdpa.cudnn.grad_v",
            _t(4, source=_PT_CUDNN + _H100_NORMS, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_GPU, k_norm=4),
        ),
        *(
            Rule(
                f"sdpa.{kernel}.grad_v",
                _t(k, source=source, min_sqnr_db=SDPA_MIN_SQNR_DB, model=SDPA_FP16_GRAD_V, k_norm=4),
                dtype="float16",
            )
            for kernel, k, source in (
                ("flash", 4, _PT_FLASH + _H100_NORMS),
                ("mem_efficient", 8.5, _PT_MEM_EFF + _H100_NORMS),
                ("cudnn", 4, _PT_CUDNN + _H100_NORMS),
            )
        ),
        # --- the math backend on packed sequences (nested jagged tensors): the reference's own kernel, per sequence ---
        *(
            Rule(
                f"sdpa.math.{part}",
                _t(k, source=source, min_sqnr_db=SDPA_MIN_SQNR_DB, model=model, k_norm=k_norm),
                backend=backend,
            )
            for part in ("out", "grad_q", "grad_k", "grad_v")
            for model, backend, k, k_norm, source in (
                (SDPA_GPU, "*", 8, 6, _MATH_PACKED_GPU),
                (SDPA_CPU, "cpu", 4, 4, _MATH_PACKED),
            )
        ),
        # --- dense GEMM (F.linear through the BLAS library); reference = the golden correctly rounded ---
        Rule("gemm.bfloat16", _t(8, atol=0.0, source=_GEMM_LOW, model=GEMM_LOW, k_norm=4)),
        Rule("gemm.float16", _t(8, atol=0.0, source=_GEMM_LOW, model=GEMM_LOW, k_norm=4)),
        Rule("gemm.float32", _t(64, atol=0.0, source=_GEMM_FP32, model=GEMM_FP32, k_norm=32)),
        Rule("gemm.float32", _t(256, atol=0.0, source=_GEMM_FP32_GPU, model=GEMM_FP32, k_norm=170), backend="cuda"),
        Rule("gemm.float32", _t(256, atol=0.0, source=_GEMM_FP32_GPU, model=GEMM_FP32, k_norm=170), backend="rocm"),
        Rule("gemm.exact", EXACT),
        Rule("reduction.exact", EXACT),  # adversarial inputs exact in float32 accumulation (reductions.py)
        # --- FP8 ---
        Rule("fp8.cast", EXACT),
        Rule("scaled_mm.exact", EXACT),
        Rule("scaled_mm.emulation.bfloat16", _t(4, atol=0.0, source=_PT_SCALED_MM, model=SCALED_MM)),
        Rule(
            "scaled_mm.emulation.float32", _t(4, atol=0.0, source=_PT_SCALED_MM_FP32, rtol_of_max=1e-3, model=SCALED_MM)
        ),
        Rule("scaled_mm.quantization", _t(None, atol=0.0, min_sqnr_db=25.0, source=_TORCHAO, model=FP8_LEAN)),
        Rule("fp8_linear.out", _t(None, atol=0.0, min_sqnr_db=26.5, source=_FP8_LINEAR_OUT, model=FP8_LEAN)),
        Rule("fp8_linear.grad_input", _t(None, atol=0.0, min_sqnr_db=22.5, source=_FP8_LINEAR_GRAD, model=FP8_LEAN)),
        Rule("fp8_linear.grad_weight", _t(None, atol=0.0, min_sqnr_db=22.5, source=_FP8_LINEAR_GRAD, model=FP8_LEAN)),
        Rule("fp8_linear.paths", _t(0, atol=0.0, source=_FP8_PATHS, rtol_of_max=1e-2)),
        # --- fused GEMM epilogues vs the float64 chain with the activation each path claims; reference = unfused eager ---
        Rule("epilogue.out", _t(8, atol=0.0, source=_EPILOGUE, model=EPILOGUE, k_norm=4)),
        *(
            Rule(
                "epilogue.out",
                _t(8, atol=0.0, source=_EPILOGUE_FP32_GPU, model=EPILOGUE_FP32_GPU, k_norm=8),
                backend=backend,
                dtype="float32",
            )
            for backend in ("cuda", "rocm")
        ),
        Rule("epilogue.grad", _t(16, atol=0.0, source=_EPILOGUE, model=EPILOGUE_GRAD, k_norm=8)),
        # --- optimizers, after 20 steps, vs the float64 reference; reference = for-loop in the same dtype ---
        Rule("adamw.param", _t(4, atol=1e-7, source=_OPTIM, k_norm=4, model=OPTIMIZER)),
        Rule("adamw.state", _t(4, atol=1e-7, source=_OPTIM, k_norm=4, model=OPTIMIZER)),
        Rule(
            "adamw.state",
            _t(4, atol=1e-7, rtol_of_max=3e-5, source=_OPTIM_STATE_GPU, k_norm=4, model=OPTIMIZER_STATE_GPU),
            backend="cuda",
        ),
        Rule("lamb.param", _t(4, atol=1e-6, source=_APEX_LAMB, k_norm=4, model=OPTIMIZER)),
        # --- Inductor / Triton compiled vs eager ---
        Rule("compiled.out", _t(4, source=_INDUCTOR, k_norm=4, model=COMPILED)),
        Rule("compiled.grad", _t(4, source=_INDUCTOR, k_norm=4, model=COMPILED_GRAD)),
        # --- a BERT-L encoder layer under bf16 autocast ---
        Rule("bert_layer.out", _t(4, source=_AUTOCAST, k_norm=4, model=AUTOCAST_LAYER)),
        Rule("bert_layer.grad", _t(16, source=_AUTOCAST_GRAD, k_norm=8, model=AUTOCAST_LAYER)),
        # --- building blocks on their own, vs their float64 definitions (rocm_validate.correctness.blocks) ---
        *(
            Rule(
                f"block.{name}.{part}",
                Tolerance(
                    k=None,
                    source=_CPU_DROPOUT if (name, backend) == ("dropout", "cpu") else _BLOCKS,
                    model=_block_model(name, part, backend),
                ),
                backend=backend,
            )
            for name in BLOCK_NAMES
            for part in ("out", "grad")
            for backend in (("*", "cpu") if name == "dropout" else ("*",))
            if (name, part) != ("embedding", "out")
        ),
        Rule("block.embedding.out", EXACT),
        Rule("block.dropout.keep_rate", Tolerance(k=0, atol=KEEP_RATE_SIGMAS, source=_KEEP_RATE)),
        # --- CUDA / HIP graph replay vs eager and vs other replays ---
        Rule("graph.replay", Tolerance(k=0, source=_GRAPHS)),
        # --- FP8 training recipes (torchao, Transformer Engine, the project's) on Llama-3.1-8B blocks, vs float64;
        # a row narrowed by library=<recipe name> (e.g. "torchao-rowwise") sets one recipe's minimums ---
        *(
            Rule(f"fp8_recipe.{block}.{part}", tolerance)
            for block in ("ffn", "decoder")
            for part, tolerance in (
                ("out", _t(None, atol=0.0, min_sqnr_db=20.0, source=_TORCHAO_FFN, model=FP8_RECIPE_LEAN)),
                ("grad_input", _t(None, atol=0.0, min_sqnr_db=17.0, source=_TORCHAO_GRADS, model=FP8_RECIPE_LEAN)),
                (
                    "grad_weight",
                    _t(
                        None,
                        atol=0.0,
                        min_sqnr_db=17.0 if block == "ffn" else 14.5,
                        source=_TORCHAO_GRADS if block == "ffn" else _DECODER_WEIGHT_GRADS,
                        model=FP8_RECIPE_LEAN,
                    ),
                ),
                ("tile", _t(None, atol=0.0, min_sqnr_db=12.0, source=_RECIPE_TILE)),
                ("loss", _t(0, atol=0.0, rtol_of_max=0.02, source=_RECIPE_LOSS)),
            )
        ),
    )
)


def _on_rocm(tolerance: Tolerance, backend: str) -> Tolerance:
    """ROCm's kernels were never measured here: every accuracy test there allows ROCM_FACTOR, also
    where the row that matched is one for any backend ("*"), whose factor was set on CUDA and the CPU."""
    accuracy = tolerance.accuracy
    if backend != "rocm" or accuracy is None or accuracy.factor >= ROCM_FACTOR:
        return tolerance
    widened = dataclasses.replace(
        accuracy, factor=ROCM_FACTOR, source=f"{accuracy.source}; ROCm not measured: x{ROCM_FACTOR:g}"
    )
    return dataclasses.replace(tolerance, accuracy=widened)


def tolerance_for(
    check: str,
    backend: str,
    arch: str = "",
    library: str = "",
    seq_k: int = 0,
    rules: Iterable[Rule] = (),
    dtype: str = "",
) -> Tolerance:
    """The tolerance of `check` on this platform: the most specific matching rule of `RULES`.

    backend: "cpu", "cuda" or "rocm"; arch: "gfx942", "sm_90", ...; library: the flash attention
    library on ROCm ("aotriton" or "ck"); seq_k: the key sequence length of an attention check;
    dtype: the dtype checked, for rows narrowed to one.
    rules: a project's own rows (docs/extending.md); when one of them matches, the most specific
    of those wins over the package table, which stays as it is.
    """
    rules = tuple(rules)
    for table in (rules, RULES):
        matching = [rule for rule in table if rule.matches(check, backend, arch, library, seq_k, dtype)]
        if matching:
            return _on_rocm(max(matching, key=lambda rule: rule.specificity).tolerance, backend)
    known = sorted({rule.check for rule in (*rules, *RULES)})
    raise UnknownCheckError(f"no tolerance for check {check!r}; the table has: {', '.join(known)}")
