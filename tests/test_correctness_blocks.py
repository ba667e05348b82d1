"""The building-block checks on the CPU (the correctness suite's own run shows the healthy ones
pass): each of them fails when its output is 0.1% too large, when an approximation replaces the definition, or when a piece of its
arithmetic is wrong (eps, a dropped duplicate, a second dropout mask, an ignored target).
The planted bugs replace the torch function the block calls, as a broken kernel would."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rocm_validate.correctness.blocks import BLOCKS, Block, block_ids, check_block, check_dropout
from rocm_validate.correctness.compare import Comparison

CPU = torch.device("cpu")


def failed(results: list[Comparison]) -> list[Comparison]:
    return [c for c in results if not c.passed]


def scaled_output(block_name: str, factor: float) -> Block:
    """The block with its output `factor` too large, as a kernel that computes in float32 and
    rounds once would give it (scaling the rounded bf16 output by 1.001 would change nothing)."""
    block = BLOCKS[block_name]

    def wrong(tensors, extra):
        dtype = next(t.dtype for t in tensors.values() if t.is_floating_point())
        upcast = {k: t.float() if t.is_floating_point() else t for k, t in tensors.items()}
        return (block.candidate(upcast, extra) * factor).to(dtype)

    return dataclasses.replace(block, candidate=wrong)


CASES = [case for block in BLOCKS.values() for case in block_ids(block, is_gpu=False)]


@pytest.mark.parametrize(("name", "model", "dtype"), CASES, ids=["-".join(p for p in c if p) for c in CASES])
def test_an_output_one_part_in_a_thousand_too_large_fails_and_names_the_op_dtype_and_lean(
    cpu, monkeypatch, name, model, dtype
):
    if dtype == "bfloat16" and not BLOCKS[name].cpu_low_precision_grads:
        pytest.skip("the CPU's bf16 embedding backward is not validated")
    monkeypatch.setitem(BLOCKS, name, scaled_output(name, 1.001))
    wrong = failed(check_block(name, model, dtype, cpu, CPU))
    assert wrong, f"a 0.1% larger {name} output passed in {dtype}"
    message = wrong[0].message()
    assert wrong[0].check.startswith(f"block.{name}.") and f", {dtype}, " in wrong[0].check, message
    too_few = wrong[0].numel < 16  # a lean needs 16 samples (LEAN_MIN_SAMPLES); the elements judge a short vector
    assert too_few or wrong[0].model is None or "% of |golden| away from zero = " in message, message


def test_a_bf16_output_one_part_in_a_thousand_too_large_fails_on_its_lean_alone(cpu, monkeypatch):
    monkeypatch.setitem(BLOCKS, "layer_norm", scaled_output("layer_norm", 1.001))
    out = failed(check_block("layer_norm", "bert-large", "bfloat16", cpu, CPU))[0]
    assert out.model.mismatches == 0 and not out.lean_ok
    assert out.headline().startswith("the candidate leans away from zero by 0.09")


@pytest.mark.parametrize("exact, approximate", [("gelu", "tanh"), ("gelu_tanh", "none")])
def test_a_gelu_computed_with_the_other_formula_fails_in_float32(cpu, monkeypatch, exact, approximate):
    original = torch.nn.functional.gelu

    def swapped(x, **_asked):
        return original(x, approximate=approximate)

    monkeypatch.setattr(torch.nn.functional, "gelu", swapped)
    wrong = failed(check_block(exact, None, "float32", cpu, CPU))
    assert {c.check.split(" ")[0] for c in wrong} == {f"block.{exact}.out", f"block.{exact}.grad_x"}
    assert "farther from float64 than correct float32 arithmetic" in wrong[0].headline()


def test_a_layer_norm_with_the_wrong_eps_fails(cpu, monkeypatch):
    original = torch.nn.functional.layer_norm
    monkeypatch.setattr(
        torch.nn.functional, "layer_norm", lambda x, shape, w=None, b=None, eps=1e-5: original(x, shape, w, b, 1e-5)
    )
    assert failed(check_block("layer_norm", "bert-large", "float32", cpu, CPU))


def test_an_rms_norm_adding_eps_outside_the_root_fails(cpu, monkeypatch):
    def eps_outside(x, shape, w=None, eps=1e-5):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w

    monkeypatch.setattr(torch.nn.functional, "rms_norm", eps_outside)
    assert failed(check_block("rms_norm", "llama-3.1-8b", "float32", cpu, CPU))


class _LastWriteWins(torch.autograd.Function):
    """An embedding whose backward stores each repeated row's gradient instead of adding them."""

    @staticmethod
    def forward(ctx, index, weight):
        ctx.save_for_backward(index)
        ctx.rows = weight.shape[0]
        return weight[index]

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        out = torch.zeros(ctx.rows, grad.shape[-1], dtype=grad.dtype)
        out.index_put_((index,), grad, accumulate=False)
        return None, out


