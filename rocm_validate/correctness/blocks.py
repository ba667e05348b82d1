"""The building blocks of BERT-L and Llama-3.1-8B, each on its own, forward and backward, against
float64 computed from the op's definition.

A layer or compiled check compares a fast path with an eager path that runs the same kernels, so a
bug in a kernel both use hides there. Here every block is judged alone against a golden written
with elementary float64 operations (mean, sqrt, erfc, exp, index_add), never by calling the op
under test, and bounded by its row's error model (`rocm_validate.correctness.error_model`): in
fp32 correct arithmetic stays within a few units of 6e-8, so an approximation or a 0.1% scale
stands out by orders of magnitude; in bf16 and fp16 the lean test sees a systematic change of a
fraction of an ulp over the millions of elements a check compares.

The candidate calls the op as models call it, looked up at call time (`torch.nn.functional.gelu`,
`torch.Tensor.sum`), in the test dtype, or under bf16 autocast where models run it so (the norms,
softmax, log_softmax and cross-entropy, which autocast computes in float32). Inputs are drawn in
float32 on the device, rounded to the dtype, and the golden sees exactly the rounded values.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.models import MODELS
from rocm_validate.workloads.shapes import block_dtypes

Tensors = dict[str, torch.Tensor]
BLOCK_MODELS = ("bert-large", "llama-3.1-8b")
IGNORE_INDEX = -100
LABEL_SMOOTHING = 0.1
DROPOUT_P = 0.1
UNARY_LIMIT = 20.0  # unary blocks see every representable bf16 / fp16 value in [-20, 20]


@dataclass(frozen=True)
class BlockShape:
    """Sizes of one model's blocks: rows of activations, and the model's widths."""

    model: str
    tokens: int  # rows of [tokens, hidden] activations
    hidden: int
    ffn: int
    vocab: int
    vocab_rows: int  # rows of [rows, vocab] logits
    seq: int  # length of an attention-score row
    norm_eps: float
    reduce_rows: int  # rows of a long reduction
    reduce_length: int  # its length
    unary_samples: int  # random draws added to a unary block's exhaustive inputs
    embedding_rows: int  # rows of the embedding table slice


def block_shape(model: str, is_gpu: bool) -> BlockShape:
    """The model's real widths; fewer rows on a CPU, so CI finishes in seconds."""
    spec = MODELS[model].full
    eps = 1e-12 if MODELS[model].family == "bert" else float(spec.get("rms_norm_eps", 1e-5))
    return BlockShape(
        model=model,
        tokens=2048 if is_gpu else 32,
        hidden=spec["hidden_size"],
        ffn=spec["intermediate_size"],
        vocab=spec["vocab_size"],
        vocab_rows=256 if is_gpu else 8,
        seq=MODELS[model].seq_len["full"],
        norm_eps=eps,
        reduce_rows=512 if is_gpu else 1024,
        reduce_length=2**18 if is_gpu else 2**14,
        unary_samples=2**20 if is_gpu else 2**17,
        embedding_rows=2048 if is_gpu else 512,
    )


@dataclass(frozen=True)
class Inputs:
    """One block's inputs: `low` in the test dtype (params in float32 under autocast), `golden`
    the same values in float64; `grad` names the inputs gradients are taken of."""

    low: Tensors
    golden: Tensors
    grad: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Block:
    """One building block: how to draw its inputs, run it as models do, and compute its golden.
    Declared by keyword in BLOCKS; its tolerance rows are `block.<name>.out` / `.grad` in
    tolerances.py, and `block_skip_reason` below says where it is not checked.

    draw(shape, dtype, generator, device) draws its `Inputs`; candidate(inputs, extra) runs the op under test on `Inputs.low`; golden(inputs, extra) the
    definition in float64; magnitude(inputs, golden_out, extra) the sum of the absolute values
    of the terms of each output element (None: the error model scales by max|golden|); terms the
    number of terms each output element accumulates, and `grad_terms` each gradient's;
    grad_magnitude(inputs, upstream, extra) the same for the gradients ({'grad_x': ...}).
    """

    name: str
    draw: Callable[[BlockShape, str, torch.Generator, Any], Inputs]
    candidate: Callable[[Tensors, dict[str, Any]], torch.Tensor]
    golden: Callable[[Tensors, dict[str, Any]], torch.Tensor]
    magnitude: Callable[[Tensors, torch.Tensor, dict[str, Any]], torch.Tensor | None]
    terms: Callable[[BlockShape], int]
    grad_terms: Callable[[BlockShape], int]
    models: tuple[str, ...] = BLOCK_MODELS  # the model shapes it runs at
    grad_magnitude: Callable[[Tensors, torch.Tensor, dict[str, Any]], Tensors] | None = None
    autocast: bool = False  # autocast computes it in float32 from bf16 inputs (models run it so)
    autocast_precision: str = "float32"  # the precision autocast's output is computed in
    low_precision: bool = True  # False: models never run it in bf16 / fp16 (they upcast), so neither do we
    cpu_low_precision_grads: bool = True  # False: the CPU kernel's bf16 / fp16 backward is not validated

    def dtypes(self, is_gpu: bool) -> tuple[str, ...]:
        """The precisions it is checked in: fp32, bf16 and fp16, and 'autocast' where models run it
        so, on a GPU; fp32 and bf16 on the CPU (whose bf16 kernels are checked for leans, and whose
        autocast policy is not the GPUs')."""
        dtypes = block_dtypes("cuda" if is_gpu else "cpu") if self.low_precision else ("float32",)
        return (*dtypes, "autocast") if self.autocast and is_gpu else dtypes


