"""TorchInductor (Triton on GPUs, C++ on the CPU) against eager: the fusible pieces of a BERT
layer, and a whole tiny BERT, forward and backward, measured against float64: in the training
dtype (bf16 on GPUs, fp32 on the CPU), and on GPUs in fp32 too, where a 0.1% change cannot hide
under bf16 rounding.

Whether the compiler produces the same model is a question about the stack, one per node: in a
whole-node run each of these runs on one GPU (`rocm_shared`, seconds as a cold compile took in
the 2 x H200 whole-node run, 2026-11-26), the eager checks of every GPU's numerics run on every GPU."""

from __future__ import annotations

import pytest

from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.layers import (
    check_compiled_fused_layers,
    check_compiled_model,
)
from rocm_validate.workloads.shapes import training_dtype


@pytest.mark.rocm_shared(seconds=10)
def test_compiled_layer_norm_gelu_and_dense_bias_gelu_match_eager(rocm_device, torch_device):
    tokens, hidden = (4096, 1024) if rocm_device.is_gpu else (64, 128)
    results = check_compiled_fused_layers(
        tokens, hidden, training_dtype(rocm_device.backend), rocm_device, torch_device
    )
    assert_passed(results)


@pytest.mark.rocm_shared(seconds=21)
def test_compiled_tiny_bert_matches_eager(rocm_device, torch_device):
    results = check_compiled_model("bert-large", training_dtype(rocm_device.backend), rocm_device, torch_device)
    assert_passed(results)


@pytest.mark.requires_gpu
@pytest.mark.rocm_shared(seconds=2)
def test_compiled_layer_norm_gelu_and_dense_bias_gelu_match_eager_in_float32(rocm_device, torch_device):
    results = check_compiled_fused_layers(4096, 1024, "float32", rocm_device, torch_device)
    assert_passed(results)


@pytest.mark.requires_gpu
@pytest.mark.rocm_shared(seconds=10)
def test_compiled_tiny_bert_matches_eager_in_float32(rocm_device, torch_device):
    results = check_compiled_model("bert-large", "float32", rocm_device, torch_device)
    assert_passed(results)
