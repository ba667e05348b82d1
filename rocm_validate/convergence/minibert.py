"""mini-BERT: a minutes-long MLPerf-style BERT masked-LM pretraining on a generated corpus.

It is MLPerf BERT in miniature: a real transformers `BertForMaskedLM` (random init, no
downloads) trained with AdamW and a warmup + linear-decay schedule until its masked-LM accuracy
on a fixed held-out set reaches a target, writing an MLLOG result file per run with the keys
MLPerf BERT logs. The corpus has structure to learn at two levels, so the model has to do what
BERT does: each sequence is a walk through one topic's word-transition table, so a masked word
is predictable from the topic (seen in the whole sequence, through attention) and from its
neighbours (through attention to nearby positions). Learning those is abrupt and happens at a
step that depends on the seed; that is the spread of samples-to-converge an RCP describes.

Everything random is drawn on the CPU from fixed seeds: the corpus, the held-out set and its
masks are the same for every run, and seed `s` gives the same initial weights and the same
batches on every device and in every candidate configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from rocm_validate.convergence.mlperf import mllog_writer
from rocm_validate.errors import LibraryMissing
from rocm_validate.workloads import fp8, fp8_recipes
from rocm_validate.workloads.fp8_recipes import Fp8Recipe

PAD, CLS, SEP, MASK = 0, 1, 2, 3
FIRST_WORD = 4
BENCHMARK = "bert"  # what the MLLOG files say: it is a BERT masked-LM pretraining
MARKER = "mini-bert"  # logged as rocm_validate_benchmark: which BERT it is


@dataclass(frozen=True)
class CorpusSpec:
    """The generated language: topics, their words and their word-transition tables."""

    vocab_size: int  # including the four special tokens
    topics: int
    words_per_topic: int
    successors: int  # words that may follow a word, within its topic (Zipf-weighted)
    seq_len: int
    train_sequences: int
    eval_sequences: int
    masked_per_sequence: int  # MLPerf BERT masks a fixed number of positions per sequence
    seed: int = 5

    def __post_init__(self) -> None:
        words = self.vocab_size - FIRST_WORD
        if not 1 <= self.successors <= self.words_per_topic <= words:
            raise ValueError(f"corpus needs 1 <= successors <= words_per_topic <= {words} words, found {self}")
        if not 1 <= self.masked_per_sequence < self.seq_len:
            raise ValueError(
                f"masked_per_sequence must lie in [1, {self.seq_len - 1}], found {self.masked_per_sequence}"
            )


@dataclass(frozen=True)
class MiniBertSpec:
    """One size of the benchmark: corpus, model, optimizer schedule and target."""

    name: str
    corpus: CorpusSpec
    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    max_steps: int  # the schedule decays to zero here; a run not at target by then did not converge
    eval_every: int  # steps between evaluations
    target_accuracy: float  # masked-LM accuracy on the held-out set
    weight_decay: float = 0.01
    seeds: int = 10  # runs per check, like MLPerf BERT's 10

    def __post_init__(self) -> None:
        if self.corpus.eval_sequences % self.batch_size:
            raise ValueError(
                f"eval_sequences ({self.corpus.eval_sequences}) must be a multiple of batch_size ({self.batch_size}): one shape for every evaluation chunk"
            )
        if not 0 < self.warmup_steps < self.max_steps:
            raise ValueError(f"warmup_steps must lie in (0, max_steps={self.max_steps}), found {self.warmup_steps}")

    def fingerprint(self) -> str:
        """Changes whenever anything that shapes convergence changes; stored with the RCPs."""
        data = asdict(self)
        data.pop("seeds")
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"

    def hyperparameters(self) -> dict[str, Any]:
        """What the RCP file records as the reference's hyperparameters."""
        return {
            "mini_bert": self.fingerprint(),
            "opt_name": "adamw",
            "opt_base_learning_rate": self.learning_rate,
            "opt_learning_rate_warmup_steps": self.warmup_steps,
            "opt_learning_rate_training_steps": self.max_steps,
            "opt_adamw_weight_decay": self.weight_decay,
            "eval_every_steps": self.eval_every,
            "target_accuracy": self.target_accuracy,
            "hidden_size": self.hidden_size,
            "layers": self.layers,
            "vocab_size": self.corpus.vocab_size,
            "seq_len": self.corpus.seq_len,
        }


