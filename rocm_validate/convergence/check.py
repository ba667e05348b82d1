"""The convergence gate: train a candidate's seeds, hand its run set to MLPerf's RCP checker
with the device's mini-BERT RCPs, and turn what the checker says into a verdict.

MLPerf's RCP test is one-sided: it fails a run set that converges *faster* than the reference
allows (mean samples below the checker's "Min Epochs", from a one-sided t-test at alpha 0.05)
and lets slower sets pass, because slowness already costs them time-to-train. A validation gate
must also catch a stack that converges *worse*, so the gate adds the mirror image of the
checker's own bound: a set fails as too slow when its olympic mean exceeds the RCP mean times
the checker's "Max Speedup". Both bounds are the checker's numbers; none is computed here.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_validate.convergence.mlperf import RunSetScore
from rocm_validate.core.requirements import fp8_skip_reason
from rocm_validate.errors import ReferenceFailed
from rocm_validate.results.metrics import Verdict

if TYPE_CHECKING:
    from rocm_validate.convergence.minibert import (
        Candidate,
        MiniBertSpec,
        Progress,
        Trainer,
    )
    from rocm_validate.convergence.rcps import StoredRcp
    from rocm_validate.platform.devices import DeviceInfo

VERDICTS = (Verdict.PASS, Verdict.TOO_FAST, Verdict.TOO_SLOW, Verdict.NOT_CONVERGED, Verdict.NO_VERDICT)
OLYMPIC_DROPS = 1  # runs olympic scoring may lose (BERT): a second unconverged run fails the set
TRAINED_GLOB = "trained_*.json"  # beside each result_<seed>.txt: which GPU trained it, and how it ended
# A GPU whose runs converge this many combined standard errors (the RCPs' run-to-run spread over
# each side's run count) later than its peers' is named: 3.5 keeps a node of 8 GPUs from naming
# a healthy one by chance more than about once in a thousand runs.
PEER_Z = 3.5
IQR_PER_SD = 1.349  # a metric's dispersion is a relative IQR; the RCP spread is a standard deviation


@dataclass(frozen=True)
class TrainedRun:
    """One run of a (possibly shared) run set: its seed, where it stopped, who trained it."""

    candidate: str
    seed: int
    converged: bool
    samples: int
    trained_on: str  # 'GPU 1 (BDF 0000:02:00.0)', or the device of a one-device run
    gpu: int | None = None  # the GPU's index in a whole-node run

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "seed": self.seed,
            "converged": self.converged,
            "samples": self.samples,
            "trained_on": self.trained_on,
            "gpu": self.gpu,
        }


def read_trained(folder: Path) -> list[TrainedRun]:
    """The runs recorded under `folder` (one candidate's, or every candidate's below it), by seed."""
    found = [TrainedRun(**json.loads(p.read_text())) for p in sorted(folder.rglob(TRAINED_GLOB))]
    return sorted(found, key=lambda r: (r.candidate, r.seed))


def missing_seeds(seeds: int, trained: Iterable[TrainedRun]) -> list[int]:
    """The seeds 0..seeds-1 with no run yet; none when the runs already fail the set (more misses
    than olympic scoring drops: training stops there, as in a one-device run)."""
    runs = list(trained)
    if sum(not r.converged for r in runs) > OLYMPIC_DROPS:
        return []
    have = {r.seed for r in runs}
    return [seed for seed in range(seeds) if seed not in have]


def missed_on_one_gpu(trained: Iterable[TrainedRun]) -> str:
    """'the runs that missed the target were all trained on GPU 1 (...)' when the misses of a
    set trained by several GPUs all come from one of them (empty otherwise)."""
    runs = list(trained)
    missed = {r.trained_on for r in runs if not r.converged}
    if len(missed) != 1 or len({r.trained_on for r in runs}) < 2:
        return ""
    return f"the runs that missed the target were all trained on {missed.pop()}: compare it with its peers"


def placement(trained: Iterable[TrainedRun]) -> str:
    """'seeds by GPU: GPU 0: 0, 2, 4; GPU 1: 1, 3' (empty when one device trained them all)."""
    by_where: dict[str, list[int]] = {}
    for run in trained:
        by_where.setdefault(run.trained_on, []).append(run.seed)
    if len(by_where) < 2:
        return ""
    return "seeds by GPU: " + "; ".join(f"{where}: {', '.join(map(str, sorted(s)))}" for where, s in by_where.items())


@dataclass(frozen=True)
class GpuRuns:
    """A GPU's runs of every candidate, for the comparison with its peers' runs."""

    gpu: int | None
    trained_on: str
    runs: int
    mean_samples: float  # a run that missed the target counts with the samples it stopped at
    dispersion: float  # the relative IQR of that mean implied by the RCPs' run-to-run spread


def gpu_runs(trained: Iterable[TrainedRun], rcp_samples: Sequence[int]) -> list[GpuRuns]:
    """Each GPU's mean samples to converge over all its runs, with the noise of that mean: every
    candidate should converge like the reference, and each GPU trains a few seeds of each, so a
    GPU whose runs converge later than its peers' points at that GPU, not at a candidate."""
    mean = statistics.fmean(rcp_samples)
    spread = statistics.stdev(rcp_samples) / mean if len(rcp_samples) > 1 and mean > 0 else 0.0
    groups: dict[tuple[int | None, str], list[int]] = {}
    for run in trained:
        groups.setdefault((run.gpu, run.trained_on), []).append(run.samples)
    return [
        GpuRuns(gpu, where, len(samples), statistics.fmean(samples), IQR_PER_SD * spread / math.sqrt(len(samples)))
        for (gpu, where), samples in sorted(groups.items(), key=lambda item: (item[0][0] is None, item[0][0] or 0))
    ]


