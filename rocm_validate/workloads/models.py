"""Model builds by name: real transformers architectures, random init, seeded, no downloads.

`build_model("bert-large")` is MLPerf's BERT-L (24 layers, hidden 1024, 16 heads, FFN 4096,
vocab 30522, sequence 512); `llama-3.1-8b` is the Llama-3.1-8B decoder at full width with a
configurable number of layers; `llama-2-70b` the Llama-2-70B decoder (width 8192, GQA 64/8, MLP
28672), MLPerf llama2_70b_lora's base. Each has a `tiny` scale that trains on a CPU in seconds.
A build carries a synthetic batch maker and the training FLOPs per sample, so throughput can be
reported as model TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocm_validate.errors import ModelBuildError

if TYPE_CHECKING:
    import torch

SCALES = ("full", "tiny")
PAD, CLS, SEP, MASK = 0, 1, 2, 3
FIRST_WORD = 4
MASKED_FRACTION = 0.15


@dataclass(frozen=True)
class ModelSpec:
    """A named architecture with its full-size and CPU-size hyper-parameters."""

    name: str
    family: str  # "bert" (masked LM + next sentence) or "llama" (causal LM)
    full: dict[str, Any]
    tiny: dict[str, Any]
    seq_len: dict[str, int] = field(default_factory=dict)

    def config_kwargs(self, scale: str) -> dict[str, Any]:
        return dict(self.full if scale == "full" else self.tiny)


# The CPU stand-in of the Llama shapes: a CI-sized decoder with the same GQA and SwiGLU layout.
_TINY_LLAMA: dict[str, Any] = dict(
    vocab_size=1024,
    hidden_size=256,
    num_hidden_layers=2,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=896,
    max_position_embeddings=512,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
)

MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "bert-large",
            "bert",
            full=dict(
                vocab_size=30522,
                hidden_size=1024,
                num_hidden_layers=24,
                num_attention_heads=16,
                intermediate_size=4096,
                max_position_embeddings=512,
            ),
            tiny=dict(
                vocab_size=1024,
                hidden_size=128,
                num_hidden_layers=4,
                num_attention_heads=4,
                intermediate_size=512,
                max_position_embeddings=128,
            ),
            seq_len={"full": 512, "tiny": 128},
        ),
        ModelSpec(
            "bert-base",
            "bert",
            full=dict(
                vocab_size=30522,
                hidden_size=768,
                num_hidden_layers=12,
                num_attention_heads=12,
                intermediate_size=3072,
                max_position_embeddings=512,
            ),
            tiny=dict(
                vocab_size=1024,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=256,
                max_position_embeddings=128,
            ),
            seq_len={"full": 512, "tiny": 128},
        ),
        ModelSpec(
            "llama-3.1-8b",
            "llama",
            full=dict(
                vocab_size=128256,
                hidden_size=4096,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                intermediate_size=14336,
                max_position_embeddings=131072,
                rope_theta=500000.0,
                rms_norm_eps=1e-5,
                tie_word_embeddings=False,
            ),
            tiny={**_TINY_LLAMA, "rope_theta": 500000.0},
            seq_len={"full": 4096, "tiny": 128},
        ),
        ModelSpec(  # MLPerf llama2_70b_lora's base model (its layers, as many as a step needs)
            "llama-2-70b",
            "llama",
            full=dict(
                vocab_size=32000,
                hidden_size=8192,
                num_hidden_layers=80,
                num_attention_heads=64,
                num_key_value_heads=8,
                intermediate_size=28672,
                max_position_embeddings=8192,
                rms_norm_eps=1e-5,
                tie_word_embeddings=False,
            ),
            tiny=_TINY_LLAMA,
            seq_len={"full": 4096, "tiny": 128},
        ),
    )
}


@dataclass
class ModelBuild:
    """A freshly initialised model with what a training step needs around it."""

    name: str
    scale: str
    family: str
    model: Any  # torch.nn.Module
    config: Any  # transformers.PretrainedConfig
    seq_len: int
    device: torch.device
    make_batch: Callable[..., dict[str, Any]]
    flops_per_sample: float  # training (forward + backward) FLOPs for one sequence of seq_len

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def training_flops_per_sample(family: str, config: Any, seq_len: int) -> float:
    """Matrix-multiply FLOPs of forward + backward (3x forward) for one sequence.

    Per token and layer: 2 FLOPs per weight of the projections, plus 4*seq*hidden for the
    attention scores and the weighted sum (full square, the PaLM convention), plus the output head.
    """
    h, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    ffn = config.intermediate_size
    attention = 4 * seq_len * h
    if family == "bert":
        per_layer = 2 * (4 * h * h + 2 * h * ffn) + attention
        head = 2 * (h * h + h * vocab)
    else:
        kv = h * config.num_key_value_heads // config.num_attention_heads
        per_layer = 2 * (2 * h * h + 2 * h * kv + 3 * h * ffn) + attention
        head = 2 * h * vocab
    return float(3 * seq_len * (layers * per_layer + head))


def mlm_batch(batch_size: int, seq_len: int, vocab: int, seed: int) -> dict[str, Any]:
    """BERT pretraining batch: two segments, 15% of words masked (80% [MASK], 10% random,
    10% kept), labels -100 elsewhere, and random next-sentence labels. Built on the CPU so the
    same seed gives the same batch on every device."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_WORD, vocab, (batch_size, seq_len), generator=g)
    middle = seq_len // 2
    ids[:, 0], ids[:, middle], ids[:, -1] = CLS, SEP, SEP
    token_type = torch.zeros_like(ids)
    token_type[:, middle + 1 :] = 1
    maskable = ids >= FIRST_WORD
    chosen = (torch.rand(ids.shape, generator=g) < MASKED_FRACTION) & maskable
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=g)
    inputs = ids.clone()
    inputs[chosen & (roll < 0.8)] = MASK
    random_words = torch.randint(FIRST_WORD, vocab, ids.shape, generator=g)
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs[swap] = random_words[swap]
    return {
        "input_ids": inputs,
        "token_type_ids": token_type,
        "attention_mask": torch.ones_like(ids),
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=g),
    }