PRESETS: dict[str, MiniBertSpec] = {
    "gpu": MiniBertSpec(
        name="gpu",
        corpus=CorpusSpec(
            vocab_size=1024,
            topics=256,
            words_per_topic=4,
            successors=4,
            seq_len=64,
            train_sequences=65536,
            eval_sequences=1024,
            masked_per_sequence=10,
        ),
        hidden_size=128,
        layers=2,
        heads=2,
        intermediate_size=512,
        batch_size=128,
        learning_rate=2e-3,
        warmup_steps=30,
        max_steps=400,
        eval_every=5,
        target_accuracy=0.33,
        seeds=10,
    ),
    "cpu": MiniBertSpec(
        name="cpu",
        corpus=CorpusSpec(
            vocab_size=68,
            topics=8,
            words_per_topic=4,
            successors=4,
            seq_len=32,
            train_sequences=8192,
            eval_sequences=256,
            masked_per_sequence=5,
        ),
        hidden_size=64,
        layers=2,
        heads=2,
        intermediate_size=256,
        batch_size=32,
        learning_rate=3e-3,
        warmup_steps=10,
        max_steps=160,
        eval_every=5,
        target_accuracy=0.30,
        seeds=5,
    ),
}


def preset_for(backend: str) -> MiniBertSpec:
    """The GPU size on any GPU (ROCm or CUDA), the CI size on the CPU."""
    return PRESETS["cpu" if backend == "cpu" else "gpu"]


# --- corpus -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedBatch:
    """Inputs with masked positions, which positions, and the words that were there."""

    inputs: torch.Tensor  # [B, S] token ids
    positions: torch.Tensor  # [B, P] masked positions
    labels: torch.Tensor  # [B, P] original words

    def to(self, device: torch.device) -> MaskedBatch:
        return MaskedBatch(*(t.to(device, non_blocking=True) for t in (self.inputs, self.positions, self.labels)))

    def split(self, size: int) -> Iterator[MaskedBatch]:
        for start in range(0, self.inputs.shape[0], size):
            end = start + size
            yield MaskedBatch(self.inputs[start:end], self.positions[start:end], self.labels[start:end])


@dataclass(frozen=True)
class Corpus:
    """Training sequences and the fixed, already masked held-out set."""

    train: torch.Tensor  # [N, S]
    held_out: MaskedBatch


def generate_sequences(spec: CorpusSpec, count: int, generator: torch.Generator) -> torch.Tensor:
    """`count` sequences [CLS] w1 ... w(S-1), each a walk through one topic's transition table."""
    tables = torch.Generator().manual_seed(spec.seed)
    words = spec.vocab_size - FIRST_WORD
    vocabulary = torch.stack(
        [torch.randperm(words, generator=tables)[: spec.words_per_topic] for _ in range(spec.topics)]
    )
    follow = torch.stack(
        [
            torch.stack(
                [
                    torch.randperm(spec.words_per_topic, generator=tables)[: spec.successors]
                    for _ in range(spec.words_per_topic)
                ]
            )
            for _ in range(spec.topics)
        ]
    )  # [topics, words_per_topic, successors]: indices into the topic's vocabulary
    weights = 1.0 / torch.arange(1, spec.successors + 1, dtype=torch.float64)
    topic = torch.randint(spec.topics, (count,), generator=generator)
    choice = torch.multinomial(weights, count * spec.seq_len, replacement=True, generator=generator).view(
        count, spec.seq_len
    )
    walk = torch.empty(count, spec.seq_len, dtype=torch.long)
    walk[:, 0] = torch.randint(spec.words_per_topic, (count,), generator=generator)
    for i in range(1, spec.seq_len):
        walk[:, i] = follow[topic, walk[:, i - 1], choice[:, i]]
    ids = vocabulary[topic.unsqueeze(1), walk] + FIRST_WORD
    ids[:, 0] = CLS
    return ids


