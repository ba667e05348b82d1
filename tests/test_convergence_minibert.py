"""mini-BERT on the CPU preset: the corpus, the MLLOG files, and the gate's negative controls.

The module records RCPs once (2 x 3 reference seeds) and then shows the gate failing two
deliberately broken candidates (tests/test_convergence_plugin.py shows the reference passing): a tenth of the learning rate
(converges too slowly or not at all) and masking that leaves the answer in the input (converges
suspiciously fast, which MLPerf's RCP check itself fails).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rocm_validate.convergence import minibert, mlperf
from rocm_validate.convergence.check import MiniBertCheck
from rocm_validate.convergence.minibert import PRESETS, REFERENCE, Candidate, Trainer
from rocm_validate.platform.devices import DeviceInfo

SPEC = PRESETS["cpu"]
SEEDS = 3
CPU = DeviceInfo(
    backend="cpu", index=None, name="test cpu", arch="test cpu", device_key="cpu-test", torch_version=torch.__version__
)


def test_the_corpus_is_the_same_on_every_generation():
    first = minibert.generate_sequences(SPEC.corpus, 64, torch.Generator().manual_seed(1))
    second = minibert.generate_sequences(SPEC.corpus, 64, torch.Generator().manual_seed(1))
    assert torch.equal(first, second)


def test_each_sequence_stays_inside_one_topics_words():
    sequences = minibert.generate_sequences(SPEC.corpus, 256, torch.Generator().manual_seed(2))
    assert (sequences[:, 0] == minibert.CLS).all()
    distinct = [len(set(row[1:].tolist())) for row in sequences]
    assert max(distinct) <= SPEC.corpus.words_per_topic
    assert (sequences[:, 1:] >= minibert.FIRST_WORD).all()


def test_masking_hides_a_fixed_number_of_words_per_sequence_and_never_cls():
    ids = minibert.generate_sequences(SPEC.corpus, 512, torch.Generator().manual_seed(3))
    batch = minibert.mask_batch(ids, 5, SPEC.corpus.vocab_size, torch.Generator().manual_seed(4))
    assert batch.positions.shape == (512, 5) and (batch.positions >= 1).all()
    assert all(len(set(row.tolist())) == 5 for row in batch.positions)
    assert torch.equal(batch.labels, ids.gather(1, batch.positions))
    shown = batch.inputs.gather(1, batch.positions)
    assert 0.75 < (shown == minibert.MASK).float().mean().item() < 0.85
    unmasked = torch.ones_like(ids, dtype=torch.bool).scatter(1, batch.positions, False)
    assert torch.equal(batch.inputs[unmasked], ids[unmasked])


def test_a_run_writes_an_mllog_file_that_mlperfs_tools_accept(tmp_path):
    outcome = Trainer(SPEC, REFERENCE, torch.device("cpu")).run(0, tmp_path / "result_0.txt")
    assert outcome.converged and outcome.samples == outcome.steps * SPEC.batch_size
    assert mlperf.compliance_messages(outcome.path, "5.0.0") == ()
    parsed = mlperf.read_mllog(outcome.path)
    facts = mlperf.run_facts(outcome.path, parsed, (0, outcome.samples, SPEC.batch_size, "bert"), [])
    assert (facts.benchmark, facts.global_batch_size, facts.status) == ("bert", SPEC.batch_size, "success")
    assert facts.rocm_validate_benchmark == minibert.MARKER
    assert facts.last_eval_accuracy == pytest.approx(outcome.accuracy)
    assert outcome.accuracy >= SPEC.target_accuracy
    assert parsed.first("seed").value == 0


def test_a_run_that_misses_the_target_by_max_steps_is_aborted(tmp_path):
    short = dataclasses.replace(SPEC, max_steps=6, warmup_steps=2)
    outcome = Trainer(short, REFERENCE, torch.device("cpu")).run(0, tmp_path / "result_0.txt")
    assert not outcome.converged and outcome.steps == 6
    assert mlperf.read_mllog(outcome.path).last("run_stop").metadata["status"] == "aborted"


def same_weights(module, seed):
    fresh = minibert.build_bert(SPEC, seed).state_dict()
    return all(torch.equal(module.bert.state_dict()[name], value) for name, value in fresh.items())


def test_a_compiled_candidate_is_compiled_once_warmed_up_in_init_and_reinitialised_per_seed(monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda module: compiled.append(module) or module)
    trainer = Trainer(SPEC, Candidate("compiled", "test", compile=True), torch.device("cpu"))
    first, _ = trainer.model_for(0)
    assert same_weights(first, 0), "the warm-up must leave seed 0's initial weights"
    assert all(p.grad is None for p in first.parameters()) and first.training
    with torch.no_grad():
        for parameter in first.parameters():
            parameter.add_(1.0)
    second, _ = trainer.model_for(1)
    assert second is first and len(compiled) == 1
    assert same_weights(second, 1)


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    """Reference RCPs recorded once for the module, on the CPU preset."""
    root = tmp_path_factory.mktemp("mini-bert-gate")
    gate = MiniBertCheck(
        spec=SPEC,
        device=CPU,
        torch_device=torch.device("cpu"),
        rcp_file=root / "rcps" / "cpu-test.json",
        record_command="record",
        refusal=lambda finding: f"refused: {finding}",
        seeds=SEEDS,
        workdir=root,
        ruleset="5.0.0",
        progress=lambda line, final: None,
    )
    recorded = gate.record_reference("rocm-validate tests", "2026-01-01T00:00:00+00:00")
    assert len(set(recorded.samples)) > 1, f"reference runs show no spread: {recorded.samples}"
    return gate


def test_a_tenth_of_the_learning_rate_fails_the_check(check):
    verdict = check.check(Candidate("lr-x0.1", "broken on purpose", lr_scale=0.1))
    assert verdict.verdict in ("not-converged", "too-slow"), verdict.message
    assert not verdict.passed
    if verdict.verdict == "not-converged":
        assert verdict.samples == (None, None), "training stops at the second miss: the set has failed"


@pytest.fixture
def leaky_masking(monkeypatch):
    """Masking that leaves every answer visible in the input, in training and evaluation."""
    real = minibert.mask_batch

    def leaky(ids, masked, vocab_size, generator):
        batch = real(ids, masked, vocab_size, generator)
        return minibert.MaskedBatch(ids.clone(), batch.positions, batch.labels)

    monkeypatch.setattr(minibert, "mask_batch", leaky)
    minibert.generate_corpus.cache_clear()
    yield
    minibert.generate_corpus.cache_clear()


def test_labels_leaking_into_the_inputs_fail_mlperfs_rcp_check_as_too_fast(check, leaky_masking):
    verdict = check.check(Candidate("leaky-masking", "broken on purpose"))
    assert not verdict.rcp_pass, "MLPerf's own RCP check must reject suspiciously fast convergence"
    assert verdict.verdict == "too-fast", verdict.message


@pytest.fixture(scope="module")
def four_steps_of_every_candidate(tmp_path_factory):
    """Seed 0 of every candidate, four steps each: its trained weights' digest by candidate name."""
    short = dataclasses.replace(SPEC, max_steps=4, warmup_steps=2)
    folder = tmp_path_factory.mktemp("candidates")
    return {
        c.name: Trainer(short, c, torch.device("cpu"), fp8_formats=("e4m3fn", "e5m2")).run(0, folder / c.name).weights
        for c in (*minibert.CANDIDATES, dataclasses.replace(REFERENCE, name="reference-again"))
    }