def peer_band(own: float | None, peer: float | None) -> tuple[float, str]:
    """How much later than its peers' a GPU's runs may converge: PEER_Z combined standard errors."""
    noise = math.sqrt(sum((d or 0.0) ** 2 for d in (own, peer))) / IQR_PER_SD
    allowed = PEER_Z * noise
    return allowed, f"{allowed:.1%} = {PEER_Z:g} x the RCPs' run-to-run spread over both sides' runs ({noise:.1%})"


@dataclass(frozen=True)
class ConvergenceVerdict:
    """How one candidate's run set compares with the reference convergence points."""

    candidate: str
    verdict: Verdict  # one of VERDICTS
    message: str
    samples: tuple[int | None, ...]  # per seed; None for a run that did not converge
    olympic_mean_samples: float | None
    rcp_mean_samples: float | None
    fastest_allowed: float | None  # the checker's Min Epochs
    slowest_allowed: float | None  # the mirror bound: RCP mean x Max Speedup
    rcp_pass: bool  # the official verdict
    rcp_message: str
    normalization_factor: float | None
    results_dir: str

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.PASS

    @property
    def ratio(self) -> float | None:
        """Olympic-mean samples over the RCP mean: above 1 converges slower than the reference."""
        if self.olympic_mean_samples is None or not self.rcp_mean_samples:
            return None
        return self.olympic_mean_samples / self.rcp_mean_samples

    def extra(self) -> dict[str, Any]:
        """Details for the metric record and the report."""
        return {
            "samples_per_seed": list(self.samples),
            "fastest_allowed": self.fastest_allowed,
            "slowest_allowed": self.slowest_allowed,
            "rcp_pass": self.rcp_pass,
            "rcp_message": self.rcp_message,
            "normalization_factor": self.normalization_factor,
            "results_dir": self.results_dir,
        }


