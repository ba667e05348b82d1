"""The verdict and the exit status never disagree: every cause of a non-zero exit status has its
words in the verdict line, naming the GPU and its BDF where one is at fault (one row per cause)."""

from __future__ import annotations

import pytest

from rocm_validate.results.triage import CheckRecord, PeerFlag, RunEnd, verdict

BDF = "0000:00:07.0"
PASSED = [CheckRecord(0, "suites/perf/t.py::gemm"), CheckRecord(1, "suites/perf/t.py::gemm", bdf=BDF)]


def _failed_on_gpu_1(category: str, check: str = "suites/perf/t.py::gemm") -> list[CheckRecord]:
    return [CheckRecord(0, check), CheckRecord(1, check, category, "perf", bdf=BDF)]


KNOWN = "cudnn-sdpa-njt-backward (cudnn 9.19.0)"
CAUSES = {
    "failed test": (
        _failed_on_gpu_1("numerics", "suites/correctness/t.py::sdpa"),
        RunEnd(exit_status=1),
        f"GPU 1 (BDF {BDF}): drain and triage (numerics: 1 that passed on the other GPUs)",
    ),
    "below peers": (
        PASSED,
        RunEnd(peers=(PeerFlag(f"GPU 1 (BDF {BDF})", (0.047, 0.068, 0.05, 0.055, 0.06)),), exit_status=1),
        f"GPU 1 (BDF {BDF}) slower than its peers by 4.7-6.8% on 5 metrics: drain and triage",
    ),
    "below floor": (
        _failed_on_gpu_1("performance"),
        RunEnd(exit_status=1),
        f"GPU 1 (BDF {BDF}): drain and triage (performance: 1 that passed on the other GPUs)",
    ),
    "contention": (
        _failed_on_gpu_1("contention"),
        RunEnd(exit_status=1),
        "contention: rerun on an idle node; these results say nothing about the stack (contention: 1)",
    ),
    "known defect under --rocm-strict": (
        [CheckRecord(0, "suites/correctness/t.py::njt", known=KNOWN)],
        RunEnd(strict=True, exit_status=1),
        f"known defect {KNOWN} on GPU 0 (--rocm-strict fails a known defect)",
    ),
    "expired known-defect entry": (
        PASSED,
        RunEnd(expired=("entry 'site-njt' of site.json (owner ml-infra, expired 2020-01-01)",), exit_status=1),
        "known-defect entry 'site-njt' of site.json (owner ml-infra, expired 2020-01-01) has expired: renew its date",
    ),
    "interrupt": (
        PASSED,
        RunEnd(interrupted="SIGTERM", exit_status=2),
        "interrupted by SIGTERM: the run did not finish",
    ),
    "hang": (
        _failed_on_gpu_1("hang", "suites/correctness/t.py::stuck"),
        RunEnd(exit_status=1),
        f"hang: suites/correctness/t.py::stuck never returned on GPU 1 (BDF {BDF}): check that GPU",
    ),
    "usage error": (PASSED, RunEnd(stopped="--rocm-device=9: no GPU 9", exit_status=4), "usage error: --rocm-device=9"),
    "recording nothing under --rocm-strict": (
        PASSED,
        RunEnd(recording=("noisy",), strict=True, exit_status=1),
        "nothing was recorded by --update-baselines",
    ),
    "a cause no row names (a failed test of no suite)": (
        PASSED,
        RunEnd(exit_status=1),
        "exit status 1 though no check of a suite failed: read the failures above",
    ),
}


@pytest.mark.parametrize(("records", "end", "words"), CAUSES.values(), ids=CAUSES.keys())
def test_every_cause_of_a_non_zero_exit_status_has_its_words_in_the_verdict(
    records: list[CheckRecord], end: RunEnd, words: str
) -> None:
    line = verdict(records, end)
    assert words in line, line
    assert not line.startswith("rocm-validate verdict: pass"), line


def test_a_known_defect_outside_strict_passes_and_is_named() -> None:
    line = verdict([CheckRecord(0, "njt", known=KNOWN), CheckRecord(1, "njt", known=KNOWN)], RunEnd(exit_status=0))
    assert line.startswith("rocm-validate verdict: pass: every check that ran passed on GPUs 0, 1")
    assert f"known defect {KNOWN} on GPUs 0, 1: tracked upstream, not failing the run" in line


def test_an_entry_whose_test_passed_is_named_for_removal() -> None:
    line = verdict([CheckRecord(0, "njt", known=KNOWN, reproduced=False)], RunEnd(exit_status=0))
    assert f"known defect {KNOWN} no longer reproduces on GPU 0: remove it" in line


def test_a_clean_run_with_exit_status_0_passes() -> None:
    assert (
        verdict(PASSED, RunEnd(exit_status=0))
        == "rocm-validate verdict: pass: every check that ran passed on GPUs 0, 1"
    )
