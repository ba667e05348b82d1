"""MLPerf results as test verdicts: pytest --rocm-suite=convergence --rocm-mlperf-results=DIR.

One test per result file (it converged; it passes MLPerf's compliance checker) and one for the
set (it passes MLPerf's RCP check), with minutes-to-train, the normalization factor and the
score as metrics. A failure the inputs cause (an unreadable or incomplete file, a compliance
complaint, a set the checker cannot compare) is categorised `configuration`; runs that converged
wrongly are `numerics`.
"""

from __future__ import annotations

import pytest

from rocm_validate.core.categorize import fail_as

# The results on disk are the node's, not a GPU's: scored once, on one GPU of a whole-node run.
pytestmark = pytest.mark.rocm_shared(group="mlperf-results")


def _run(mlperf_results, name):
    return next(run for run in mlperf_results.runs if run.file == name)


def test_mlperf_run_converged(mlperf_result_file, mlperf_results, record_rocm_metric):
    run = _run(mlperf_results, mlperf_result_file)
    if run.minutes is not None:
        record_rocm_metric(f"mlperf.{run.file}.minutes", run.minutes, "min", better="lower")
    if run.failure_category:
        fail_as(run.failure_category, run.message())


def test_mlperf_run_passes_the_compliance_checker(mlperf_result_file, mlperf_results):
    run = _run(mlperf_results, mlperf_result_file)
    if run.problems:
        fail_as("configuration", run.message())
    if run.compliance:
        fail_as("configuration", f"{run.file}: MLPerf's compliance checker:\n" + "\n".join(run.compliance))


@pytest.mark.rocm_level("quick")
def test_mlperf_run_set_passes_the_rcp_check(mlperf_results, record_rocm_metric):
    score = mlperf_results
    factor = score.rcp.normalization_factor if score.rcp.passed else None
    if score.olympic_mean_minutes is not None:
        record_rocm_metric(
            "mlperf.olympic_mean_minutes",
            score.olympic_mean_minutes,
            "min",
            better="lower",
            samples=len(score.runs),
            extra={"normalization_factor": factor, "score_minutes": score.score_minutes},
        )
    if factor is not None:
        record_rocm_metric("mlperf.normalization_factor", factor, "x", better="lower", extra={"rcp": score.rcp.record})
    if score.score_minutes is not None:
        record_rocm_metric(
            "mlperf.score_minutes",
            score.score_minutes,
            "min",
            better="lower",
            samples=len(score.runs),
            extra={"olympic_mean_minutes": score.olympic_mean_minutes, "normalization_factor": factor},
        )
    if score.failure_category:
        details = "; ".join([score.rcp.message, *score.messages])
        name = f"the {score.benchmark} run set" if score.benchmark else "the run set (no submission_benchmark line)"
        fail_as(score.failure_category, f"{name} in {score.folder} fails MLPerf's RCP check: {details}")
