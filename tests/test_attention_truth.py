"""The SDPA suite draws a case's inputs, math reference and float64 golden once and checks every
kernel against them: the truth is shared only by checks of the same case, and a wrong kernel
checked after a right one on the shared truth still fails."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rocm_validate.correctness.attention import LatestTruth, check_attention, named_case

CPU = torch.device("cpu")
SDPA = F.scaled_dot_product_attention


def test_a_second_check_of_the_same_case_reuses_its_truth():
    truths = LatestTruth()
    case = named_case("plain", 64, "float32", is_gpu=False)
    assert truths.get(case, CPU) is truths.get(case, CPU)


def test_another_case_seed_or_device_draws_a_new_truth():
    truths = LatestTruth()
    case = named_case("plain", 64, "float32", is_gpu=False)
    first = truths.get(case, CPU)
    assert truths.get(named_case("causal", 64, "float32", is_gpu=False), CPU) is not first
    assert truths.get(case, CPU, seed=1) is not truths.get(case, CPU)
    assert not torch.equal(truths.get(case, CPU, seed=1).inputs.q, first.inputs.q)


def test_a_wrong_kernel_checked_after_a_right_one_on_the_shared_truth_fails(cpu, monkeypatch):
    truths = LatestTruth()
    case = named_case("plain", 64, "float32", is_gpu=False)
    healthy = check_attention(case, "flash", cpu, CPU, truths=truths)
    assert all(c.passed for c in healthy)

    def one_percent_high(*args, **kwargs):
        return SDPA(*args, **kwargs) * 1.01

    monkeypatch.setattr(F, "scaled_dot_product_attention", one_percent_high)
    wrong = check_attention(case, "flash", cpu, CPU, truths=truths)
    assert not wrong[0].passed, "1% high attention output passed against the shared golden"


def test_the_shared_truth_is_the_truth_a_fresh_check_computes(cpu):
    truths = LatestTruth()
    case = named_case("causal", 64, "float32", is_gpu=False)
    check_attention(case, "flash", cpu, CPU, truths=truths)
    shared = check_attention(case, "flash", cpu, CPU, truths=truths)
    fresh = check_attention(case, "flash", cpu, CPU)
    assert [(c.candidate_error, c.reference_error) for c in shared] == [
        (c.candidate_error, c.reference_error) for c in fresh
    ]
