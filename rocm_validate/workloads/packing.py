"""Packed sequences: several training sequences concatenated into one fixed-length block, as
MLPerf BERT-L submissions train on a packed dataset, with attention kept inside each sequence.

A pack is a list of sequence lengths summing to the block length. What a kernel needs to keep
sequences apart is derived here, once: segment ids, the block-diagonal attention mask, the
cumulative sequence lengths (`cu_seqlens`) of varlen kernels, and position ids that restart in
every sequence. The packing factor is sequences per pack: Graphcore's packing of BERT's
Wikipedia pretraining data to 512 tokens reaches about 2 (Krell et al., "Efficient Sequence
Packing without Cross-contamination", arXiv:2107.02027), the factor of the packs below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Pack = tuple[int, ...]

# Attention checks: four blocks of BERT-L's 512 tokens (64 on a CPU), one to three sequences each,
# every length different, and a one-token sequence (its softmax has a single key: a leak into it
# shows at full size).
ATTENTION_PACKS: dict[str, tuple[Pack, ...]] = {
    "full": ((512,), (300, 212), (200, 180, 132), (1, 255, 256)),
    "tiny": ((64,), (37, 27), (25, 23, 16), (1, 31, 32)),
}
# The packed training step: a cycle of four packs, 2.0 sequences per pack, every block full.
TRAINING_PACKS: dict[str, tuple[Pack, ...]] = {
    "full": ((512,), (300, 212), (200, 180, 132), (256, 256)),
    "tiny": ((32,), (19, 13), (13, 11, 8), (16, 16)),
}


@dataclass(frozen=True)
class Segment:
    """One sequence inside a pack: block index and its token range [start, end)."""

    block: int
    index: int  # its place in the block
    start: int
    end: int

    def describe(self) -> str:
        return f"block {self.block} sequence {self.index} (tokens {self.start}-{self.end - 1})"


def block_length(packs: Sequence[Pack]) -> int:
    """The tokens of every pack, which must all be full and equal."""
    lengths = {sum(pack) for pack in packs}
    if len(lengths) != 1 or any(length < 1 for pack in packs for length in pack):
        raise ValueError(f"packs must fill blocks of one length with sequences of 1 token or more, found {packs}")
    return lengths.pop()


def segments(packs: Sequence[Pack]) -> list[Segment]:
    """Every sequence of every pack, in order."""
    found = []
    for block, pack in enumerate(packs):
        start = 0
        for index, length in enumerate(pack):
            found.append(Segment(block, index, start, start + length))
            start += length
    return found


def segment_of(packs: Sequence[Pack], block: int, token: int) -> Segment:
    """The sequence a token of a block belongs to."""
    return next(s for s in segments(packs) if s.block == block and s.start <= token < s.end)


def packing_factor(packs: Sequence[Pack]) -> float:
    """Sequences per pack."""
    return sum(len(pack) for pack in packs) / len(packs)


def cu_seqlens(packs: Sequence[Pack]) -> list[int]:
    """Cumulative sequence lengths over all packs laid end to end: [0, l1, l1 + l2, ...]."""
    offsets = [0]
    for pack in packs:
        for length in pack:
            offsets.append(offsets[-1] + length)
    return offsets


def block_mask(packs: Sequence[Pack], device: torch.device | str = "cpu") -> Any:
    """[blocks, 1, L, L] boolean, True where a query may attend to a key: the same sequence."""

    ids = segment_ids(packs, device)
    return (ids[:, :, None] == ids[:, None, :])[:, None]


def segment_ids(packs: Sequence[Pack], device: torch.device | str = "cpu") -> Any:
    """[blocks, L]: each token's sequence number within its block."""
    import torch

    block_length(packs)
    rows = [torch.repeat_interleave(torch.arange(len(pack)), torch.tensor(pack)) for pack in packs]
    return torch.stack(rows).to(device)


def position_ids(packs: Sequence[Pack], device: torch.device | str = "cpu") -> Any:
    """[blocks, L]: positions restarting at 0 in every sequence."""
    import torch

    rows = [torch.cat([torch.arange(length) for length in pack]) for pack in packs]
    return torch.stack(rows).to(device)


def packed_mlm_batch(packs: Sequence[Pack], vocab: int, seed: int) -> dict[str, Any]:
    """A BERT pretraining batch of packs: each sequence drawn as `mlm_batch` draws one (CLS, two
    segments, 15% masked), concatenated, with restarting position ids and the block-diagonal
    mask (transformers' BERT takes a 4-D boolean mask as is). The next-sentence head sees one
    label per pack (its first token), as the unpacked model does per sequence."""
    import torch

    from rocm_validate.workloads.models import mlm_batch

    columns: dict[str, list[Any]] = {"input_ids": [], "token_type_ids": [], "labels": []}
    drawn = 0
    for pack in packs:
        parts: dict[str, list[Any]] = {key: [] for key in columns}
        for length in pack:
            sequence = mlm_batch(1, length, vocab, seed * 1_000_003 + drawn)
            drawn += 1
            for key in columns:
                parts[key].append(sequence[key])
        for key in columns:
            columns[key].append(torch.cat(parts[key], dim=1))
    batch = {key: torch.cat(rows) for key, rows in columns.items()}
    g = torch.Generator().manual_seed(seed)
    batch.update(
        position_ids=position_ids(packs),
        attention_mask=block_mask(packs),
        next_sentence_label=torch.randint(0, 2, (len(packs),), generator=g),
    )
    return batch


def cycle(packs: Sequence[Pack], count: int) -> tuple[Pack, ...]:
    """`count` packs taken from `packs` in turn."""
    return tuple(packs[i % len(packs)] for i in range(count))