# --- drawing inputs ------------------------------------------------------------------------------


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _as_inputs(
    values: Tensors, dtype: str, grad: tuple[str, ...], params: tuple[str, ...] = (), **extra: Any
) -> Inputs:
    """Round every float tensor to `dtype` (params to float32 when `dtype` is 'autocast'), and the
    golden to float64 from the rounded values."""
    low: Tensors = {}
    for name, value in values.items():
        if not value.is_floating_point():
            low[name] = value
        elif dtype == "autocast":
            low[name] = value.float() if name in params else value.to(torch.bfloat16)
        else:
            low[name] = value.to(_dtype(dtype))
    golden = {name: (v.double() if v.is_floating_point() else v) for name, v in low.items()}
    return Inputs(low, golden, grad, dict(extra))


def _normal(g: torch.Generator, device: torch.device | str, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)


def _norm_rows(shape: BlockShape, g: torch.Generator, device: torch.device | str) -> torch.Tensor:
    """[tokens, hidden] activations in four kinds of rows: standard normal; x4; a mean ten times
    the spread (|mean| / std = 100, where a one-pass variance cancels); and a spread of 1e-3
    (where eps matters)."""
    x = _normal(g, device, shape.tokens, shape.hidden)
    kind = torch.arange(shape.tokens, device=device) % 4
    x = torch.where((kind == 1)[:, None], 4 * x, x)
    x = torch.where((kind == 2)[:, None], 10 + 0.1 * x, x)
    return torch.where((kind == 3)[:, None], 1e-3 * x, x)


def _draw_norm(
    shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str, *, with_bias: bool
) -> Inputs:
    values = {
        "x": _norm_rows(shape, g, device),
        "weight": 1 + 0.1 * _normal(g, device, shape.hidden),
    }
    if with_bias:
        values["bias"] = 0.1 * _normal(g, device, shape.hidden)
    params = ("weight", "bias")
    return _as_inputs(values, dtype, ("x", *(p for p in params if p in values)), params, eps=shape.norm_eps)


def _draw_add_norm(
    shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str, *, with_bias: bool
) -> Inputs:
    drawn = _draw_norm(shape, dtype, g, device, with_bias=with_bias)
    residual = _as_inputs({"residual": _normal(g, device, shape.tokens, shape.hidden)}, dtype, ())
    low = {**drawn.low, **residual.low}
    golden = {**drawn.golden, **residual.golden}
    return Inputs(low, golden, ("residual", *drawn.grad), drawn.extra)