def mask_batch(ids: torch.Tensor, masked: int, vocab_size: int, generator: torch.Generator) -> MaskedBatch:
    """BERT masking of exactly `masked` words per sequence: 80% [MASK], 10% a random word, 10% kept."""
    batch, length = ids.shape
    positions = torch.rand(batch, length - 1, generator=generator).topk(masked, dim=1).indices + 1
    labels = ids.gather(1, positions)
    roll = torch.rand(batch, masked, generator=generator)
    random_words = torch.randint(FIRST_WORD, vocab_size, (batch, masked), generator=generator)
    shown = torch.where(roll < 0.8, torch.full_like(labels, MASK), torch.where(roll < 0.9, random_words, labels))
    return MaskedBatch(ids.scatter(1, positions, shown), positions, labels)


@lru_cache(maxsize=2)
def generate_corpus(spec: CorpusSpec) -> Corpus:
    """The corpus of a spec; the same on every call, machine and device."""
    generator = torch.Generator().manual_seed(spec.seed + 1)
    train = generate_sequences(spec, spec.train_sequences, generator)
    held_out = generate_sequences(spec, spec.eval_sequences, generator)
    return Corpus(train, mask_batch(held_out, spec.masked_per_sequence, spec.vocab_size, generator))


def training_batch(corpus: Corpus, spec: MiniBertSpec, generator: torch.Generator) -> MaskedBatch:
    """The next batch of a seed's stream: sequences drawn with replacement, freshly masked."""
    rows = torch.randint(corpus.train.shape[0], (spec.batch_size,), generator=generator)
    return mask_batch(corpus.train[rows], spec.corpus.masked_per_sequence, spec.corpus.vocab_size, generator)


# --- model ----------------------------------------------------------------------------------------


