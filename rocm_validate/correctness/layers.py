"""Layer-level checks: compiled (Inductor / Triton) layers and models, and a BERT-L encoder layer
under bf16 autocast, forward and backward against a float64 golden.

Each role runs its own copy of one seeded module: the golden in float64 with math attention,
the reference as plain eager code in the test precision, the candidate through the fast path
(torch.compile, or autocast with fused attention). Outputs and the gradients of the input and
of every parameter are compared; "<name>.out" entries use the check's `.out` tolerance, the
rest its `.grad` tolerance.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.models import MODELS, build_model

Call = Callable[[torch.nn.Module, torch.Tensor], Any]


def eager(module: torch.nn.Module, x: torch.Tensor) -> Any:
    return module(x)


@contextlib.contextmanager
def math_sdpa() -> Iterator[None]:
    """scaled_dot_product_attention restricted to the unfused math backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        yield


def math_attention(call: Call) -> Call:
    def run(module: torch.nn.Module, x: torch.Tensor) -> Any:
        with math_sdpa():
            return call(module, x)

    return run


def autocast(call: Call, dtype: torch.dtype = torch.bfloat16) -> Call:
    def run(module: torch.nn.Module, x: torch.Tensor) -> Any:
        with torch.autocast(device_type=x.device.type, dtype=dtype):
            return call(module, x)

    return run


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def layer_results(
    module: torch.nn.Module, x: torch.Tensor, upstreams: tuple[torch.Tensor, ...], names: tuple[str, ...], call: Call
) -> dict[str, torch.Tensor]:
    """Each output of `call(module, x)` and, per output, the gradients of x and of every
    parameter for its upstream gradient: {'ln.out', 'ln.grad_input', 'ln.grad_weight', ...}."""
    x = x.detach().requires_grad_(True)
    outputs = _as_tuple(call(module, x))[: len(names)]
    params = dict(module.named_parameters())
    found: dict[str, torch.Tensor] = {}
    for name, out, upstream in zip(names, outputs, upstreams):
        grads = torch.autograd.grad(
            out, [x, *params.values()], upstream.to(out.dtype), retain_graph=True, allow_unused=True
        )
        found[f"{name}.out"] = out.detach()
        found[f"{name}.grad_input"] = grads[0]
        found.update({f"{name}.grad_{p}": g for p, g in zip(params, grads[1:]) if g is not None})
    return found


def compare_results(
    key: str,
    label: str,
    candidate: dict[str, torch.Tensor],
    reference: dict[str, torch.Tensor],
    golden: dict[str, torch.Tensor],
    device: DeviceInfo,
) -> list[Comparison]:
    """One comparison per golden entry; a candidate missing an entry fails with a shape of ().

    A composite's error is bounded in norm against the scale of its gradients: each gradient's
    error norm against max(its own norm, the RMS of every gradient of the check over its size),
    so a gradient that is zero in exact arithmetic (a key projection's bias, which softmax cannot
    see) is judged against the rounding of the terms that cancelled in it, not against zero."""
    grads = [gold for name, gold in golden.items() if not name.endswith(".out") and gold.numel()]
    scale = max((float(gold.double().pow(2).mean().sqrt()) for gold in grads), default=0.0)
    results = []
    for name, gold in golden.items():
        kind = "out" if name.endswith(".out") else "grad"
        tolerance = tolerance_for(f"{key}.{kind}", device.backend, device.arch)
        found = candidate.get(name, torch.full((), float("nan")))
        magnitude = None if kind == "out" else torch.tensor(scale, dtype=torch.float64, device=gold.device)
        results.append(
            compare(f"{key}.{name} [{label}]", found, gold, tolerance, reference.get(name), magnitude=magnitude)
        )
    return results


