"""The fused-epilogue checks on the CPU (the correctness suite's run shows the healthy ones pass):
each fails when the epilogue computes the other GELU, drops or doubles its bias, leaks through
its ReLU, or scales its gradients; apex's paths are run through a stand-in module on the CPU,
healthy and with the other GELU."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
import torch
import torch.nn.functional as F

from rocm_validate.correctness.compare import Comparison
from rocm_validate.correctness.epilogues import check_epilogue

CPU = torch.device("cpu")
ADDMM = torch._addmm_activation


def failed(results: list[Comparison]) -> list[str]:
    return [c.check.split(" ")[0] for c in results if not c.passed]


def test_healthy_blas_lt_epilogues_pass_and_claim_the_exact_gelu_on_the_cpu(cpu):
    for path in ("addmm_gelu", "addmm_relu"):
        results = check_epilogue(path, "float32", cpu, CPU)
        assert not failed(results), "\n".join(c.message() for c in results)
    assert "claims gelu_erf" in check_epilogue("addmm_gelu", "float32", cpu, CPU)[0].check


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda b, x, w, use_gelu=False: F.gelu(x @ w + b, approximate="tanh"), id="the-other-gelu"),
        pytest.param(
            lambda b, x, w, use_gelu=False: ADDMM(torch.zeros_like(b), x, w, use_gelu=use_gelu), id="bias-dropped"
        ),
        pytest.param(lambda b, x, w, use_gelu=False: ADDMM(2 * b, x, w, use_gelu=use_gelu), id="bias-twice"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_wrong_gelu_epilogue_fails(cpu, monkeypatch, wrong, dtype):
    if dtype == "bfloat16" and "tanh" in str(wrong.__code__.co_consts):
        pytest.skip("tanh for erf is within bf16's rounding at these inputs: float32 is where it shows")
    monkeypatch.setattr(torch, "_addmm_activation", wrong)
    assert failed(check_epilogue("addmm_gelu", dtype, cpu, CPU)) == ["epilogue.addmm_gelu.out"]


def test_the_gpu_float32_row_still_fails_the_other_gelu(cpu, monkeypatch):
    """EPILOGUE_FP32_GPU's doubled scale term, at the GPU's shape: the CPU's erf GELU where a GPU
    path claims tanh fails; the tanh it claims passes."""
    gpu_like = dataclasses.replace(cpu, backend="cuda")
    assert failed(check_epilogue("addmm_gelu", "float32", gpu_like, CPU)) == ["epilogue.addmm_gelu.out"]
    monkeypatch.setattr(
        torch, "_addmm_activation", lambda b, x, w, use_gelu=False: F.gelu(x @ w + b, approximate="tanh")
    )
    assert not failed(check_epilogue("addmm_gelu", "float32", gpu_like, CPU))


def test_a_relu_epilogue_that_leaks_negative_values_fails(cpu, monkeypatch):
    monkeypatch.setattr(torch, "_addmm_activation", lambda b, x, w, use_gelu=False: F.leaky_relu(x @ w + b, 1e-3))
    assert failed(check_epilogue("addmm_relu", "float32", cpu, CPU)) == ["epilogue.addmm_relu.out"]


def test_a_compiled_dense_gelu_computing_the_other_gelu_fails_forward_and_backward(cpu, monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **_: lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"))
    assert set(failed(check_epilogue("compiled_gelu", "float32", cpu, CPU))) >= {
        "epilogue.compiled_gelu.out",
        "epilogue.compiled_gelu.grad_x",
    }


class _ScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y

    @staticmethod
    def backward(ctx, grad):
        return (grad.float() * 1.002).to(grad.dtype)


def test_compiled_gradients_two_parts_in_a_thousand_too_large_fail_in_bf16(cpu, monkeypatch):
    """A kernel that computes in float32 and scales its gradients by 1.002 before rounding them
    once to bf16: within one ulp everywhere, seen by the lean."""

    def compiled(fn, **_):
        return lambda x, w, b: fn(*(_ScaledGrad.apply(t.float()) for t in (x, w, b))).to(x.dtype)

    monkeypatch.setattr(torch, "compile", compiled)
    wrong = failed(check_epilogue("compiled_gelu_tanh", "bfloat16", cpu, CPU))
    assert "epilogue.compiled_gelu_tanh.grad_weight" in wrong and "epilogue.compiled_gelu_tanh.out" not in wrong


def fake_apex(gelu: str) -> types.ModuleType:
    """apex.fused_dense as a CPU stand-in: FusedDense and FusedDenseGeluDense with `gelu`."""

    class FusedDense(torch.nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
            self.bias = torch.nn.Parameter(torch.empty(out_features))

        def forward(self, x):
            return F.linear(x, self.weight, self.bias)

    class FusedDenseGeluDense(torch.nn.Module):
        def __init__(self, in_features, intermediate_features, out_features):
            super().__init__()
            self.weight1 = torch.nn.Parameter(torch.empty(intermediate_features, in_features))
            self.bias1 = torch.nn.Parameter(torch.empty(intermediate_features))
            self.weight2 = torch.nn.Parameter(torch.empty(out_features, intermediate_features))
            self.bias2 = torch.nn.Parameter(torch.empty(out_features))

        def forward(self, x):
            hidden = F.gelu(F.linear(x, self.weight1, self.bias1), approximate=gelu)
            return F.linear(hidden, self.weight2, self.bias2)

    module = types.ModuleType("apex.fused_dense")
    module.FusedDense, module.FusedDenseGeluDense = FusedDense, FusedDenseGeluDense
    return module


@pytest.mark.parametrize("gelu, passes", [("tanh", True), ("none", False)], ids=["claimed-tanh", "erf-instead"])
def test_apex_fused_dense_gelu_dense_is_judged_by_the_gelu_it_claims(cpu, monkeypatch, gelu, passes):
    monkeypatch.setitem(sys.modules, "apex", types.ModuleType("apex"))
    monkeypatch.setitem(sys.modules, "apex.fused_dense", fake_apex(gelu))
    results = check_epilogue("apex_dense_gelu_dense", "float32", cpu, CPU)
    assert [c.check.split(" ")[0].split(".")[-1] for c in results] == [
        "out",
        "grad_x",
        "grad_weight1",
        "grad_bias1",
        "grad_weight2",
        "grad_bias2",
    ]
    assert (not failed(results)) is passes, "\n".join(c.message() for c in results if not c.passed)
    assert not failed(check_epilogue("apex_dense", "float32", cpu, CPU))