def every_value(dtype: str, limit: float) -> torch.Tensor:
    """Every finite value of a 16-bit float dtype in [-limit, limit], as float32."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    values = bits.view(_dtype(dtype)).float()
    return values[torch.isfinite(values) & (values.abs() <= limit)]


def _draw_unary(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """Every representable input in [-20, 20] for bf16 / fp16 (a dense grid for fp32), plus
    standard normal draws for the lean test's statistics: where x is large, GELU(x) and SiLU(x)
    sit on x's own grid point, so a small scale rounds away there and only the curved middle
    shows it."""
    if dtype in ("bfloat16", "float16"):
        grid = every_value(dtype, UNARY_LIMIT).to(device)
    else:
        grid = torch.linspace(-UNARY_LIMIT, UNARY_LIMIT, shape.unary_samples // 4 + 1, device=device)
    x = torch.cat([grid, _normal(g, device, shape.unary_samples)])
    return _as_inputs({"x": x}, dtype, ("x",))


def _draw_swiglu(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    rows = max(shape.tokens // 4, 16)
    values = {"gate": 2 * _normal(g, device, rows, shape.ffn), "up": _normal(g, device, rows, shape.ffn)}
    return _as_inputs(values, dtype, ("gate", "up"))


def _draw_scores(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """Attention-score rows of the model's sequence length: half spread x2, half peaked (x8).
    At least 64 rows: a peaked row's lean rests on its few large probabilities."""
    rows = max(shape.tokens // 4, 64)
    x = _normal(g, device, rows, shape.seq)
    x = torch.where((torch.arange(rows, device=device) % 2 == 0)[:, None], 2 * x, 8 * x)
    return _as_inputs({"x": x}, dtype, ("x",))


def _draw_logits(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """[rows, vocab] logits (x2), targets with one in eight ignored (ignore_index)."""
    x = 2 * _normal(g, device, shape.vocab_rows, shape.vocab)
    target = torch.randint(0, shape.vocab, (shape.vocab_rows,), generator=g, device=device)
    target[::8] = IGNORE_INDEX
    return _as_inputs({"x": x, "target": target}, dtype, ("x",))


def _draw_embedding(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """A slice of the embedding table (2048 rows, 512 on a CPU) and 4 x tokens indices drawn as
    u^3 (the first rows repeat hundreds of times, as frequent words do); BERT's padding row 0
    gets no gradient."""
    rows = shape.embedding_rows
    u = torch.rand(4 * shape.tokens, generator=g, device=device)
    index = (rows * u**3).long().clamp(max=rows - 1)
    values = {"weight": _normal(g, device, rows, shape.hidden), "index": index}
    padding = 0 if MODELS[shape.model].family == "bert" else None
    return _as_inputs(values, dtype, ("weight",), padding_idx=padding)


def _draw_dropout(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """Activations with no zeros, so every zero of the output is a dropped element."""
    x = _normal(g, device, shape.tokens, shape.hidden)
    x = torch.where(x.abs() < 1e-3, torch.ones_like(x), x)
    return _as_inputs({"x": x}, dtype, ("x",), p=DROPOUT_P)


def _row_scales(shape: BlockShape, g: torch.Generator, device: torch.device | str) -> torch.Tensor:
    """A factor per row from 1/4 to 1, continuous: the rows' results spread over the mantissa, so
    that rounding them to bf16 is not the same rounding every row, while no few rows outweigh
    the rest in the lean's estimate."""
    return 2.0 ** (-2 * torch.rand(shape.reduce_rows, 1, generator=g, device=device))


def _draw_reduction(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """Long rows of uniform [0, 1/32) values, each row scaled (their sums fit fp16): a positive
    mean makes the accumulated error grow (zero-mean data hides it, Higham and Mary 2020)."""
    x = torch.rand(shape.reduce_rows, shape.reduce_length, generator=g, device=device) / 32
    return _as_inputs({"x": x * _row_scales(shape, g, device)}, dtype, ("x",))


def _draw_variance(shape: BlockShape, dtype: str, g: torch.Generator, device: torch.device | str) -> Inputs:
    """Long rows with |mean| / std = 4, where a one-pass variance cancels, each row scaled."""
    x = 4 + _normal(g, device, shape.reduce_rows, shape.reduce_length)
    return _as_inputs({"x": x * _row_scales(shape, g, device)}, dtype, ("x",))


# --- goldens: the definitions in float64 ---------------------------------------------------------


def _layer_norm_golden(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    rstd = 1 / torch.sqrt((centred * centred).mean(-1, keepdim=True) + eps)
    out = centred * rstd * weight
    return out if bias is None else out + bias


def _rms_norm_golden(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def _rms_norm_block_golden(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    """The RMSNorm blocks' (torch's and Llama's) float64 definition."""
    return _rms_norm_golden(inputs["x"], inputs["weight"], extra["eps"])


def _rms_norm_block_magnitude(inputs: Tensors, out: torch.Tensor, extra: dict[str, Any]) -> torch.Tensor:
    """The RMSNorm blocks' error magnitude: no bias, no centring."""
    return _norm_magnitude(inputs["x"], inputs["weight"], None, extra["eps"], centred=False)


def _norm_magnitude(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    eps: float,
    centred: bool,
    size: torch.Tensor | None = None,
) -> torch.Tensor:
    """(|x| + |mean|) rstd |w| + |b|: the terms of a normalized element, before cancellation
    (`size` replaces |x| where x is itself a sum, |x| + |residual|)."""
    mean = x.mean(-1, keepdim=True) if centred else torch.zeros_like(x[..., :1])
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
    terms = (x.abs() if size is None else size) + mean.abs()
    out = terms * rstd * weight.abs()
    return out if bias is None else out + bias.abs()


def _norm_grad_magnitude(t: Tensors, upstream: torch.Tensor, e: dict[str, Any], centred: bool) -> Tensors:
    """The terms of a LayerNorm's (centred) or RMSNorm's gradients, before cancellation: with
    a = (|x| + |mean|) rstd (the normalized input's terms) and d = |w dy|, grad_x ~ rstd (d +
    mean d + a mean(d a)), grad_w ~ sum over rows of |dy| a, grad_b ~ sum of |dy|. A residual
    input gets grad_x's."""
    x = t["x"] + t["residual"] if "residual" in t else t["x"]
    size = t["x"].abs() + t["residual"].abs() if "residual" in t else x.abs()
    mean = x.mean(-1, keepdim=True) if centred else torch.zeros_like(x[..., :1])
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + e["eps"])
    a = (size + mean.abs()) * rstd
    d = (t["weight"] * upstream).abs()
    grad_x = rstd * (d + d.mean(-1, keepdim=True) + a * (d * a).mean(-1, keepdim=True))
    found = {"grad_x": grad_x, "grad_weight": (upstream.abs() * a).sum(0), "grad_bias": upstream.abs().sum(0)}
    if "residual" in t:
        found["grad_residual"] = grad_x
    return found


def _unary_grad_magnitude(t: Tensors, upstream: torch.Tensor) -> Tensors:
    """|dy| (1 + |x|): a GELU's or SiLU's derivative is a CDF plus x times a density."""
    return {"grad_x": upstream.abs() * (1 + t["x"].abs())}


def _softmax_grad_magnitude(t: Tensors, upstream: torch.Tensor, log: bool) -> Tensors:
    """softmax: p (|dy| + sum p |dy|); log_softmax: |dy| + p (1 + |log p|) sum |dy| (its backward
    takes exp of the saved, rounded log p: a relative error of |log p| u)."""
    p = _softmax_golden(t["x"])
    if log:
        return {"grad_x": upstream.abs() + p * (1 + p.log().abs()) * upstream.abs().sum(-1, keepdim=True)}
    return {"grad_x": p * (upstream.abs() + (p * upstream.abs()).sum(-1, keepdim=True))}


def _smoothed_target(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(1 - e) one-hot + e / V per row; zero rows where the target is ignored."""
    keep = (target != IGNORE_INDEX)[:, None]
    onehot = torch.zeros_like(x).scatter_(-1, target.clamp(min=0)[:, None], 1.0)
    return torch.where(keep, (1 - LABEL_SMOOTHING) * onehot + LABEL_SMOOTHING / x.shape[-1], torch.zeros_like(x))


def _cross_entropy_grad_magnitude(t: Tensors, upstream: torch.Tensor, mean: bool) -> Tensors:
    """|dy| (p + q) per row (q the smoothed target), over the kept count for the mean."""
    keep = (t["target"] != IGNORE_INDEX)[:, None]
    terms = torch.where(keep, _softmax_golden(t["x"]), torch.zeros_like(t["x"])) + _smoothed_target(t["x"], t["target"])
    if mean:
        return {"grad_x": upstream.abs() * terms / keep.sum()}
    return {"grad_x": upstream.abs()[:, None] * terms}


def _swiglu_grad_magnitude(t: Tensors, upstream: torch.Tensor) -> Tensors:
    return {
        "grad_gate": upstream.abs() * t["up"].abs() * (1 + t["gate"].abs()),
        "grad_up": upstream.abs() * t["gate"].abs(),
    }


def _embedding_grad_magnitude(t: Tensors, upstream: torch.Tensor, e: dict[str, Any]) -> Tensors:
    """The index_add of |dy|: the terms each gradient row sums."""
    index = t["index"]
    if e["padding_idx"] is not None:
        upstream = torch.where((index == e["padding_idx"])[:, None], 0.0, upstream)
    return {"grad_weight": torch.zeros_like(t["weight"]).index_add_(0, index, upstream.abs())}


def _gelu_golden(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * torch.special.erfc(-x / math.sqrt(2.0))


def _gelu_tanh_golden(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _silu_golden(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + torch.exp(-x))


def _softmax_golden(x: torch.Tensor) -> torch.Tensor:
    shifted = torch.exp(x - x.max(-1, keepdim=True).values)
    return shifted / shifted.sum(-1, keepdim=True)


def _log_softmax_golden(x: torch.Tensor) -> torch.Tensor:
    top = x.max(-1, keepdim=True).values
    return x - top - torch.log(torch.exp(x - top).sum(-1, keepdim=True))


def _token_losses(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy per row with label smoothing, 0 where the target is ignored (PyTorch's
    definition: (1 - e) nll + e (lse - mean x))."""
    logp = _log_softmax_golden(x)
    keep = target != IGNORE_INDEX
    picked = logp.gather(-1, torch.where(keep, target, 0)[:, None])[:, 0]
    loss = -(1 - LABEL_SMOOTHING) * picked - LABEL_SMOOTHING * logp.mean(-1)
    return torch.where(keep, loss, torch.zeros_like(loss))


def _logit_magnitude(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    top = x.max(-1).values
    lse = torch.log(torch.exp(x - top[:, None]).sum(-1))
    picked = x.gather(-1, target.clamp(min=0)[:, None])[:, 0]
    return top.abs() + lse.abs() + picked.abs() + x.abs().mean(-1)


def _embedding_golden(weight: torch.Tensor, index: torch.Tensor, padding_idx: int | None) -> torch.Tensor:
    """Rows gathered; as a function of the weight, so its gradient is the index_add of the
    upstream rows (the padding row's forced to zero by masking the gathered rows)."""
    out = weight[index]
    if padding_idx is None:
        return out
    return torch.where((index == padding_idx)[:, None], out.detach(), out)


# --- the candidates: the ops as models call them, looked up at call time --------------------------


def _F() -> Any:
    return torch.nn.functional


@contextlib.contextmanager
def _maybe_autocast(enabled: bool, device: torch.device | str) -> Iterator[None]:
    if not enabled:
        yield
        return
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        yield


def _llama_rms_norm(t: Tensors, e: dict[str, Any]) -> torch.Tensor:
    """transformers' LlamaRMSNorm module, as the model runs it, with the drawn weight."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    module = LlamaRMSNorm(t["x"].shape[-1], eps=e["eps"]).to(device=t["x"].device, dtype=t["weight"].dtype)
    return torch.func.functional_call(module, {"weight": t["weight"]}, (t["x"],))


def _residual_layer_norm(t: Tensors, e: dict[str, Any]) -> torch.Tensor:
    return _F().layer_norm(t["x"] + t["residual"], t["x"].shape[-1:], t["weight"], t["bias"], e["eps"])


def _residual_rms_norm(t: Tensors, e: dict[str, Any]) -> torch.Tensor:
    return _F().rms_norm(t["x"] + t["residual"], t["x"].shape[-1:], t["weight"], e["eps"])


def _unary_block(
    name: str,
    candidate: Callable[[Tensors, dict[str, Any]], torch.Tensor],
    golden: Callable[[Tensors, dict[str, Any]], torch.Tensor],
) -> Block:
    """An elementwise activation of x: every representable input, magnitude |x| (the cancellation
    of its float32 arithmetic scales with x), no accumulation, shape-free."""
    return Block(
        name=name,
        draw=_draw_unary,
        candidate=candidate,
        golden=golden,
        magnitude=lambda inputs, out, extra: inputs["x"].abs(),
        terms=_one_term,
        grad_terms=_one_term,
        models=(),
        grad_magnitude=lambda inputs, upstream, extra: _unary_grad_magnitude(inputs, upstream),
    )


def _one_term(shape: BlockShape) -> int:
    """An elementwise op: each element is one term, nothing accumulates."""
    return 1


def _row_length(shape: BlockShape) -> int:
    """A norm's output element sums over the row (the hidden size)."""
    return shape.hidden


def _token_count(shape: BlockShape) -> int:
    """A norm's weight gradient sums over the tokens."""
    return shape.tokens


def _sequence_length(shape: BlockShape) -> int:
    """A softmax sums over the scores of one query: the sequence."""
    return shape.seq


def _vocabulary(shape: BlockShape) -> int:
    """A cross-entropy sums over the logits of one row: the vocabulary."""
    return shape.vocab


def _reduced_length(shape: BlockShape) -> int:
    return shape.reduce_length


def _layer_norm(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    x = inputs["x"]
    return _F().layer_norm(x, x.shape[-1:], inputs["weight"], inputs["bias"], extra["eps"])


def _rms_norm(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    return _F().rms_norm(inputs["x"], inputs["x"].shape[-1:], inputs["weight"], extra["eps"])


def _residual_norm_magnitude(inputs: Tensors, extra: dict[str, Any], centred: bool) -> torch.Tensor:
    """A norm of x + residual: the sum's terms are |x| + |residual|."""
    x, residual = inputs["x"], inputs["residual"]
    return _norm_magnitude(
        x + residual, inputs["weight"], inputs.get("bias"), extra["eps"], centred, x.abs() + residual.abs()
    )


def _softmax_magnitude(inputs: Tensors, out: torch.Tensor, extra: dict[str, Any]) -> torch.Tensor:
    """p (1 + |x - max x|): exp of the shifted score, rounded relative to its size."""
    x = inputs["x"]
    return out * (1 + (x - x.max(-1, keepdim=True).values).abs())


def _log_softmax_magnitude(inputs: Tensors, out: torch.Tensor, extra: dict[str, Any]) -> torch.Tensor:
    """|x| + max |x| + |log p| + 1: the score, the log-sum-exp and the result."""
    x = inputs["x"]
    return x.abs() + x.abs().max(-1, keepdim=True).values + out.abs() + 1


def _cross_entropy(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    return _F().cross_entropy(
        inputs["x"], inputs["target"], ignore_index=IGNORE_INDEX, label_smoothing=LABEL_SMOOTHING, reduction="none"
    )


def _cross_entropy_mean(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    loss = _F().cross_entropy(inputs["x"], inputs["target"], ignore_index=IGNORE_INDEX, label_smoothing=LABEL_SMOOTHING)
    return loss.reshape(1)


def _cross_entropy_mean_golden(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    kept = (inputs["target"] != IGNORE_INDEX).sum()
    return (_token_losses(inputs["x"], inputs["target"]).sum() / kept).reshape(1)


def _variance_golden(inputs: Tensors, extra: dict[str, Any]) -> torch.Tensor:
    """The two-pass sample variance: sum (x - mean)^2 / (n - 1)."""
    x = inputs["x"]
    return ((x - x.mean(-1, keepdim=True)) ** 2).sum(-1) / (x.shape[-1] - 1)


def _variance_magnitude(inputs: Tensors, out: torch.Tensor, extra: dict[str, Any]) -> torch.Tensor:
    """var + |mean| std: the cancellation of a one-pass variance scales with the mean."""
    return out + (inputs["x"].mean(-1).abs() * out.sqrt())


BLOCKS: dict[str, Block] = {
    block.name: block
    for block in (
        Block(
            name="layer_norm",
            draw=partial(_draw_norm, with_bias=True),
            candidate=_layer_norm,
            golden=lambda inputs, extra: _layer_norm_golden(
                inputs["x"], inputs["weight"], inputs["bias"], extra["eps"]
            ),
            magnitude=lambda inputs, out, extra: _norm_magnitude(
                inputs["x"], inputs["weight"], inputs["bias"], extra["eps"], centred=True
            ),
            terms=_row_length,
            grad_terms=_token_count,
            grad_magnitude=partial(_norm_grad_magnitude, centred=True),
            autocast=True,
            models=("bert-large",),
        ),
        Block(
            name="rms_norm",
            draw=partial(_draw_norm, with_bias=False),
            candidate=_rms_norm,
            golden=_rms_norm_block_golden,
            magnitude=_rms_norm_block_magnitude,
            terms=_row_length,
            grad_terms=_token_count,
            grad_magnitude=partial(_norm_grad_magnitude, centred=False),
            autocast=True,
            models=("llama-3.1-8b",),
            autocast_precision="bfloat16",  # torch 2.11 leaves its input bf16 under autocast
        ),
        Block(
            name="llama_rms_norm",
            draw=partial(_draw_norm, with_bias=False),
            candidate=_llama_rms_norm,
            golden=_rms_norm_block_golden,
            magnitude=_rms_norm_block_magnitude,
            terms=_row_length,
            grad_terms=_token_count,
            grad_magnitude=partial(_norm_grad_magnitude, centred=False),
            models=("llama-3.1-8b",),
        ),
        Block(
            name="residual_layer_norm",
            draw=partial(_draw_add_norm, with_bias=True),
            candidate=_residual_layer_norm,
            golden=lambda inputs, extra: _layer_norm_golden(
                inputs["x"] + inputs["residual"], inputs["weight"], inputs["bias"], extra["eps"]
            ),
            magnitude=lambda inputs, out, extra: _residual_norm_magnitude(inputs, extra, centred=True),
            terms=_row_length,
            grad_terms=_token_count,
            grad_magnitude=partial(_norm_grad_magnitude, centred=True),
            models=("bert-large",),
        ),
        Block(
            name="residual_rms_norm",
            draw=partial(_draw_add_norm, with_bias=False),
            candidate=_residual_rms_norm,
            golden=lambda inputs, extra: _rms_norm_golden(
                inputs["x"] + inputs["residual"], inputs["weight"], extra["eps"]
            ),
            magnitude=lambda inputs, out, extra: _residual_norm_magnitude(inputs, extra, centred=False),
            terms=_row_length,
            grad_terms=_token_count,
            grad_magnitude=partial(_norm_grad_magnitude, centred=False),
            models=("llama-3.1-8b",),
        ),
        _unary_block(
            "gelu",
            candidate=lambda inputs, extra: _F().gelu(inputs["x"]),
            golden=lambda inputs, extra: _gelu_golden(inputs["x"]),
        ),
        _unary_block(
            "gelu_tanh",
            candidate=lambda inputs, extra: _F().gelu(inputs["x"], approximate="tanh"),
            golden=lambda inputs, extra: _gelu_tanh_golden(inputs["x"]),
        ),
        _unary_block(
            "silu",
            candidate=lambda inputs, extra: _F().silu(inputs["x"]),
            golden=lambda inputs, extra: _silu_golden(inputs["x"]),
        ),
        Block(
            name="swiglu",
            draw=_draw_swiglu,
            candidate=lambda inputs, extra: _F().silu(inputs["gate"]) * inputs["up"],
            golden=lambda inputs, extra: _silu_golden(inputs["gate"]) * inputs["up"],
            magnitude=lambda inputs, out, extra: inputs["gate"].abs() * inputs["up"].abs(),
            terms=_one_term,
            grad_terms=_one_term,
            models=("llama-3.1-8b",),
            grad_magnitude=lambda inputs, upstream, extra: _swiglu_grad_magnitude(inputs, upstream),
        ),
        Block(
            name="softmax",
            draw=_draw_scores,
            candidate=lambda inputs, extra: _F().softmax(inputs["x"], dim=-1),
            golden=lambda inputs, extra: _softmax_golden(inputs["x"]),
            magnitude=_softmax_magnitude,
            terms=_sequence_length,
            grad_terms=_sequence_length,
            autocast=True,
            grad_magnitude=lambda inputs, upstream, extra: _softmax_grad_magnitude(inputs, upstream, log=False),
        ),
        Block(
            name="log_softmax",
            draw=_draw_scores,
            candidate=lambda inputs, extra: _F().log_softmax(inputs["x"], dim=-1),
            golden=lambda inputs, extra: _log_softmax_golden(inputs["x"]),
            magnitude=_log_softmax_magnitude,
            terms=_sequence_length,
            grad_terms=_sequence_length,
            autocast=True,
            grad_magnitude=lambda inputs, upstream, extra: _softmax_grad_magnitude(inputs, upstream, log=True),
        ),
        Block(
            name="cross_entropy",
            draw=_draw_logits,
            candidate=_cross_entropy,
            golden=lambda inputs, extra: _token_losses(inputs["x"], inputs["target"]),
            magnitude=lambda inputs, out, extra: _logit_magnitude(inputs["x"], inputs["target"]),
            terms=_vocabulary,
            grad_terms=_vocabulary,
            autocast=True,
            grad_magnitude=lambda inputs, upstream, extra: _cross_entropy_grad_magnitude(inputs, upstream, mean=False),
            low_precision=False,
            autocast_precision="bfloat16",
        ),
        Block(
            name="cross_entropy_mean",
            draw=_draw_logits,
            candidate=_cross_entropy_mean,
            golden=_cross_entropy_mean_golden,
            magnitude=lambda inputs, out, extra: _logit_magnitude(inputs["x"], inputs["target"]).mean().reshape(1),
            terms=lambda shape: shape.vocab * shape.vocab_rows,  # the mean sums every logit of every row
            grad_terms=_vocabulary,
            autocast=True,
            grad_magnitude=lambda inputs, upstream, extra: _cross_entropy_grad_magnitude(inputs, upstream, mean=True),
            low_precision=False,
        ),
        Block(
            name="embedding",
            draw=_draw_embedding,
            candidate=lambda inputs, extra: _F().embedding(
                inputs["index"], inputs["weight"], padding_idx=extra["padding_idx"]
            ),
            golden=lambda inputs, extra: _embedding_golden(inputs["weight"], inputs["index"], extra["padding_idx"]),
            magnitude=lambda inputs, out, extra: None,  # a lookup: exact, nothing to scale
            terms=_one_term,
            grad_terms=lambda shape: 4 * shape.tokens,  # a row's gradient sums its repeats among 4 x tokens indices
            cpu_low_precision_grads=False,
            grad_magnitude=_embedding_grad_magnitude,
        ),
        Block(
            name="sum",
            draw=_draw_reduction,
            candidate=lambda inputs, extra: inputs["x"].sum(-1),
            golden=lambda inputs, extra: inputs["x"].sum(-1),
            magnitude=lambda inputs, out, extra: inputs["x"].abs().sum(-1),
            terms=_reduced_length,
            grad_terms=_one_term,
            models=(),
        ),
        Block(
            name="mean",
            draw=_draw_reduction,
            candidate=lambda inputs, extra: inputs["x"].mean(-1),
            golden=lambda inputs, extra: inputs["x"].sum(-1) / inputs["x"].shape[-1],
            magnitude=lambda inputs, out, extra: inputs["x"].abs().mean(-1),
            terms=_reduced_length,
            grad_terms=_one_term,
            models=(),
        ),
        Block(
            name="var",
            draw=_draw_variance,
            candidate=lambda inputs, extra: inputs["x"].var(-1),
            golden=_variance_golden,
            magnitude=_variance_magnitude,
            terms=_reduced_length,
            grad_terms=_reduced_length,
            models=(),
        ),
    )
}
# The blocks compared on the forward value alone: a reduction's gradient is a broadcast.
FORWARD_ONLY = ("sum", "mean", "var")


# --- the check ----------------------------------------------------------------------------------


def block_ids(block: Block, is_gpu: bool) -> list[tuple[str, str | None, str]]:
    """(block, model or None for shape-free blocks, dtype) of every case of a block on a device."""
    return [(block.name, model, dtype) for model in (block.models or (None,)) for dtype in block.dtypes(is_gpu)]


def _leaves(tensors: Tensors, names: tuple[str, ...]) -> Tensors:
    return {k: (v.detach().requires_grad_(True) if k in names else v) for k, v in tensors.items()}


def _describe(shape: BlockShape, model: str | None, dtype: str) -> str:
    where = "any shape" if model is None else model
    return f"{where}, {'bf16 autocast' if dtype == 'autocast' else dtype}"


def run_block(
    block: Block, shape: BlockShape, dtype: str, torch_device: torch.device, seed: int = 0
) -> tuple[Tensors, Tensors, Tensors, Inputs]:
    """The candidate's and the golden's output and gradients ({'out', 'grad_<input>'}), the
    golden inputs' magnitudes, and the inputs, for one case."""
    g = torch.Generator(device=torch_device).manual_seed(seed)
    inputs = block.draw(shape, dtype, g, torch_device)
    low = _leaves(inputs.low, inputs.grad)
    with _maybe_autocast(dtype == "autocast", torch_device):
        out = block.candidate(low, inputs.extra)
    high = _leaves(inputs.golden, inputs.grad)
    gold = block.golden(high, inputs.extra)
    upstream = torch.randn(out.shape, generator=g, device=torch_device, dtype=torch.float32).to(out.dtype)
    found: Tensors = {"out": out.detach()}
    expected: Tensors = {"out": gold.detach()}
    if block.name not in FORWARD_ONLY:
        grads = torch.autograd.grad(out, [low[n] for n in inputs.grad], upstream)
        golden_grads = torch.autograd.grad(gold, [high[n] for n in inputs.grad], upstream.double())
        found.update({f"grad_{n}": t for n, t in zip(inputs.grad, grads)})
        expected.update({f"grad_{n}": t for n, t in zip(inputs.grad, golden_grads)})
    magnitude = block.magnitude(inputs.golden, gold.detach(), inputs.extra)
    sizes = {} if magnitude is None else {"out": magnitude}
    if block.grad_magnitude is not None and block.name not in FORWARD_ONLY:
        sizes.update(block.grad_magnitude(inputs.golden, upstream.double(), inputs.extra))
    return found, expected, sizes, inputs


def check_block(
    name: str, model: str | None, dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0
) -> list[Comparison]:
    """One building block in `dtype` ('autocast': bf16 inputs under bf16 autocast) against its
    float64 definition: the output and the gradient of every input, each bounded by the block's
    rows of the tolerance table (`block.<name>.out`, `block.<name>.grad`)."""
    block = BLOCKS[name]
    shape = block_shape(model or BLOCK_MODELS[0], device.is_gpu)
    found, expected, sizes, _ = run_block(block, shape, dtype, torch_device, seed)
    label = _describe(shape, model, dtype)
    results = []
    for part, gold in expected.items():
        kind = "out" if part == "out" else "grad"
        tolerance = tolerance_for(f"block.{name}.{kind}", device.backend, device.arch)
        terms = block.terms(shape) if kind == "out" else block.grad_terms(shape)
        check = f"block.{name}.{part} [{label}, {tuple(gold.shape)}]"
        precision = block.autocast_precision if dtype == "autocast" and part == "out" else None
        results.append(
            compare(check, found[part], gold, tolerance, magnitude=sizes.get(part), terms=terms, precision=precision)
        )
    return results


def check_dropout(dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0) -> list[Comparison]:
    """F.dropout in training, p = 0.1, at BERT-L's width: the kept fraction within KEEP_RATE_SIGMAS
    binomial standard deviations of 1 - p, kept values x / (1 - p) rounded once, and the gradient
    the upstream through the same mask, scaled the same way."""
    shape = block_shape(BLOCK_MODELS[0], device.is_gpu)
    g = torch.Generator(device=torch_device).manual_seed(seed)
    inputs = _draw_dropout(shape, dtype, g, torch_device)
    p = inputs.extra["p"]
    x = inputs.low["x"].detach().requires_grad_(True)
    out = _F().dropout(x, p, training=True)
    upstream = torch.randn(out.shape, generator=g, device=torch_device, dtype=torch.float32).to(out.dtype)
    (grad,) = torch.autograd.grad(out, [x], upstream)
    kept = (out != 0).double()
    total = kept.numel()
    z = (float(kept.sum()) - total * (1 - p)) / math.sqrt(total * p * (1 - p))
    label = f"{_describe(shape, BLOCK_MODELS[0], dtype)}, p={p:g}, {tuple(out.shape)}"
    golden = inputs.golden["x"] * kept / (1 - p)
    return [
        compare(
            f"block.dropout.keep_rate [{label}: kept {float(kept.mean()):.5f} of {1 - p:g}, in standard deviations]",
            torch.tensor([z], dtype=torch.float64),
            torch.zeros(1, dtype=torch.float64),
            tolerance_for("block.dropout.keep_rate", device.backend, device.arch),
        ),
        compare(
            f"block.dropout.out [{label}]",
            out.detach(),
            golden,
            tolerance_for("block.dropout.out", device.backend, device.arch),
        ),
        compare(
            f"block.dropout.grad_x [{label}, the forward's mask]",
            grad,
            upstream.double() * kept / (1 - p),
            tolerance_for("block.dropout.grad", device.backend, device.arch),
        ),
    ]


def block_skip_reason(block: str, dtype: str, device: DeviceInfo, cpu_low_precision_grads: bool) -> str | None:
    """Why a building block is not checked in `dtype` here: PyTorch's CPU embedding backward adds
    repeated indices' gradients in the dtype itself (1000 rows of 0.01 sum to 4.0 in bf16), a
    platform limit of the CPU kernel, not a fault of this node."""
    if device.is_gpu or dtype not in ("bfloat16", "float16") or cpu_low_precision_grads:
        return None
    return (
        f"needs a {block} backward that accumulates {dtype} gradients in float32, found the CPU kernel "
        f"accumulating in {dtype} ({device.name}); {dtype} training on the CPU is not validated"
    )