def judge(candidate: str, score: RunSetScore, rescore_command: str) -> ConvergenceVerdict:
    """The gate's verdict on a scored run set (pure: everything comes from the score)."""
    record = score.rcp.record or {}
    mean = record.get("mean")
    fastest = record.get("min_acceptable_mean")
    slowest = mean * record["max_speedup"] if mean is not None and "max_speedup" in record else None
    observed = score.olympic_mean_to_converge
    samples = tuple(int(r.to_converge) if r.converged and r.to_converge is not None else None for r in score.runs)
    unconverged = samples.count(None)
    spread = _describe_samples(samples)
    if unconverged > OLYMPIC_DROPS or score.rcp.message == "Insufficient convergence" or observed is None:
        verdict = Verdict.NOT_CONVERGED
        detail = f"{unconverged} of {len(samples)} runs did not reach the target (olympic scoring drops at most {OLYMPIC_DROPS})"
    elif not score.rcp.passed and fastest is not None and observed < fastest:
        verdict = Verdict.TOO_FAST
        detail = (
            f"olympic mean {observed:,.0f} samples is below the fastest mean the RCPs allow, {fastest:,.0f} "
            f"(RCP mean {mean:,.0f}): suspiciously fast convergence, e.g. labels leaking into the inputs"
        )
    elif not score.rcp.passed:
        verdict = Verdict.NO_VERDICT
        detail = f"MLPerf's RCP checker failed the set: {score.rcp.message}"
    elif slowest is not None and observed > slowest:
        verdict = Verdict.TOO_SLOW
        detail = (
            f"olympic mean {observed:,.0f} samples is above the slowest mean the gate allows, {slowest:,.0f} "
            f"(RCP mean {mean:,.0f} x max speedup {record['max_speedup']:.4f}): converges worse than the reference"
        )
    else:
        verdict = Verdict.PASS
        detail = f"olympic mean {observed:,.0f} samples, RCP mean {mean:,.0f} ({score.rcp.message})"
    message = "; ".join([f"{candidate}: {verdict}: {detail}", f"samples per seed: {spread}", *score.messages])
    if verdict != Verdict.PASS:
        message += f"; inspect the runs with: {rescore_command}"
    return ConvergenceVerdict(
        candidate=candidate,
        verdict=verdict,
        message=message,
        samples=samples,
        olympic_mean_samples=observed,
        rcp_mean_samples=mean,
        fastest_allowed=fastest,
        slowest_allowed=slowest,
        rcp_pass=score.rcp.passed,
        rcp_message=score.rcp.message,
        normalization_factor=score.rcp.normalization_factor,
        results_dir=score.folder,
    )


def _describe_samples(samples: tuple[int | None, ...]) -> str:
    return ", ".join("not converged" if s is None else f"{s:,}" for s in samples)


def check_run_set(candidate: str, folder: Path, rcp_file: Path, ruleset: str) -> ConvergenceVerdict:
    """Score a candidate's result files against the RCP file and judge them."""
    from rocm_validate.convergence.mlperf import score_run_set

    score = score_run_set(folder, ruleset, rcp_file, compliance=False)
    return judge(candidate, score, rescore_command(folder, rcp_file, ruleset))


def rescore_command(folder: Path, rcp_file: Path, ruleset: str) -> str:
    """The command that shows a run set's full score, per run."""
    import shlex

    return shlex.join(["rocm-validate", "mlperf-score", str(folder), "--rcp", str(rcp_file), "--ruleset", ruleset])


def candidate_skip_reason(candidate: Candidate, device: DeviceInfo) -> str | None:
    """Why a candidate cannot run on this device (need vs found), or None."""
    return fp8_skip_reason(device) if candidate.fp8_linear else None


@dataclass(frozen=True)
class RecordedRcp:
    """RCPs written by a reference recording."""

    path: Path
    samples: tuple[int, ...]
    seconds: float
    previous_mean: float | None = None  # the mean of the RCPs it replaced, if any