def test_every_candidate_trains_its_own_configuration(four_steps_of_every_candidate):
    """Samples to converge are counted at evaluations, so candidates can agree on them seed for
    seed; their weights cannot, unless a candidate trains the reference's configuration."""
    digests = {name: four_steps_of_every_candidate[name] for name in (c.name for c in minibert.CANDIDATES)}
    assert len(set(digests.values())) == len(digests), digests


def test_the_reference_trained_twice_has_the_same_weights(four_steps_of_every_candidate):
    """The negative control: a candidate that trains the reference's configuration is caught."""
    assert four_steps_of_every_candidate["reference-again"] == four_steps_of_every_candidate["reference"]


def test_fp8_linear_on_the_cpu_emulates_the_fp8_gemm():
    """The CPU's _scaled_mm is a reference kernel (0.85 s a 1024x64x256 product on one thread):
    one CI-sized run through it took 30 min, emulated 8 s."""
    fp8_linear = next(c for c in minibert.CANDIDATES if c.fp8_linear)
    assert minibert.fp8_matmul(torch.device("cpu")) == "emulated"
    trainer = Trainer(SPEC, fp8_linear, torch.device("cpu"), fp8_formats=("e4m3fn", "e5m2"))
    module, _ = trainer.model_for(0)
    layers = [m for m in module.modules() if isinstance(m, minibert.fp8.Fp8Linear)]
    assert layers and all(not layer.uses_scaled_mm(torch.device("cpu")) for layer in layers)
    assert trainer.label == "fp8-linear (project-delayed, emulated GEMM)"
