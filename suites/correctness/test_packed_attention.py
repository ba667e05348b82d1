"""Attention over packed BERT-L blocks (several sequences of different lengths in each 512-token
block) through every path a packed batch takes: the block-diagonal mask on each SDPA backend,
nested jagged tensors through SDPA, and flash-attn's varlen API when installed; each sequence
against its own float64 attention, so a leak across a boundary fails naming the sequence."""

from __future__ import annotations

import pytest

from rocm_validate.core.requirements import (
    import_optional,
    not_validated,
    refusal_skip_reason,
)
from rocm_validate.correctness.attention import attention_skip_reason
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.packed import FLASH_ATTN_INSTALL, PATHS, check_packed_attention
from rocm_validate.errors import BackendRefused


@pytest.mark.parametrize("path", [name for name, path in PATHS.items() if path.kind != "varlen"])
def test_packed_attention_keeps_every_sequence_to_itself(rocm_device, torch_device, path, attention_dtype):
    backend = PATHS[path].backend
    reason = None if backend == "math" else attention_skip_reason(backend, rocm_device)
    if reason:
        pytest.skip(reason)
    try:
        results = check_packed_attention(path, attention_dtype, rocm_device, torch_device)
    except BackendRefused as refusal:
        skip = refusal_skip_reason(f"{backend} SDPA to take packed sequences as {PATHS[path].describe()}", refusal)
        if PATHS[path].meant_for(rocm_device):
            not_validated(skip)
        pytest.skip(skip)
    assert_passed(results)


@pytest.mark.requires_gpu
def test_flash_attn_varlen_keeps_every_sequence_to_itself(rocm_device, torch_device, attention_dtype):
    import_optional("flash_attn", "validate flash_attn_varlen_func on packed sequences", FLASH_ATTN_INSTALL)
    assert_passed(check_packed_attention("flash_attn_varlen", attention_dtype, rocm_device, torch_device))