@dataclass
class MiniBertCheck:
    """The built-in RCP benchmark on one device: records the reference's convergence points,
    then trains each candidate's seeds and judges them against those points."""

    spec: MiniBertSpec
    device: DeviceInfo
    torch_device: Any
    rcp_file: Path
    record_command: str  # records this device's RCPs (named when they are missing or stale)
    seeds: int
    workdir: Path
    ruleset: str
    progress: Progress
    # Why new reference runs that fail the stored RCPs must not replace them, or None when
    # --rocm-accept-regressions lets them (rocm_validate.core.commands.Commands.refusal).
    refusal: Callable[[str], str | None]

    @property
    def system(self) -> str:
        """The system trained on, as MLLOG's submission_platform and the RCPs' Platform name it."""
        where = f"{self.device.name} ({self.device.arch})" if self.device.is_gpu else f"CPU {self.device.name}"
        return f"{where}, torch {self.device.torch_version}"

    def _trainer(self, candidate: Candidate) -> Trainer:
        from rocm_validate.convergence.minibert import Trainer

        return Trainer(self.spec, candidate, self.torch_device, self.device.fp8_formats, self.system, self.progress)

    def skip_reason(self, candidate: Candidate) -> str | None:
        return candidate_skip_reason(candidate, self.device)

    def rcp(self) -> StoredRcp:
        """The RCPs this run checks against: this device's own (recorded with --update-baselines)
        when they match this definition, else those shipped for the preset. Raises
        RcpUnavailable when neither matches, JsonFileError for a corrupt device file."""
        from rocm_validate.convergence.rcps import load_rcp, shipped_rcp_path
        from rocm_validate.errors import RcpUnavailable

        try:
            return load_rcp(self.rcp_file, self.spec, self.record_command)
        except RcpUnavailable as missing:
            try:
                return load_rcp(shipped_rcp_path(self.spec), self.spec, self.record_command)
            except RcpUnavailable:
                raise missing from None

    def train(
        self, candidate: Candidate, seeds: Sequence[int], trained_on: str, gpu: int | None = None
    ) -> list[TrainedRun]:
        """Train `seeds` of the candidate's run set (all of it, or this GPU's share) into its
        folder, each result file with a note of who trained it."""
        folder = self.workdir / candidate.name
        outcomes = self._trainer(candidate).run_seeds(seeds, folder, tolerated_failures=OLYMPIC_DROPS, of=self.seeds)
        runs = [TrainedRun(candidate.name, o.seed, o.converged, o.samples, trained_on, gpu) for o in outcomes]
        for run in runs:
            (folder / f"trained_{run.seed}.json").write_text(json.dumps(run.to_dict()))
        return runs

    def check(self, candidate: Candidate, trained_on: str = "", gpu: int | None = None) -> ConvergenceVerdict:
        """Judge the candidate's run set (seeds 0..N-1, the first of the reference's): the runs
        every GPU trained, pooled; seeds nobody trained (none ran, or a GPU's share did not
        finish) are trained here first, unless the runs already fail the set."""
        folder = self.workdir / candidate.name
        folder.mkdir(parents=True, exist_ok=True)
        missing = missing_seeds(self.seeds, read_trained(folder))
        if missing:
            self.train(candidate, missing, trained_on, gpu)
        verdict = check_run_set(candidate.name, folder, self.rcp().path, self.ruleset)
        trained = read_trained(folder)
        notes = [placement(trained), "" if verdict.passed else missed_on_one_gpu(trained)]
        return replace(verdict, message="; ".join([verdict.message, *filter(None, notes)]))

    def record_reference(self, creator: str, when: str) -> RecordedRcp:
        """Train the reference for twice the seeds (as MLPerf references do) and write the RCPs.

        Nothing is written unless every run converged and the runs differ (a spread of zero
        would let the RCP checker accept no speed-up at all).
        """
        from rocm_validate.convergence.minibert import REFERENCE
        from rocm_validate.convergence.rcps import build_rcp, write_rcp

        runs = self._trainer(REFERENCE).run_seeds(
            range(2 * self.seeds), self.workdir / "reference-rcp", tolerated_failures=0
        )
        failed = [r.seed for r in runs if not r.converged]
        if failed:
            raise ReferenceFailed(
                f"reference runs for seeds {failed} did not reach accuracy {self.spec.target_accuracy} in "
                f"{self.spec.max_steps} steps; RCPs not written to {self.rcp_file} (the stack fails the fp32 reference)"
            )
        samples = tuple(r.samples for r in runs)
        if len(set(samples)) == 1:
            raise ReferenceFailed(
                f"all {len(runs)} reference runs converged at {samples[0]} samples; without a spread the RCP "
                f"test accepts no speed-up at all; RCPs not written to {self.rcp_file}"
            )
        previous = self._refuse_a_regression(self.workdir / "reference-rcp")
        write_rcp(self.rcp_file, build_rcp(self.spec, samples, creator, when, self.system))
        return RecordedRcp(self.rcp_file, samples, sum(r.seconds for r in runs), previous)

    def _refuse_a_regression(self, folder: Path) -> float | None:
        """The stored RCP mean, after checking the new reference runs against the stored RCPs:
        runs that fail them are not written (ReferenceFailed) unless --rocm-accept-regressions."""
        from rocm_validate.errors import RcpUnavailable

        try:
            stored = self.rcp()
        except RcpUnavailable:
            return None  # nothing recorded for this definition yet: nothing to regress from
        previous = sum(stored.samples) / len(stored.samples)
        verdict = check_run_set("reference", folder, stored.path, self.ruleset)
        refused = None
        if not verdict.passed:
            refused = self.refusal(
                f"the new reference runs fail the RCPs in force, {stored.path} ({verdict.verdict}: olympic mean "
                f"{verdict.olympic_mean_samples or 0:,.0f} samples vs the RCP mean {previous:,.0f}); the stored "
                f"RCPs are kept"
            )
        if refused is not None:
            raise ReferenceFailed(refused)
        return previous
