"""The built-in RCP benchmark: each candidate stack feature (bf16 autocast, fused AdamW,
torch.compile, FP8 linear) converges like the fp32 reference, by MLPerf's RCP check.

Record the device's RCPs once with --update-baselines (test_reference_records_convergence_points),
then every run checks the candidates against them. Convergence is a question about the stack, one
per node: in a whole-node run each GPU trains its share of every candidate's seeds (beside its
other numerics), and the verdicts, once every share is in, pool them exactly as one GPU's run of
the same seeds would be judged; each GPU's runs are compared with its peers' as well.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from rocm_validate import __version__
from rocm_validate.convergence.check import gpu_runs, read_trained
from rocm_validate.convergence.minibert import CANDIDATES
from rocm_validate.convergence.plugin import RUNS_METRIC, require_rcp, trained_here
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.session import run_state
from rocm_validate.errors import JsonFileError, ReferenceFailed
from rocm_validate.results.metrics import Verdict


def test_reference_records_convergence_points(mini_bert, pytestconfig, record_rocm_metric):
    if not run_state(pytestconfig).settings.update_baselines:
        pytest.skip("records the mini-BERT RCPs only under --update-baselines; found a checking run")
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        recorded = mini_bert.record_reference(f"rocm-validate {__version__}", when)
    except ReferenceFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    except JsonFileError as exc:  # the RCP file cannot be written: the stored RCPs are unchanged
        fail_as("configuration", str(exc), fix="free space or make the baselines folder writable, then record again")
    samples = sorted(recorded.samples)
    record_rocm_metric(
        "mini_bert.reference.samples_to_converge",
        sum(samples[1:-1]) / (len(samples) - 2),
        "samples",
        better="lower",
        samples=len(samples),
        verdict=Verdict.UPDATED,
        message=f"wrote {recorded.path}: {len(samples)} runs, {samples[0]:,} to {samples[-1]:,} samples, "
        f"{recorded.seconds:.0f} s of training; mean {_change(recorded.previous_mean, sum(samples) / len(samples))}",
        extra={"samples_per_seed": list(recorded.samples), "rcp_file": str(recorded.path)},
    )


EVERY_CANDIDATE = pytest.mark.parametrize(
    "candidate",
    [pytest.param(c, marks=pytest.mark.rocm_level("quick")) if c.name == "reference" else c for c in CANDIDATES],
    ids=lambda c: c.name,
)


@pytest.mark.rocm_shared(split=True)
@EVERY_CANDIDATE
def test_candidate_trains_its_share_of_the_seeds(candidate, mini_bert, rocm_share, pytestconfig):
    reason = mini_bert.skip_reason(candidate)
    if reason:
        pytest.skip(reason)
    require_rcp(pytestconfig, mini_bert)
    seeds = rocm_share.of(range(mini_bert.seeds), rotation=CANDIDATES.index(candidate))
    if not seeds:
        pytest.skip(f"no seed of {mini_bert.seeds} falls to GPU {rocm_share.position} of {rocm_share.count}")
    mini_bert.train(candidate, seeds, *trained_here(pytestconfig))


@EVERY_CANDIDATE
def test_candidate_converges_like_the_reference(candidate, mini_bert, pytestconfig, record_rocm_metric):
    reason = mini_bert.skip_reason(candidate)
    if reason:
        pytest.skip(reason)
    rcp = require_rcp(pytestconfig, mini_bert)
    verdict = mini_bert.check(candidate, *trained_here(pytestconfig))
    if verdict.olympic_mean_samples is not None:
        record_rocm_metric(
            f"mini_bert.{candidate.name}.samples_to_converge",
            verdict.olympic_mean_samples,
            "samples",
            better="lower",
            samples=len(verdict.samples),
            baseline=verdict.rcp_mean_samples,
            ratio=verdict.ratio,
            verdict=verdict.verdict,
            message=verdict.message,
            extra={**verdict.extra(), "rcp_file": str(rcp.path)},
        )
    assert verdict.passed, verdict.message


def test_every_gpu_converges_like_its_peers(mini_bert, pytestconfig, record_rocm_metric):
    """Records each GPU's mean samples to converge over its runs of every candidate; the node's
    peer comparison names a GPU whose runs converge later than its peers' (one device: recorded)."""
    rcp = require_rcp(pytestconfig, mini_bert)
    trained = read_trained(mini_bert.workdir)
    if not trained:
        pytest.skip("no mini-BERT runs in this session to compare; select the candidates' tests too")
    node = run_state(pytestconfig).node
    for runs in gpu_runs(trained, rcp.samples):
        record_rocm_metric(
            RUNS_METRIC,
            runs.mean_samples,
            "samples",
            better="lower",
            samples=runs.runs,
            dispersion=runs.dispersion,
            gpu=node.gpu_ref(runs.gpu) if node is not None and runs.gpu is not None else None,
            message=f"{runs.trained_on}: {runs.runs} runs of every candidate, mean {runs.mean_samples:,.0f} samples",
            extra={"trained_on": runs.trained_on, "rcp_file": str(rcp.path)},
        )


def _change(old: float | None, new: float) -> str:
    """'11,947 -> 12,100 samples (+1.3%)', or 'new: 12,100 samples'."""
    if not old:
        return f"new: {new:,.0f} samples"
    return f"{old:,.0f} -> {new:,.0f} samples ({new / old - 1:+.1%})"