def causal_batch(batch_size: int, seq_len: int, vocab: int, seed: int) -> dict[str, Any]:
    """Causal LM batch: random tokens, labels equal to the inputs (the model shifts them)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch_size, seq_len), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def _config(spec: ModelSpec, scale: str, num_layers: int | None, attn_implementation: str) -> Any:
    import transformers

    kwargs = spec.config_kwargs(scale)
    if num_layers is not None:
        if num_layers < 1:
            raise ModelBuildError(f"num_layers must be at least 1, found {num_layers}")
        kwargs["num_hidden_layers"] = num_layers
    # Any: transformers' typed configs leave out attn_implementation, which every config takes.
    config_class: Any = transformers.BertConfig if spec.family == "bert" else transformers.LlamaConfig
    return config_class(attn_implementation=attn_implementation, **kwargs)


def build_model(
    name: str,
    scale: str = "tiny",
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    attn_implementation: str = "sdpa",
    num_layers: int | None = None,
    seq_len: int | None = None,
    seed: int = 0,
) -> ModelBuild:
    """Build `name` at `scale` on `device`, initialised from `seed` without touching global RNG."""
    import torch
    import transformers

    if name not in MODELS:
        raise ModelBuildError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    if scale not in SCALES:
        raise ModelBuildError(f"unknown scale {scale!r} for {name}; available: {', '.join(SCALES)}")
    spec = MODELS[name]
    config = _config(spec, scale, num_layers, attn_implementation)
    length = seq_len or spec.seq_len[scale]
    if length > config.max_position_embeddings:
        raise ModelBuildError(f"seq_len {length} exceeds {name} {scale}'s {config.max_position_embeddings} positions")
    model_class = transformers.BertForPreTraining if spec.family == "bert" else transformers.LlamaForCausalLM
    target = torch.device(device)
    with torch.random.fork_rng(devices=[target] if target.type == "cuda" else []):
        torch.manual_seed(seed)
        with target:
            model: Any = model_class(config)  # Any: transformers types .to() through a decorator mypy cannot call
    if dtype is not None:
        model = model.to(dtype=dtype)
    batch_maker = mlm_batch if spec.family == "bert" else causal_batch
    vocab = config.vocab_size

    def make_batch(batch_size: int, seq_len: int | None = None, seed: int = 0) -> dict[str, torch.Tensor]:
        batch = batch_maker(batch_size, seq_len or length, vocab, seed)
        return {key: value.to(target, non_blocking=True) for key, value in batch.items()}

    return ModelBuild(
        name=name,
        scale=scale,
        family=spec.family,
        model=model,
        config=config,
        seq_len=length,
        device=target,
        make_batch=make_batch,
        flops_per_sample=training_flops_per_sample(spec.family, config, length),
    )
