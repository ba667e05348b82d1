"""What each MLPerf Training benchmark counts and evaluates, where its log alone does not say.

* `convergence_count`: the number the RCP checker compares and its unit. mlperf-logging's
  `rcp_checker.read_submission_file` reads eval_accuracy's `samples_count` for the benchmarks of
  `SAMPLES_COUNT_BENCHMARKS` (and stable diffusion), `epoch_num` for the rest (or `train_samples`
  for BERT on request). What `epoch_num` counts differs: samples in BERT and in UNet3D from
  ruleset 3.1.0, tokens in GPT-3, epochs elsewhere (the packaged RCP tables show it: BERT
  2,834,944, GPT-3 1,157,627,904 = 368 steps x 1,536 x 2,048 tokens, ResNet 34).
* `eval_metric`: the quality metric behind `eval_accuracy` and which way is better, from the
  MLPerf Training rules' quality targets. Every direction is checked against the target of
  mlperf-logging's compliance checker in every packaged ruleset (tests/test_mlperf_benchmarks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# rcp_checker.read_submission_file: these read eval_accuracy's samples_count (mlperf-logging 4.1.x)
SAMPLES_COUNT_BENCHMARKS = frozenset(
    {
        "llama2_70b_lora",
        "flux1",
        "llama31_405b",
        "llama31_8b",
        "gpt_oss_20b",
        "deepseekv3_671b",
        "qwen35_397b_grpo",
        "dlrmv4",
    }
)


@dataclass(frozen=True)
class ConvergenceCount:
    """Where the RCP checker reads a run's count to converge, and what it counts."""

    key: str  # eval_accuracy metadata key ('samples_count', 'epoch_num', 'step_num'), or 'train_samples'
    unit: str  # 'samples', 'epochs', 'tokens' or 'steps'


def ruleset_version(ruleset: str) -> tuple[int, ...]:
    """'5.1.0' -> (5, 1, 0), for ordering rulesets."""
    return tuple(int(part) if part.isdigit() else 0 for part in ruleset.split("."))


def convergence_count(benchmark: str | None, ruleset: str, train_samples: bool = False) -> ConvergenceCount:
    """The count the RCP checker compares for `benchmark` under `ruleset` (see the module doc)."""
    if benchmark == "stable_diffusion":
        return (
            ConvergenceCount("step_num", "steps")
            if ruleset == "3.1.0"
            else ConvergenceCount("samples_count", "samples")
        )
    if benchmark in SAMPLES_COUNT_BENCHMARKS:
        return ConvergenceCount("samples_count", "samples")
    if benchmark == "bert":
        return ConvergenceCount("train_samples" if train_samples else "epoch_num", "samples")
    if benchmark == "gpt3":
        return ConvergenceCount("epoch_num", "tokens")
    if benchmark == "unet3d" and ruleset_version(ruleset) >= (3, 1, 0):
        return ConvergenceCount("epoch_num", "samples")
    return ConvergenceCount("epoch_num", "epochs")


@dataclass(frozen=True)
class EvalMetric:
    """The quality metric an eval_accuracy line carries."""

    name: str
    better: str | None  # 'higher' or 'lower'; None for a benchmark this table does not know
    metadata_metric: str | None = None  # stable diffusion logs FID and CLIP lines: the one shown
    value_key: str | None = None  # Mask R-CNN logs {"BBOX": .., "SEGM": ..}: the entry shown

    @property
    def label(self) -> str:
        """'log perplexity (lower is better)'; the bare key for an unknown benchmark."""
        return f"{self.name} ({self.better} is better)" if self.better else self.name


_ACCURACY = "eval_accuracy"  # the log's own key, for a metric the rules name no better
_LOG_PERPLEXITY = EvalMetric("log perplexity", "lower")

EVAL_METRICS: dict[str, EvalMetric] = {
    "bert": EvalMetric("masked-LM accuracy", "higher"),
    "dlrm": EvalMetric("AUC", "higher"),
    "dlrm_dcnv2": EvalMetric("AUC", "higher"),
    "dlrmv4": EvalMetric(_ACCURACY, "higher"),
    "deepseekv3_671b": _LOG_PERPLEXITY,
    "flux1": EvalMetric("validation loss", "lower"),
    "gnmt": EvalMetric("BLEU", "higher"),
    "gnn": EvalMetric("classification accuracy", "higher"),
    "gpt3": _LOG_PERPLEXITY,
    "gpt_oss_20b": _LOG_PERPLEXITY,
    "llama2_70b_lora": EvalMetric("eval loss", "lower"),
    "llama31_405b": _LOG_PERPLEXITY,
    "llama31_8b": _LOG_PERPLEXITY,
    "maskrcnn": EvalMetric("box mAP", "higher", value_key="BBOX"),
    "minigo": EvalMetric("win rate", "higher"),
    "qwen35_397b_grpo": EvalMetric(_ACCURACY, "higher"),
    "resnet": EvalMetric("top-1 accuracy", "higher"),
    "retinanet": EvalMetric("mAP", "higher"),
    "rgat": EvalMetric("classification accuracy", "higher"),
    "rnnt": EvalMetric("word error rate", "lower"),
    "ssd": EvalMetric("mAP", "higher"),
    "stable_diffusion": EvalMetric("FID", "lower", metadata_metric="FID"),
    "transformer": EvalMetric("BLEU", "higher"),
    "unet3d": EvalMetric("mean DICE", "higher"),
}


def eval_metric(benchmark: str | None) -> EvalMetric:
    """The metric behind `benchmark`'s eval_accuracy; the bare key, no direction, when unknown."""
    return EVAL_METRICS.get(benchmark or "", EvalMetric(_ACCURACY, None))
