"""The building blocks of BERT-L and Llama-3.1-8B on their own, forward and backward, in fp32, bf16
and fp16 (and under bf16 autocast where models run them so), against their float64 definitions:
norms, activations, softmax, cross-entropy, embedding backward, dropout and long reductions.
`block_case` and `block_dtype` are parametrized per device by this folder's conftest."""

from __future__ import annotations

import pytest

from rocm_validate.correctness.blocks import BLOCKS, block_skip_reason, check_block, check_dropout
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.reductions import STAGNATION, check_sum_reduction


def test_building_block_matches_its_float64_definition(rocm_device, torch_device, block_case):
    block, model, dtype = block_case
    reason = block_skip_reason(block, dtype, rocm_device, BLOCKS[block].cpu_low_precision_grads)
    if reason:
        pytest.skip(reason)
    assert_passed(check_block(block, model, dtype, rocm_device, torch_device))


def test_dropout_keeps_1_minus_p_scales_by_its_inverse_and_reuses_its_mask(rocm_device, torch_device, block_dtype):
    assert_passed(check_dropout(block_dtype, rocm_device, torch_device))


def test_long_sums_accumulate_in_float32_on_adversarial_inputs(rocm_device, torch_device, block_dtype):
    if block_dtype not in STAGNATION:
        pytest.skip(f"{block_dtype} sums accumulate in their own type: judged by the accuracy test, not bitwise")
    assert_passed(check_sum_reduction(block_dtype, rocm_device, torch_device))
