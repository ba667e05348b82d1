"""A BERT-L encoder layer under bf16 autocast with the device's fused attention against float64,
and its CUDA / HIP graph replays against eager."""

from __future__ import annotations

import pytest

from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.graphs import check_graph_replay
from rocm_validate.correctness.layers import check_bert_layer_autocast


def test_bert_large_layer_under_bf16_autocast_matches_float64(rocm_device, torch_device):
    scale, batch, seq = ("full", 8, 512) if rocm_device.is_gpu else ("tiny", 2, 64)
    results = check_bert_layer_autocast(scale, batch, seq, rocm_device, torch_device)
    assert_passed(results)


@pytest.mark.requires_gpu
def test_graph_replays_of_a_bert_layer_step_are_bitwise_equal_to_eager(rocm_device, torch_device):
    results = check_graph_replay("full", 8, 512, rocm_device, torch_device)
    assert_passed(results)
