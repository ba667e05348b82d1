"""Model builds: the named shapes, synthetic batches and FLOP counts."""

import pytest
import torch

from rocm_validate.errors import ModelBuildError
from rocm_validate.workloads import models


def test_bert_large_full_is_mlperf_bert_l():
    config = models._config(models.MODELS["bert-large"], "full", None, "sdpa")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (24, 1024, 16)
    assert (config.intermediate_size, config.vocab_size, config.max_position_embeddings) == (4096, 30522, 512)
    assert models.MODELS["bert-large"].seq_len["full"] == 512


def test_llama_full_is_llama_3_1_8b_width_with_a_chosen_depth():
    config = models._config(models.MODELS["llama-3.1-8b"], "full", 2, "sdpa")
    assert (config.hidden_size, config.intermediate_size, config.num_attention_heads) == (4096, 14336, 32)
    assert (config.num_key_value_heads, config.vocab_size, config.num_hidden_layers) == (8, 128256, 2)


def test_bert_large_training_flops_match_the_hand_count():
    config = models._config(models.MODELS["bert-large"], "full", None, "sdpa")
    h, s, layers, vocab, ffn = 1024, 512, 24, 30522, 4096
    forward = s * (layers * (8 * h * h + 4 * h * ffn + 4 * s * h) + 2 * h * h + 2 * h * vocab)
    assert models.training_flops_per_sample("bert", config, s) == 3 * forward
    assert 1.1e12 < 3 * forward < 1.2e12  # ~6 * 335M params * 512 tokens, plus attention


def test_an_mlm_batch_masks_about_15_percent_of_words_and_labels_only_those():
    batch = models.mlm_batch(64, 128, 1024, seed=3)
    labelled = batch["labels"] != -100
    words = batch["token_type_ids"].numel() - 3 * 64  # CLS and two SEP per row are never masked
    assert 0.13 < labelled.sum().item() / words < 0.17
    assert (batch["input_ids"][labelled] == models.MASK).float().mean().item() == pytest.approx(0.8, abs=0.03)
    assert set(batch["next_sentence_label"].tolist()) == {0, 1}
    assert (batch["token_type_ids"][:, :64] == 0).all() and (batch["token_type_ids"][:, 65:] == 1).all()


def test_the_same_seed_gives_the_same_batch():
    first, second = models.mlm_batch(2, 32, 100, seed=5), models.mlm_batch(2, 32, 100, seed=5)
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_a_causal_batch_labels_equal_inputs():
    batch = models.causal_batch(2, 16, 100, seed=0)
    assert torch.equal(batch["input_ids"], batch["labels"])


def test_building_does_not_disturb_the_global_random_state():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    models.build_model("bert-base", "tiny", seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_dtype_and_attention_implementation_are_applied():
    build = models.build_model("llama-3.1-8b", "tiny", dtype=torch.bfloat16, attn_implementation="eager")
    assert {p.dtype for p in build.model.parameters()} == {torch.bfloat16}
    assert build.model.config._attn_implementation == "eager"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "gpt-5"}, "unknown model 'gpt-5'; available: bert-large, bert-base, llama-3.1-8b"),
        ({"name": "bert-base", "scale": "huge"}, "unknown scale 'huge'"),
        ({"name": "bert-base", "seq_len": 4096}, "seq_len 4096 exceeds bert-base tiny's 128 positions"),
        ({"name": "bert-base", "num_layers": 0}, "num_layers must be at least 1"),
    ],
)
def test_a_bad_build_request_names_what_is_wrong(kwargs, message):
    with pytest.raises(ModelBuildError, match=message.replace("(", r"\(")):
        models.build_model(**kwargs)


def test_builds_from_one_seed_are_identical_and_another_seed_differs():
    first = models.build_model("bert-base", seed=7).model.state_dict()
    second = models.build_model("bert-base", seed=7).model.state_dict()
    other = models.build_model("bert-base", seed=8).model.state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)