def test_an_embedding_backward_that_drops_repeated_rows_fails(cpu, monkeypatch):
    monkeypatch.setattr(
        torch.nn.functional, "embedding", lambda index, weight, padding_idx=None: _LastWriteWins.apply(index, weight)
    )
    wrong = failed(check_block("embedding", "llama-3.1-8b", "float32", cpu, CPU))
    assert [c.check.split(" ")[0] for c in wrong] == ["block.embedding.grad_weight"]


def test_a_padding_row_that_receives_gradient_fails(cpu, monkeypatch):
    original = torch.nn.functional.embedding
    monkeypatch.setattr(
        torch.nn.functional, "embedding", lambda index, weight, padding_idx=None: original(index, weight)
    )
    assert failed(check_block("embedding", "bert-large", "float32", cpu, CPU))


def test_a_cross_entropy_that_counts_ignored_targets_fails(cpu, monkeypatch):
    original = torch.nn.functional.cross_entropy

    def counting(x, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        return original(x, target.clamp(min=0), label_smoothing=label_smoothing, reduction=reduction)

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", counting)
    assert failed(check_block("cross_entropy_mean", "bert-large", "float32", cpu, CPU))


def test_a_cross_entropy_that_drops_label_smoothing_fails(cpu, monkeypatch):
    original = torch.nn.functional.cross_entropy

    def unsmoothed(x, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        return original(x, target, ignore_index=ignore_index, reduction=reduction)

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", unsmoothed)
    assert failed(check_block("cross_entropy", "llama-3.1-8b", "float32", cpu, CPU))


def test_healthy_dropout_passes_on_the_cpu(cpu):
    for dtype in ("float32", "bfloat16"):
        results = check_dropout(dtype, cpu, CPU)
        assert not failed(results), "\n\n".join(c.message() for c in failed(results))


class _SecondMask(torch.autograd.Function):
    """Dropout whose backward draws a new mask instead of reusing the forward's."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.p = p
        return x * (torch.rand_like(x, dtype=torch.float32) >= p) / (1 - p)

    @staticmethod
    def backward(ctx, grad):
        return grad * (torch.rand_like(grad, dtype=torch.float32) >= ctx.p) / (1 - ctx.p), None


@pytest.mark.parametrize(
    "wrong, fails",
    [
        (lambda x, p, training=True: _SecondMask.apply(x, p), "block.dropout.grad_x"),
        (
            lambda x, p, training=True: x * (torch.rand_like(x, dtype=torch.float32) >= 1 - p) / p,
            "block.dropout.keep_rate",
        ),
        (lambda x, p, training=True: x * (torch.rand_like(x, dtype=torch.float32) >= p), "block.dropout.out"),
    ],
    ids=["a-second-mask-in-backward", "p-and-1-minus-p-swapped", "no-rescaling"],
)
def test_a_wrong_dropout_fails(cpu, monkeypatch, wrong, fails):
    monkeypatch.setattr(torch.nn.functional, "dropout", wrong)
    assert fails in {c.check.split(" ")[0] for c in failed(check_dropout("float32", cpu, CPU))}


def test_a_dropout_one_percent_too_large_fails_in_bf16_beside_the_cpu_kernels_own_lean(cpu, monkeypatch):
    original = torch.nn.functional.dropout
    monkeypatch.setattr(
        torch.nn.functional,
        "dropout",
        lambda x, p, training=True: (original(x, p, training).float() * 1.01).to(x.dtype),
    )
    assert "block.dropout.out" in {c.check.split(" ")[0] for c in failed(check_dropout("bfloat16", cpu, CPU))}
