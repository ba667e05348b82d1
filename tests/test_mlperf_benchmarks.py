"""What each MLPerf benchmark counts and evaluates, held against mlperf-logging's own rules: the
RCP checker's reader for the count, the compliance checker's quality target for the direction."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml
from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.rcp_checker import rcp_checker

from rocm_validate.convergence import mlperf_benchmarks
from rocm_validate.convergence.mlperf import available_rulesets

COMPLIANCE = Path(mlp_compliance.__file__).parent
TARGET = re.compile(r"v\['value'\](?:\['(\w+)'\])?\s*(<=|>=|<|>)")


@functools.cache
def quality_targets():
    """(ruleset, benchmark, metric entry, 'lower' / 'higher') from every closed_<benchmark>.yaml's
    eval_accuracy target in every packaged training ruleset."""
    found = []
    for path in sorted(COMPLIANCE.glob("training_*/closed_*.yaml")):
        benchmark = path.stem.removeprefix("closed_")
        for record in yaml.safe_load(path.read_text()) or []:
            key = record.get("KEY") or {}
            if key.get("NAME") == "eval_accuracy" and key.get("ATLEAST_ONE_CHECK"):
                entry, operator = TARGET.search(key["ATLEAST_ONE_CHECK"]).groups()
                found.append((path.parent.name, benchmark, entry, "lower" if "<" in operator else "higher"))
    return found


@pytest.mark.parametrize("name", sorted({target[1] for target in quality_targets()}))
def test_the_metric_direction_is_the_compliance_checkers_target_in_every_ruleset(name):
    metric = mlperf_benchmarks.eval_metric(name)
    for ruleset, _name, entry, better in (target for target in quality_targets() if target[1] == name):
        assert metric.better == better, f"{ruleset}/closed_{name}.yaml's target says {better} is better"
        assert entry in (None, metric.value_key, metric.metadata_metric)


def test_the_targets_cover_the_llms_and_bert():
    targets = {(benchmark, better) for _ruleset, benchmark, _entry, better in quality_targets()}
    assert {("llama31_8b", "lower"), ("llama2_70b_lora", "lower"), ("bert", "higher")} <= targets


def _line(key, value, metadata=None):
    return ":::MLLOG " + json.dumps({"time_ms": 1, "key": key, "value": value, "metadata": metadata or {}})


def checker_count(tmp_path, benchmark, ruleset, train_samples=False):
    """What rcp_checker.read_submission_file reads from a run whose counters all differ."""
    counters = {"epoch_num": 1.5, "samples_count": 7, "step_num": 9}
    lines = [_line("submission_benchmark", benchmark), _line("global_batch_size", 8)]
    if benchmark == "stable_diffusion":  # converged at the first step where FID and CLIP both meet the target
        lines += [_line("eval_accuracy", 80.0, {**counters, "metric": "FID"})]
        lines += [_line("eval_accuracy", 0.2, {**counters, "metric": "CLIP"})]
    else:
        lines.append(_line("eval_accuracy", 0.5, counters))
    lines += [_line("train_samples", 11), _line("run_stop", None, {"status": "success"})]
    path = tmp_path / f"{benchmark}-{ruleset}.txt"
    path.write_text("\n".join(lines) + "\n")
    return {**counters, "train_samples": 11}, rcp_checker.read_submission_file(str(path), ruleset, train_samples)[1]


@pytest.mark.parametrize("name", sorted(rcp_checker.submission_runs["training"]))
def test_the_count_is_where_mlperfs_rcp_checker_reads_it_in_every_ruleset(tmp_path, name):
    for ruleset in available_rulesets():
        counters, read = checker_count(tmp_path, name, ruleset)
        assert counters[mlperf_benchmarks.convergence_count(name, ruleset).key] == read, ruleset


def test_bert_counts_train_samples_when_asked_as_the_package_checker_does(tmp_path):
    counters, read = checker_count(tmp_path, "bert", "5.0.0", train_samples=True)
    count = mlperf_benchmarks.convergence_count("bert", "5.0.0", train_samples=True)
    assert (count.unit, counters[count.key]) == ("samples", read)


@pytest.mark.parametrize(
    ("name", "ruleset", "unit"),
    [
        ("llama31_8b", "5.1.0", "samples"),
        ("llama2_70b_lora", "5.0.0", "samples"),
        ("bert", "5.0.0", "samples"),
        ("gpt3", "4.1.0", "tokens"),
        ("unet3d", "3.0.0", "epochs"),
        ("unet3d", "3.1.0", "samples"),
        ("stable_diffusion", "3.1.0", "steps"),
        ("resnet", "4.0.0", "epochs"),
        ("rgat", "5.0.0", "epochs"),
        (None, "5.0.0", "epochs"),
    ],
)
def test_the_unit_is_what_the_benchmark_counts(name, ruleset, unit):
    assert mlperf_benchmarks.convergence_count(name, ruleset).unit == unit


def test_a_benchmark_the_table_does_not_know_shows_the_bare_key_without_a_direction():
    metric = mlperf_benchmarks.eval_metric("frobnicate")
    assert (metric.label, metric.better) == ("eval_accuracy", None)
    assert mlperf_benchmarks.eval_metric("llama31_8b").label == "log perplexity (lower is better)"
