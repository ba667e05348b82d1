"""scaled_dot_product_attention checks: one SDPA kernel against the float64 math golden.

A case fixes shapes, dtype, mask and V's memory layout. Inputs and the upstream gradient are
standard normal, as FlashAttention's own tests draw them: with PyTorch's uniform [0, 1) inputs the
attention is nearly uniform and grad_q is a small difference of large terms, so a fused kernel's
grad_q error reaches 15 dB below the signal on an H100, too close to a halved gradient (6 dB) for any
bound to tell them apart. PyTorch's fudge factors still bound each element (they were set on
harder inputs); the norm bound and the minimum SQNR catch a wrong gradient spread over the tensor.
An SDPA kernel ('flash', 'mem_efficient', 'cudnn', 'math': PyTorch's SDPBackend members) is named
`sdpa_kernel` here. The candidate runs under `torch.nn.attention.sdpa_kernel([...])` restricted to
it; the low-precision reference is the math kernel in the same dtype; the golden is computed in
float64 from the definition. A kernel that refuses a case raises `BackendRefused` with PyTorch's
reasons (the test skips); a kernel that runs and is wrong fails its comparison. The golden is attention's definition in float64, written
out (`golden_attention`), so a bug in scaled_dot_product_attention itself cannot reach it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from rocm_validate.core.requirements import device_label
from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.errors import BackendRefused
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.shapes import attention_size

SDPA_KERNELS = ("flash", "mem_efficient", "cudnn")  # the candidates; 'math' is the reference
MASKS = ("none", "causal", "bool", "additive")
V_LAYOUTS = ("contiguous", "transposed")
PARTS = ("out", "grad_q", "grad_k", "grad_v")
_REFUSAL_MARKERS = ("No available kernel", "No viable backend")


def torch_sdpa_backend(sdpa_kernel: str) -> Any:
    """'flash' -> SDPBackend.FLASH_ATTENTION, and so on for mem_efficient, cudnn, math."""
    from torch.nn.attention import SDPBackend

    table = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    return table[sdpa_kernel]


# Masks each kernel is documented to take: flash attention takes no explicit mask (a bool or
# additive mask is a platform limit there); the others take every mask the suite draws.
_SUPPORTED_MASKS = {"flash": ("none", "causal"), "cudnn": ("none", "causal")}


def supports(sdpa_kernel: str, case: AttentionCase) -> bool:
    """Whether `sdpa_kernel` is meant to run `case`: when it refuses one it supports, the case was
    not validated (a failure under --rocm-strict), not merely skipped."""
    return case.mask in _SUPPORTED_MASKS.get(sdpa_kernel, MASKS)


def rocm_flash_library() -> str:
    """The flash attention library PyTorch uses on ROCm: 'ck' or 'aotriton' (its default)."""
    getter = getattr(torch.backends.cuda, "preferred_rocm_fa_library", None)
    if getter is None or not getattr(torch.version, "hip", None):
        return ""
    return "ck" if "ck" in str(getter()).lower().split(".")[-1] else "aotriton"


@dataclass(frozen=True)
class AttentionCase:
    """One SDPA problem: shapes, dtype, mask kind, V layout and input magnitude."""

    batch: int
    heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    dtype: str
    mask: str = "none"
    v_layout: str = "contiguous"
    input_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.mask not in MASKS:
            raise ValueError(f"mask must be one of {', '.join(MASKS)}, found {self.mask!r}")
        if self.v_layout not in V_LAYOUTS:
            raise ValueError(f"v_layout must be one of {', '.join(V_LAYOUTS)}, found {self.v_layout!r}")

    def describe(self) -> str:
        extras = [self.dtype, f"mask {self.mask}", f"V {self.v_layout}"]
        if self.input_scale != 1.0:
            extras.append(f"inputs x{self.input_scale:g}")
        shape = f"B{self.batch} H{self.heads} Lq{self.seq_q} Lk{self.seq_k} D{self.head_dim}"
        return f"{shape}, {', '.join(extras)}"


# The suite's cases, each aimed at a class of real bug: masks (pytorch#147460), a non-contiguous V
# (ROCm/pytorch#3230), large inputs (NaNs: ROCm/aotriton#54, pytorch#116176), fewer queries than keys.
NAMED_CASES: dict[str, dict[str, Any]] = {
    "plain": {},
    "causal": {"mask": "causal"},
    "bool-mask": {"mask": "bool"},
    "additive-mask": {"mask": "additive"},
    "v-transposed": {"v_layout": "transposed"},
    "causal-v-transposed": {"mask": "causal", "v_layout": "transposed"},
    "bool-mask-v-transposed": {"mask": "bool", "v_layout": "transposed"},
    "large-inputs": {"input_scale": 8.0},
    "short-queries": {"query_divisor": 4},
}


def named_case(name: str, head_dim: int, dtype: str, is_gpu: bool) -> AttentionCase:
    """The case called `name` at the device class's size (see rocm_validate.workloads.shapes)."""
    options = dict(NAMED_CASES[name])
    size = attention_size(head_dim, is_gpu)
    seq_q = size.seq // options.pop("query_divisor", 1)
    return AttentionCase(size.batch, size.heads, seq_q, size.seq, head_dim, dtype, **options)