class FusedLayers(torch.nn.Module):
    """The fusible pieces of a BERT layer side by side: LayerNorm, GeLU and dense + bias + GeLU."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.dense = torch.nn.Linear(hidden, 4 * hidden)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.norm(x), F.gelu(x), F.gelu(self.dense(x))


FUSED_NAMES = ("layer_norm", "gelu", "dense_bias_gelu")


def _seeded_inputs(shapes: tuple[tuple[int, ...], ...], device: torch.device | str, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g).to(device) for shape in shapes]


def _seeded(make: Callable[[], torch.nn.Module], device: torch.device | str, seed: int) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make().to(device)


def check_compiled_fused_layers(
    tokens: int, hidden: int, dtype: str, device: DeviceInfo, torch_device: torch.device
) -> list[Comparison]:
    """torch.compile (Inductor) of LayerNorm, GeLU and dense+bias+GeLU vs eager, vs float64."""
    torch_dtype = getattr(torch, dtype)
    module = _seeded(lambda: FusedLayers(hidden), torch_device, seed=0)
    x, *upstreams = _seeded_inputs(((tokens, hidden),) * 3 + ((tokens, 4 * hidden),), torch_device, seed=1)
    low = [t.to(torch_dtype) for t in upstreams]
    golden = layer_results(
        copy.deepcopy(module).double(), x.double(), tuple(u.double() for u in upstreams), FUSED_NAMES, eager
    )
    reference = layer_results(copy.deepcopy(module).to(torch_dtype), x.to(torch_dtype), tuple(low), FUSED_NAMES, eager)
    candidate_module = copy.deepcopy(module).to(torch_dtype)
    compiled = torch.compile(candidate_module, fullgraph=True, dynamic=False)
    candidate = layer_results(
        candidate_module, x.to(torch_dtype), tuple(low), FUSED_NAMES, lambda _module, inputs: compiled(inputs)
    )
    return compare_results("compiled", f"Inductor, {tokens}x{hidden}, {dtype}", candidate, reference, golden, device)


def bert_layer(scale: str, device: torch.device | str, seed: int = 0) -> Any:
    """One transformers BertLayer of BERT-L at `scale`, dropout off, SDPA attention (typed Any:
    callers reach into its submodules, which torch types as Tensor | Module)."""
    import transformers
    from transformers.models.bert.modeling_bert import BertLayer

    make_config: Any = transformers.BertConfig  # its typed signature leaves out attn_implementation
    config = make_config(
        **MODELS["bert-large"].config_kwargs(scale),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
    )
    return _seeded(lambda: BertLayer(config), device, seed).eval()


def _first(call: Call) -> Call:
    """BertLayer returns a tensor (transformers 5) or a tuple (4.x): keep the hidden states."""

    def run(module: torch.nn.Module, x: torch.Tensor) -> Any:
        return _as_tuple(call(module, x))[0]

    return run


def check_bert_layer_autocast(
    scale: str, batch: int, seq: int, device: DeviceInfo, torch_device: torch.device
) -> list[Comparison]:
    """A BERT-L encoder layer in fp32 under bf16 autocast with the device's fused attention
    (candidate) vs the same with math attention (reference) vs float64 (golden)."""
    layer = bert_layer(scale, torch_device)
    hidden = layer.attention.self.query.in_features
    x, upstream = _seeded_inputs(((batch, seq, hidden),) * 2, torch_device, seed=4)
    names = ("layer",)
    golden = layer_results(
        copy.deepcopy(layer).double(), x.double(), (upstream.double(),), names, math_attention(_first(eager))
    )
    reference = layer_results(copy.deepcopy(layer), x, (upstream,), names, autocast(math_attention(_first(eager))))
    candidate = layer_results(copy.deepcopy(layer), x, (upstream,), names, autocast(_first(eager)))
    return compare_results(
        "bert_layer",
        f"BERT-L {scale} layer, batch {batch} x {seq}, bf16 autocast",
        candidate,
        reference,
        golden,
        device,
    )


def model_results(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], call: Callable[..., Any]
) -> dict[str, torch.Tensor]:
    """Loss, logits and every parameter's gradient of one training step of a transformers model."""
    out = call(**batch)
    logits = out.logits if hasattr(out, "logits") else out.prediction_logits
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(out.loss, list(params.values()), allow_unused=True)
    found = {"loss.out": out.loss.detach().reshape(1), "logits.out": logits.detach()}
    found.update({f"model.grad_{name}": g for name, g in zip(params, grads) if g is not None})
    return found


def check_compiled_model(
    name: str, dtype: str, device: DeviceInfo, torch_device: torch.device, seq_len: int = 64
) -> list[Comparison]:
    """A one-layer tiny `name` compiled with Inductor vs eager, vs float64: loss, logits, grads."""
    torch_dtype = getattr(torch, dtype)
    build = build_model(name, "tiny", device=torch_device, num_layers=1, seed=0)
    model = build.model.eval()
    batch = build.make_batch(2, seq_len=seq_len, seed=1)
    golden_model = copy.deepcopy(model).double()
    with math_sdpa():
        golden = model_results(golden_model, batch, golden_model)
    reference_model = copy.deepcopy(model).to(torch_dtype)
    reference = model_results(reference_model, batch, reference_model)
    candidate_model = copy.deepcopy(model).to(torch_dtype)
    compiled = torch.compile(candidate_model, dynamic=False)
    candidate = model_results(candidate_model, batch, compiled)
    return compare_results("compiled", f"{name} tiny, 1 layer, compiled, {dtype}", candidate, reference, golden, device)