def build_bert(spec: MiniBertSpec, seed: int) -> torch.nn.Module:
    """transformers' BertForMaskedLM at this spec's size, initialised from `seed` on the CPU."""
    from transformers import BertConfig, BertForMaskedLM

    make_config: Any = BertConfig  # Any: its typed signature leaves out attn_implementation
    config = make_config(
        vocab_size=spec.corpus.vocab_size,
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.corpus.seq_len,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=PAD,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForMaskedLM(config)


class MaskedLM(torch.nn.Module):
    """BERT's encoder and MLM head, the head applied only at the masked positions (as MLPerf
    BERT gathers them), so every shape is static and torch.compile builds one graph."""

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert: Any = bert  # transformers' BertForMaskedLM: its .bert and .cls

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = self.bert.bert(input_ids=inputs).last_hidden_state
        picked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        return self.bert.cls(picked)


# --- candidates -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A training configuration checked against the reference's convergence points."""

    name: str
    description: str
    autocast: str | None = None  # "bfloat16" runs forward and loss under autocast
    fused_optimizer: bool = False
    compile: bool = False
    fp8_linear: bool = False
    lr_scale: float = 1.0  # multiplies the learning rate (1.0 in every shipped candidate)


REFERENCE = Candidate("reference", "fp32, for-loop AdamW, eager: the configuration the RCPs are recorded with")
CANDIDATES: tuple[Candidate, ...] = (
    REFERENCE,
    Candidate("bf16-autocast", "bf16 autocast for forward and loss, fp32 weights", autocast="bfloat16"),
    Candidate("fused-adamw", "fused AdamW kernel", fused_optimizer=True),
    Candidate("torch-compile", "torch.compile of the model (compiled once, re-initialised per seed)", compile=True),
    Candidate(
        "fp8-linear",
        "FP8 linear layers in the device's FP8 formats: torchao's tensor-wise float8 training where torchao is "
        "installed and the device has _scaled_mm, else rocm_validate's delayed-scaling recipe",
        fp8_linear=True,
    ),
)


def fp8_training_recipe(device: torch.device) -> Fp8Recipe:
    """The FP8 recipe the fp8-linear candidate trains with: torchao's tensor-wise recipe, as users
    run FP8 training, where torchao is installed and `_scaled_mm` runs on a GPU; the project's
    delayed-scaling recipe otherwise (it emulates the FP8 GEMM where there is no `_scaled_mm`, and
    on the CPU: `fp8_matmul`). An installed torchao that fails to import raises."""
    if device.type == "cpu" or not fp8.scaled_mm_usable(device.type, device.index):
        return fp8_recipes.RECIPES[fp8_recipes.PROJECT_RECIPE]
    try:
        fp8_recipes.import_library("torchao.float8")
    except LibraryMissing:
        return fp8_recipes.RECIPES[fp8_recipes.PROJECT_RECIPE]
    return fp8_recipes.RECIPES["torchao-tensorwise"]


def fp8_matmul(device: torch.device) -> str:
    """The project recipe's FP8 GEMM: on the CPU the float32 product of the same FP8 operands and
    scales. torch 2.13's CPU `_scaled_mm` is a reference kernel: 0.85 s for a 1024x64x256 product
    on one thread, against 2 ms emulated, so one CI-sized run took 30 min (its numerics are checked
    by the correctness suite, not by training on it). `_scaled_mm` wherever a GPU has it."""
    return "emulated" if device.type == "cpu" else "auto"


# --- training -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOutcome:
    """One training run: where it stopped and what it logged."""

    seed: int
    converged: bool
    samples: int  # samples trained when the run stopped
    steps: int
    accuracy: float  # the last evaluation
    seconds: float  # run_start to run_stop
    path: Path
    curve: tuple[tuple[int, float], ...] = field(default=(), repr=False)  # (samples, accuracy) per evaluation
    weights: str = ""  # digest of the trained weights: two candidates' runs of one seed never share it


def weights_digest(module: torch.nn.Module) -> str:
    """sha256 of every parameter's bytes: equal only for bit-identical training (samples to
    converge, counted at evaluations, can agree between candidates whose weights differ)."""
    digest = hashlib.sha256()
    for name, parameter in sorted(module.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


Progress = Callable[[str, bool], None]  # (line, final): final lines end a run


def _no_progress(line: str, final: bool) -> None:
    """Progress sink for runs nobody watches."""


class Trainer:
    """Trains one candidate of one spec on one device, seed after seed.

    A torch.compile candidate is built and compiled once and re-initialised per seed (weights
    copied in place, a new optimizer), so compilation is paid once per check, not per seed.
    """

    def __init__(
        self,
        spec: MiniBertSpec,
        candidate: Candidate,
        device: torch.device,
        fp8_formats: tuple[str, ...] = (),
        system: str = "",  # MLLOG's submission_platform: the device and stack trained on
        progress: Progress = _no_progress,
    ) -> None:
        self.spec = spec
        self.candidate = candidate
        self.device = device
        self.fp8_formats = fp8_formats
        self.system = system
        self.progress = progress
        self.corpus = generate_corpus(spec.corpus)
        self.held_out = self.corpus.held_out.to(device)
        self._compiled: tuple[MaskedLM, Callable[..., torch.Tensor]] | None = None
        self.fp8_recipe = fp8_training_recipe(device) if candidate.fp8_linear else None

    @property
    def label(self) -> str:
        """The candidate's name, with the FP8 recipe it trains with: 'fp8-linear (torchao-tensorwise)'."""
        if self.fp8_recipe is None:
            return self.candidate.name
        emulated = ", emulated GEMM" if fp8_matmul(self.device) == "emulated" else ""
        return f"{self.candidate.name} ({self.fp8_recipe.name}{emulated})"

    def model_for(self, seed: int) -> tuple[MaskedLM, Callable[..., torch.Tensor]]:
        """The model initialised from `seed`, and the callable that runs it."""
        fresh = build_bert(self.spec, seed)
        if self.candidate.compile:
            if self._compiled is None:
                module = MaskedLM(fresh.to(self.device))
                self._compiled = (module, torch.compile(module))
                self._warm_up(*self._compiled)
            self._compiled[0].bert.load_state_dict(fresh.state_dict())
            return self._compiled
        module = MaskedLM(fresh.to(self.device))
        if (
            self.fp8_recipe is not None
            and fp8_recipes.convert(module.bert, self.fp8_recipe, self.fp8_formats, matmul=fp8_matmul(self.device)) == 0
        ):
            raise RuntimeError(f"{self.fp8_recipe.name} replaced no nn.Linear in mini-BERT")
        return module, module

    def _warm_up(self, module: MaskedLM, run: Callable[..., torch.Tensor]) -> None:
        """Compile the training and the evaluation graphs during init, as MLPerf submissions do,
        so compilation is not timed as training; leaves no gradient behind."""
        batch = training_batch(self.corpus, self.spec, torch.Generator().manual_seed(0)).to(self.device)
        with self._autocast():
            run(batch.inputs, batch.positions).float().sum().backward()
        module.zero_grad(set_to_none=True)
        self.evaluate(run, module)

    def _optimizer(self, module: MaskedLM) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
        spec = self.spec
        implementation: dict[str, Any] = {"fused": True} if self.candidate.fused_optimizer else {"foreach": False}
        optimizer = torch.optim.AdamW(
            module.parameters(),
            lr=spec.learning_rate * self.candidate.lr_scale,
            weight_decay=spec.weight_decay,
            **implementation,
        )

        def factor(step: int) -> float:
            if step < spec.warmup_steps:
                return (step + 1) / spec.warmup_steps
            return max(0.0, (spec.max_steps - step) / (spec.max_steps - spec.warmup_steps))

        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.candidate.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, self.candidate.autocast))

    def evaluate(self, run: Callable[..., torch.Tensor], module: MaskedLM) -> float:
        """Masked-LM accuracy on the held-out set."""
        module.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        with torch.no_grad(), self._autocast():
            for part in self.held_out.split(self.spec.batch_size):
                correct += (run(part.inputs, part.positions).argmax(-1) == part.labels).sum()
        module.train()
        return correct.item() / self.held_out.labels.numel()

    def run(self, seed: int, path: Path, of: int = 1) -> RunOutcome:
        """Train from `seed` (of `of` seeds, for progress lines) until the target accuracy or
        max_steps; write result file `path`."""
        spec = self.spec
        label = f"{self.label} seed {seed + 1}/{of}"
        with mllog_writer(path) as log, _matmul_precision("highest"), _cpu_threads(self.device, 1):
            log.event("cache_clear", True)
            log.start("init_start")
            self._log_submission(log, seed)
            module, run = self.model_for(seed)
            optimizer, schedule = self._optimizer(module)
            batches = torch.Generator().manual_seed(1_000_003 * (seed + 1))
            log.end("init_stop")
            log.start("run_start")
            started = time.perf_counter()
            curve: list[tuple[int, float]] = []
            accuracy, step, converged, diverged = 0.0, 0, False, False
            for step in range(1, spec.max_steps + 1):
                if (step - 1) % spec.eval_every == 0:
                    log.start("block_start", metadata={"samples_count": (step - 1) * spec.batch_size})
                loss = self._step(run, optimizer, schedule, training_batch(self.corpus, spec, batches).to(self.device))
                if step % spec.eval_every and step != spec.max_steps:
                    continue
                accuracy = self._evaluation(log, run, module, step * spec.batch_size)
                curve.append((step * spec.batch_size, accuracy))
                diverged = not math.isfinite(loss.item())
                converged = accuracy >= spec.target_accuracy and not diverged
                self.progress(
                    f"{label}: step {step}/{spec.max_steps}, {step * spec.batch_size:,} samples, eval accuracy {accuracy:.4f}",
                    False,
                )
                if converged or diverged:
                    break
            samples = step * spec.batch_size
            log.event("train_samples", samples)
            log.end("run_stop", metadata={"status": "success" if converged else "aborted"})
            seconds = time.perf_counter() - started
        outcome = RunOutcome(
            seed, converged, samples, step, accuracy, seconds, path, tuple(curve), weights_digest(module)
        )
        if converged:
            verdict = f"converged at step {step}, {samples:,} samples"
        elif diverged:
            verdict = f"training loss is not finite at step {step}"
        else:
            verdict = f"did not reach {spec.target_accuracy} in {step} steps"
        self.progress(f"{label}: {verdict} (eval accuracy {accuracy:.4f}, {seconds:.1f} s)", True)
        return outcome

    def _step(
        self, run: Callable[..., torch.Tensor], optimizer: torch.optim.Optimizer, schedule: Any, batch: MaskedBatch
    ) -> torch.Tensor:
        """One optimizer step on `batch`; returns the loss (not synchronised)."""
        with self._autocast():
            logits = run(batch.inputs, batch.positions)
            loss = F.cross_entropy(logits.float().flatten(0, 1), batch.labels.flatten())
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def _evaluation(self, log: Any, run: Callable[..., torch.Tensor], module: MaskedLM, samples: int) -> float:
        """Close the training block, evaluate, and log it the way MLPerf BERT does."""
        log.end("block_stop", metadata={"samples_count": samples})
        log.start("eval_start", metadata={"epoch_num": samples})
        accuracy = self.evaluate(run, module)
        log.end("eval_stop", metadata={"epoch_num": samples})
        log.event("eval_accuracy", accuracy, metadata={"epoch_num": samples, "samples_count": samples})
        return accuracy

    def _log_submission(self, log: Any, seed: int) -> None:
        spec = self.spec
        for key, value in (
            ("submission_benchmark", BENCHMARK),
            ("submission_division", "open"),
            ("submission_org", "rocm-validate"),
            ("submission_platform", self.system or str(self.device)),
            ("submission_status", "research"),
            ("seed", seed),
            ("global_batch_size", spec.batch_size),
            ("gradient_accumulation_steps", 1),
            ("max_sequence_length", spec.corpus.seq_len),
            ("opt_name", "adamw"),
            ("opt_base_learning_rate", spec.learning_rate * self.candidate.lr_scale),
            ("opt_adamw_weight_decay", spec.weight_decay),
            ("opt_learning_rate_warmup_steps", spec.warmup_steps),
            ("opt_learning_rate_training_steps", spec.max_steps),
            ("eval_samples", spec.corpus.eval_sequences),
        ):
            log.event(key, value)
        log.event(
            "rocm_validate_benchmark",
            MARKER,
            metadata={
                "definition": spec.fingerprint(),
                "candidate": self.candidate.name,
                "label": self.label,
                "target_accuracy": spec.target_accuracy,
            },
        )

    def run_seeds(
        self, seeds: Sequence[int], folder: Path, tolerated_failures: int, of: int | None = None
    ) -> list[RunOutcome]:
        """One result_<seed>.txt per seed in `folder`, as an MLPerf run set (or this GPU's share
        of one: `seeds` out of `of`).

        Stops once more than `tolerated_failures` runs missed the target: the set has failed
        whatever the remaining seeds do, and a failing stack should not cost the full budget.
        """
        folder.mkdir(parents=True, exist_ok=True)
        total = len(seeds) if of is None else of
        outcomes: list[RunOutcome] = []
        for index, seed in enumerate(seeds):
            outcomes.append(self.run(seed, folder / f"result_{seed}.txt", total))
            failures = sum(not o.converged for o in outcomes)
            if failures > tolerated_failures and index + 1 < len(seeds):
                self.progress(
                    f"{self.label}: stopped after {index + 1} of {len(seeds)} seeds: {failures} runs missed "
                    f"the target, more than the {tolerated_failures} a run set may lose",
                    True,
                )
                break
        return outcomes


@contextlib.contextmanager
def _matmul_precision(precision: str) -> Iterator[None]:
    """fp32 means fp32: no TF32 for the run, whatever the process had set."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def _cpu_threads(device: torch.device, threads: int) -> Iterator[None]:
    """The CI-sized model's kernels are too small to share between threads: on a busy CPU
    one thread per run is faster and its timing steadier."""
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