@dataclass
class AttentionInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor  # possibly a transposed view of a (B, L, H, D) tensor
    mask: torch.Tensor | None
    is_causal: bool
    upstream: torch.Tensor


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().requires_grad_(True)


def make_inputs(case: AttentionCase, device: torch.device | str, seed: int = 0) -> AttentionInputs:
    """Seeded inputs on `device`, drawn on the CPU so every device sees the same numbers, then
    rounded to the case's dtype. Drawn in float32: a float64 draw of Llama's shape took four times
    as long (0.8 s a case) and rounded to the same kind of inputs."""
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.dtype)

    def normal(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * case.input_scale).to(device=device, dtype=dtype)

    q = _leaf(normal(case.batch, case.heads, case.seq_q, case.head_dim))
    k = _leaf(normal(case.batch, case.heads, case.seq_k, case.head_dim))
    if case.v_layout == "transposed":
        v = _leaf(normal(case.batch, case.seq_k, case.heads, case.head_dim)).transpose(1, 2)
    else:
        v = _leaf(normal(case.batch, case.heads, case.seq_k, case.head_dim))
    mask = None
    if case.mask == "bool":
        keep = torch.rand(case.batch, 1, case.seq_q, case.seq_k, generator=g) < 0.5
        keep[..., 0] = True  # no fully masked row: its softmax is undefined
        mask = keep.to(device)
    elif case.mask == "additive":
        mask = torch.randn(case.batch, 1, case.seq_q, case.seq_k, generator=g).to(device=device, dtype=dtype)
    upstream = torch.randn(case.batch, case.heads, case.seq_q, case.head_dim, generator=g).to(
        device=device, dtype=dtype
    )
    return AttentionInputs(q, k, v, mask, case.mask == "causal", upstream)


def upcast(inputs: AttentionInputs, dtype: torch.dtype = torch.float64) -> AttentionInputs:
    """The same inputs in `dtype` (the golden's), as new leaves keeping V's layout."""
    mask = inputs.mask
    if mask is not None and mask.is_floating_point():
        mask = mask.to(dtype)
    return AttentionInputs(
        _leaf(inputs.q.to(dtype)),
        _leaf(inputs.k.to(dtype)),
        _leaf(inputs.v.to(dtype)),
        mask,
        inputs.is_causal,
        inputs.upstream.to(dtype),
    )


def run_sdpa(sdpa_kernel: str, inputs: AttentionInputs) -> tuple[torch.Tensor, ...]:
    """(out, grad_q, grad_k, grad_v) of SDPA on `sdpa_kernel` alone; BackendRefused if it declines."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel as restricted_to

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with restricted_to([torch_sdpa_backend(sdpa_kernel)]):
                out = F.scaled_dot_product_attention(
                    inputs.q, inputs.k, inputs.v, attn_mask=inputs.mask, is_causal=inputs.is_causal
                )
                grads = torch.autograd.grad(out, (inputs.q, inputs.k, inputs.v), inputs.upstream)
        except RuntimeError as exc:
            if not any(marker in str(exc) for marker in _REFUSAL_MARKERS):
                raise
            reasons = list(dict.fromkeys(str(w.message).strip() for w in caught))
            raise BackendRefused(" ".join(reasons) or str(exc).splitlines()[0]) from None
    return (out.detach(), *grads)


def _scores(inputs: AttentionInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled scores with the mask applied (-inf where masked), and |scores| before masking plus
    |mask|: the terms each score is made of."""
    scale = 1.0 / math.sqrt(inputs.q.shape[-1])
    scores = inputs.q @ inputs.k.transpose(-2, -1) * scale
    terms = inputs.q.abs() @ inputs.k.abs().transpose(-2, -1) * scale
    keep = torch.ones_like(scores, dtype=torch.bool)
    if inputs.is_causal:
        keep = keep & torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
    if inputs.mask is not None and inputs.mask.dtype == torch.bool:
        keep = keep & inputs.mask
    elif inputs.mask is not None:
        scores = scores + inputs.mask
        terms = terms + inputs.mask.abs()
    return scores.masked_fill(~keep, -math.inf), terms.masked_fill(~keep, 0.0)


