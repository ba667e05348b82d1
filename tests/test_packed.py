"""Packed sequences on the CPU: the packing arithmetic, the packed BERT batch, and the packed
attention checks failing when attention leaks across a sequence boundary, through the mask
(read one token off), a nested jagged tensor (offsets one token off) and flash-attn's varlen
API (a CPU stand-in whose cu_seqlens are one token off; healthy, it passes)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F

from rocm_validate.correctness.packed import check_packed_attention
from rocm_validate.workloads.packing import (
    ATTENTION_PACKS,
    TRAINING_PACKS,
    block_mask,
    cu_seqlens,
    cycle,
    packed_mlm_batch,
    packing_factor,
    position_ids,
    segment_of,
    segments,
)

CPU = torch.device("cpu")
SDPA = F.scaled_dot_product_attention


def test_packs_give_their_sequences_boundaries_and_factor():
    packs = ((3, 2), (5,))
    assert [(s.block, s.start, s.end) for s in segments(packs)] == [(0, 0, 3), (0, 3, 5), (1, 0, 5)]
    assert cu_seqlens(packs) == [0, 3, 5, 10]
    assert packing_factor(packs) == 1.5
    assert packing_factor(TRAINING_PACKS["full"]) == packing_factor(TRAINING_PACKS["tiny"]) == 2.0
    assert segment_of(packs, 0, 4).describe() == "block 0 sequence 1 (tokens 3-4)"
    assert position_ids(packs).tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]
    mask = block_mask(packs)
    assert mask.shape == (2, 1, 5, 5) and mask[0, 0, 2, 3].item() is False and mask[1, 0, 0, 4].item() is True
    assert cycle(packs, 3) == ((3, 2), (5,), (3, 2))


def test_packs_must_fill_equal_blocks():
    with pytest.raises(ValueError, match="packs must fill blocks of one length"):
        block_mask(((3, 2), (4,)))


def test_a_packed_bert_batch_restarts_positions_and_keeps_sequences_apart():
    packs = TRAINING_PACKS["tiny"]
    batch = packed_mlm_batch(packs, vocab=1024, seed=0)
    assert batch["input_ids"].shape == batch["labels"].shape == batch["position_ids"].shape == (4, 32)
    assert batch["attention_mask"].shape == (4, 1, 32, 32) and batch["next_sentence_label"].shape == (4,)
    assert batch["input_ids"][1, 19].item() == 1  # [CLS] opens the second sequence of the second pack
    assert batch["position_ids"][1, 19].item() == 0


def test_the_packed_bert_step_matches_each_sequence_run_alone():
    from rocm_validate.workloads.models import build_model

    build = build_model("bert-large", "tiny", seq_len=32)
    model = build.model.eval()
    batch = packed_mlm_batch(((19, 13),), vocab=build.config.vocab_size, seed=1)
    with torch.no_grad():
        packed = model(**{k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label")})
        alone = model(input_ids=batch["input_ids"][:, 19:], token_type_ids=batch["token_type_ids"][:, 19:])
    assert torch.allclose(packed.prediction_logits[0, 19:], alone.prediction_logits[0], atol=1e-5)


def leaky_mask(mask: torch.Tensor) -> torch.Tensor:
    """The mask read one token off at every boundary: a sequence's first query sees the token before it."""
    leaked = mask.clone()
    for s in segments(ATTENTION_PACKS["tiny"]):
        if s.start:
            leaked[s.block, :, s.start, s.start - 1] = True
    return leaked


def test_a_mask_read_one_token_off_at_the_boundaries_fails_naming_a_sequence(cpu, monkeypatch):
    def leaking(q, k, v, attn_mask=None, **kwargs):
        if attn_mask is not None and not torch.backends.cuda.math_sdp_enabled():
            attn_mask = leaky_mask(attn_mask)
        return SDPA(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", leaking)
    wrong = [c for c in check_packed_attention("mask-flash", "float32", cpu, CPU) if not c.passed]
    assert {c.check.split(" ")[0] for c in wrong} >= {"packed.mask-flash.out", "packed.mask-flash.grad_v"}
    assert "worst in block " in wrong[0].check and "sequence" in wrong[0].check


def shifted_offsets(offsets: torch.Tensor) -> torch.Tensor:
    """cu_seqlens one token off: every inner boundary a token late."""
    moved = offsets.clone()
    moved[1:-1] += 1
    return moved


def attend_by_offsets(q, k, v, offsets):
    """Attention over [T, H, D] values, each token seeing its own sequence of `offsets`."""
    ids = torch.repeat_interleave(torch.arange(len(offsets) - 1), torch.diff(offsets))
    mask = ids[:, None] == ids[None, :]
    out = SDPA(*(t.transpose(0, 1)[None] for t in (q, k, v)), attn_mask=mask)
    return out[0].transpose(0, 1)


def test_nested_jagged_offsets_one_token_off_fail(cpu, monkeypatch):
    def leaking(q, k, v, *args, **kwargs):
        if not q.is_nested:
            return SDPA(q, k, v, *args, **kwargs)
        values = [t.transpose(1, 2).values() for t in (q, k, v)]
        out = attend_by_offsets(*values, shifted_offsets(q.offsets()))
        return torch.nested.nested_tensor_from_jagged(out, q.offsets()).transpose(1, 2)

    monkeypatch.setattr(F, "scaled_dot_product_attention", leaking)
    wrong = [c.check.split(" ")[0] for c in check_packed_attention("njt-math", "float32", cpu, CPU) if not c.passed]
    assert "packed.njt-math.out" in wrong


@pytest.mark.parametrize("leak, passes", [(False, True), (True, False)], ids=["healthy", "cu-seqlens-one-off"])
def test_flash_attn_varlen_is_judged_per_sequence(cpu, monkeypatch, leak, passes):
    def flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p=0.0, causal=False):
        offsets = cu_q.long()
        return attend_by_offsets(q, k, v, shifted_offsets(offsets) if leak else offsets)

    module = types.ModuleType("flash_attn")
    module.flash_attn_varlen_func = flash_attn_varlen_func
    monkeypatch.setitem(sys.modules, "flash_attn", module)
    results = check_packed_attention("flash_attn_varlen", "float32", cpu, CPU)
    assert all(c.passed for c in results) is passes, [c.check for c in results if not c.passed]