def golden_attention(inputs: AttentionInputs) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Attention by its definition in float64 (softmax(q k^T / sqrt(d) + mask) v, with autograd
    for the gradients), never through scaled_dot_product_attention, and each output's magnitude:
    with w = p (1 + |s - max s| + |q||k|^T / sqrt(d)), the terms an element is made of, out ~ w |v|,
    grad_v ~ w^T |dO|, dS ~ w (|dO| |v|^T + rowsum(|dO| out~)), grad_q ~ dS~ |k| / sqrt(d),
    grad_k ~ dS~^T |q| / sqrt(d)."""
    high = upcast(inputs)
    scores, terms = _scores(high)
    probs = torch.softmax(scores, dim=-1)
    out = probs @ high.v
    grads = torch.autograd.grad(out, (high.q, high.k, high.v), high.upstream)
    with torch.no_grad():
        p = probs.detach()
        spread = (scores.detach() - scores.detach().amax(-1, keepdim=True)).abs()
        w = torch.where(p > 0, p * (1 + spread + terms), torch.zeros_like(p))
        d_out = high.upstream.abs()
        size_out = w @ high.v.detach().abs()
        size_scores = w * (d_out @ high.v.detach().abs().transpose(-2, -1) + (d_out * size_out).sum(-1, keepdim=True))
        scale = 1.0 / math.sqrt(high.q.shape[-1])
        sizes = (
            size_out,
            size_scores @ high.k.detach().abs() * scale,
            size_scores.transpose(-2, -1) @ high.q.detach().abs() * scale,
            w.transpose(-2, -1) @ d_out,
        )
    return (out.detach(), *grads), sizes


@dataclass(frozen=True)
class AttentionTruth:
    """What a case's check compares a candidate kernel with, the same for every kernel: the seeded
    inputs, the math kernel's result in the case's dtype and the float64 golden with its magnitudes."""

    inputs: AttentionInputs
    reference: tuple[torch.Tensor, ...]
    golden: tuple[torch.Tensor, ...]
    sizes: tuple[torch.Tensor, ...]


def attention_truth(case: AttentionCase, torch_device: torch.device, seed: int = 0) -> AttentionTruth:
    """Draw `case`'s inputs on `torch_device` and compute its reference and golden."""
    inputs = make_inputs(case, torch_device, seed)
    reference = run_sdpa("math", inputs)
    golden, sizes = golden_attention(inputs)
    return AttentionTruth(inputs, reference, golden, sizes)


class LatestTruth:
    """The truth of the case checked last, kept for the next kernel checked on the same case.

    The suite checks each case on every kernel in turn: drawing the inputs on the CPU (so every
    device sees the same numbers) and the float64 golden cost more than the kernel under test, and
    they are the same for each kernel. One case is kept: the next case's truth replaces it."""

    def __init__(self) -> None:
        self._key: tuple[AttentionCase, str, int] | None = None
        self._truth: AttentionTruth | None = None

    def get(self, case: AttentionCase, torch_device: torch.device, seed: int = 0) -> AttentionTruth:
        key = (case, str(torch_device), seed)
        if self._truth is None or self._key != key:
            self._key, self._truth = None, None  # release the old truth before drawing the new one
            self._truth = attention_truth(case, torch_device, seed)
            self._key = key
        return self._truth

    def clear(self) -> None:
        self._key, self._truth = None, None


def check_attention(
    case: AttentionCase,
    sdpa_kernel: str,
    device: DeviceInfo,
    torch_device: torch.device,
    seed: int = 0,
    truths: LatestTruth | None = None,
) -> list[Comparison]:
    """Compare `sdpa_kernel` with the float64 golden on `case`: output and the three gradients,
    each bounded by its row's error model and measured against the math kernel in the same dtype.
    `truths` keeps the inputs, reference and golden for the next kernel checked on the same case."""
    truth = (truths or LatestTruth()).get(case, torch_device, seed)
    candidate = run_sdpa(sdpa_kernel, truth.inputs)
    library = rocm_flash_library() if device.backend == "rocm" else ""
    return [
        compare(
            f"sdpa.{sdpa_kernel}.{part} [{case.describe()}]",
            candidate[i],
            truth.golden[i],
            tolerance_for(
                f"sdpa.{sdpa_kernel}.{part}", device.backend, device.arch, library, seq_k=case.seq_k, dtype=case.dtype
            ),
            truth.reference[i],
            magnitude=truth.sizes[i],
            terms=case.seq_k if part != "grad_k" and part != "grad_v" else case.seq_q,
        )
        for i, part in enumerate(PARTS)
    ]


def attention_skip_reason(sdpa_kernel: str, device: DeviceInfo) -> str | None:
    """Why SDPA kernel `sdpa_kernel` cannot be checked on `device`; None when it can."""
    if sdpa_kernel in device.attention_backends:
        return None
    return (
        f"needs the {sdpa_kernel} SDPA backend, found {', '.join(device.attention_backends)} on {device_label(device)}"
    )
