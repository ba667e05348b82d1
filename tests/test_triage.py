"""Triage as pure functions: each failure's category from its facts, and the verdict line from
per-GPU records (fake whole-node results: 8 GPUs, one failing alone, all failing together)."""

from __future__ import annotations

import pytest

from rocm_validate.results.triage import (
    CATEGORIES,
    CheckRecord,
    FailureFacts,
    RunEnd,
    classify,
    combine,
    verdict,
)

GPUS = range(8)
CHECKS = ("test_gemm[bf16]", "test_sdpa[fp16]", "test_copy")


def node(failing: dict[tuple[int, str], str]) -> list[CheckRecord]:
    """Every check on every GPU of an 8-GPU node; `failing` maps (gpu, check) to a category."""
    return [CheckRecord(gpu, check, failing.get((gpu, check))) for gpu in GPUS for check in CHECKS]


@pytest.mark.parametrize(
    ("facts", "category"),
    [
        (FailureFacts(suite="correctness", exception_types=("AssertionError", "Exception")), "numerics"),
        (FailureFacts(suite="correctness", exception_types=("Failed",), numerics_failed=True), "numerics"),
        (
            FailureFacts(suite="correctness", exception_types=("RuntimeError", "Exception"), numerics_failed=True),
            "crash",
        ),  # an unexpected error after a recorded check failed: the test never failed on the check
        (
            FailureFacts(suite="perf", exception_types=("AssertionError",)),
            "numerics",
        ),  # a wrong output tile in a perf test
        (FailureFacts(suite="perf", exception_types=("Failed",)), "performance"),
        (
            FailureFacts(suite="perf", explicit="contention", exception_types=("CategorizedFailure", "Failed")),
            "contention",
        ),
        (FailureFacts(suite="preflight", exception_types=("Failed",)), "configuration"),
        (FailureFacts(exception_types=("Failed", "ModuleNotFoundError", "ImportError")), "environment"),
        (
            FailureFacts(message="libamdhip64.so: cannot open shared object file: No such file or directory"),
            "environment",
        ),
        (FailureFacts(exception_types=("NotValidated", "Skipped")), "environment"),
        (FailureFacts(exception_types=("TimeoutExpired", "SubprocessError")), "timeout"),
        (FailureFacts(message="Failed: Timeout (>2.0s) from pytest-timeout."), "timeout"),
        (FailureFacts(message="worker 'gw0' crashed while running 'suites/x.py::test_a'"), "crash"),
        (
            FailureFacts(
                exception_types=("RuntimeError",), message="HIP error: an illegal memory access was encountered"
            ),
            "crash",
        ),
        (
            FailureFacts(exception_types=("RuntimeError",), message="CUDA error: uncorrectable ECC error encountered"),
            "hardware",
        ),
        (
            FailureFacts(exception_types=("Failed",), message="out of device memory in test_x: needed 2.00 GiB more"),
            "crash",
        ),
    ],
)
def test_each_failure_is_classified_by_what_it_shows(facts: FailureFacts, category: str) -> None:
    assert classify(facts) == category


def test_a_category_the_check_gives_wins_and_an_unknown_one_is_ignored() -> None:
    assert classify(FailureFacts(suite="perf", explicit="throttling", exception_types=("Failed",))) == "throttling"
    assert classify(FailureFacts(suite="perf", explicit="bogus", exception_types=("Failed",))) == "performance"


def test_a_test_that_failed_several_ways_gets_the_most_actionable_category() -> None:
    assert combine(["contention", "performance", "contention"]) == "performance"
    assert combine(["contention", "throttling"]) == "throttling"
    assert combine(["crash"]) == "crash"
    assert combine([]) is None


def test_every_category_is_named_in_the_table() -> None:
    assert set(CATEGORIES) == {
        "numerics",
        "performance",
        "throttling",
        "contention",
        "hardware",
        "configuration",
        "environment",
        "timeout",
        "hang",
        "crash",
    }


def test_one_gpu_failing_alone_is_drained() -> None:
    line = verdict(node({(5, "test_gemm[bf16]"): "numerics", (5, "test_copy"): "performance"}))
    assert line == (
        "rocm-validate verdict: GPU 5: drain and triage (numerics: 1, performance: 1 that passed on the other GPUs)"
    )


def test_every_gpu_failing_the_same_check_is_a_software_regression() -> None:
    line = verdict(node({(gpu, "test_sdpa[fp16]"): "numerics" for gpu in GPUS}))
    assert (
        line == "rocm-validate verdict: software regression: roll back the image (numerics: 8 on every one of 8 GPUs)"
    )
    assert "drain" not in line


def test_a_software_regression_and_a_bad_gpu_are_both_named() -> None:
    failing = {(gpu, "test_sdpa[fp16]"): "numerics" for gpu in GPUS} | {(3, "test_copy"): "hardware"}
    line = verdict(node(failing))
    assert "software regression: roll back the image" in line and "GPU 3: drain and triage (hardware: 1)" in line


def test_a_check_failing_on_most_but_not_all_gpus_names_each_failing_gpu() -> None:
    line = verdict(node({(gpu, "test_gemm[bf16]"): "performance" for gpu in (1, 2)}))
    assert "software regression" not in line
    assert "GPU 1: drain and triage" in line and "GPU 2: drain and triage" in line


def test_a_single_gpu_run_says_it_cannot_tell_the_image_from_the_gpu() -> None:
    records = [CheckRecord(0, "test_gemm[bf16]", "numerics"), CheckRecord(0, "test_copy")]
    line = verdict(records)
    assert line.startswith("rocm-validate verdict: GPU 0 (numerics: 1): one GPU cannot tell the image from the GPU")
    assert "rerun on every GPU of the node" in line


def test_a_single_gpu_repeatability_mismatch_is_drained_outright() -> None:
    line = verdict([CheckRecord(0, "test_gemm_repeatability", "hardware"), CheckRecord(0, "test_copy")])
    assert line == "rocm-validate verdict: GPU 0: drain and triage (hardware: 1)"


def test_contention_and_throttling_ask_for_a_rerun_not_a_rollback() -> None:
    line = verdict(node({(gpu, "test_gemm[bf16]"): "contention" for gpu in GPUS} | {(2, "test_copy"): "throttling"}))
    assert "contention: rerun on an idle node" in line and "throttling on GPU 2" in line
    assert "roll back" not in line and "drain" not in line


def test_host_findings_come_first_and_name_no_gpu() -> None:
    records = node({(0, "test_gemm[bf16]"): "numerics"}) + [CheckRecord(None, "test_numa_balancing", "configuration")]
    parts = verdict(records).removeprefix("rocm-validate verdict: ").split("; ")
    assert parts[0].startswith("host configuration: fix the settings the preflight checks name")
    assert parts[1].startswith("GPU 0: drain and triage")


def test_a_configuration_failure_outside_preflight_asks_to_fix_the_inputs_not_the_host_or_the_image() -> None:
    mlperf = "suites/convergence/test_mlperf_results.py::test_mlperf_run_set_passes_the_rcp_check"
    records = [
        CheckRecord(None, mlperf, "configuration", "convergence"),
        CheckRecord(None, "test_numa", None, "preflight"),
    ]
    line = verdict(records)
    assert line == (
        "rocm-validate verdict: inputs: fix the files or options the failed convergence tests name (result files, "
        "ruleset, RCP file), then rerun; nothing points at the stack (configuration: 1)"
    )


def test_preflight_and_input_findings_each_get_their_own_action() -> None:
    records = [
        CheckRecord(None, "test_numa_balancing", "configuration", "preflight"),
        CheckRecord(0, "test_mlperf_run_converged[result_0.txt]", "configuration", "convergence"),
    ]
    parts = verdict(records).removeprefix("rocm-validate verdict: ").split("; ")
    assert parts[0] == "host configuration: fix the settings the preflight checks name, then rerun (configuration: 1)"
    assert parts[1].startswith("inputs: fix the files or options the failed convergence tests name")


def test_a_cpu_run_failing_numerics_is_a_software_regression() -> None:
    line = verdict([CheckRecord(None, "test_gemm[fp32]", "numerics")])
    assert (
        line
        == "rocm-validate verdict: software regression: roll back the image (numerics: 1 on the host, where no GPU is involved)"
    )


def test_a_clean_run_passes_and_an_empty_one_validated_nothing() -> None:
    assert (
        verdict(node({})) == "rocm-validate verdict: pass: every check that ran passed on GPUs 0, 1, 2, 3, 4, 5, 6, 7"
    )
    assert verdict([]) == "rocm-validate verdict: nothing was validated"


def test_timeouts_and_crashes_are_counted_with_what_to_do() -> None:
    line = verdict([CheckRecord(0, "a", "timeout"), CheckRecord(0, "b", "crash"), CheckRecord(0, "c", "crash")])
    assert "timeout: 1 test(s): rerun" in line and "crash: 2 test(s): rerun the failed tests alone" in line


# --- inputs named by the failing check, and how the run ended ------------------------------------


def test_an_input_failure_names_the_fix_its_check_gave_never_a_library_or_a_rollback() -> None:
    record = "record this device's baselines with pytest --rocm-suite=perf --update-baselines"
    records = [
        CheckRecord(0, "test_gemm", "configuration", "perf", record),
        CheckRecord(0, "test_sdpa", "configuration", "perf", record),
        CheckRecord(0, "test_copy", None, "perf"),
    ]
    line = verdict(records)
    assert line == (
        f"rocm-validate verdict: inputs: {record}, then rerun; nothing points at the stack (configuration: 2)"
    )


def test_an_interrupted_run_never_reads_as_a_pass() -> None:
    line = verdict(node({}), RunEnd(interrupted="SIGTERM"))
    assert line.startswith("rocm-validate verdict: interrupted by SIGTERM: the run did not finish")
    assert "pass:" not in line and "every check that finished passed on GPUs 0" in line


def test_a_run_stopped_by_a_usage_error_validated_nothing_and_says_why() -> None:
    line = verdict([], RunEnd(stopped="--rocm-level='sometimes': unknown level"))
    assert line == (
        "rocm-validate verdict: nothing was validated: the run stopped on a usage error: "
        "--rocm-level='sometimes': unknown level"
    )


def test_a_usage_error_after_the_tests_leads_the_verdict_of_what_ran() -> None:
    line = verdict(node({}), RunEnd(stopped="--rocm-floors: a floor gated nothing"))
    assert line.startswith("rocm-validate verdict: usage error: --rocm-floors: a floor gated nothing; every check")
    assert "pass:" not in line


@pytest.mark.parametrize(
    ("recording", "strict", "said"),
    [
        (("updated", "folded", "noisy"), False, "recorded 2 baseline entries (not recorded: noisy: 1)"),
        (("noisy", "noisy"), False, "nothing was recorded by --update-baselines: every measurement was refused"),
        ((), True, "no test of this run measured anything to record (--rocm-strict: a recording run that"),
    ],
    ids=["some", "none-refused", "none-measured-strict"],
)
def test_a_recording_run_says_what_it_recorded(recording: tuple[str, ...], strict: bool, said: str) -> None:
    line = verdict(node({}), RunEnd(recording=recording, strict=strict))
    assert said in line
    assert line.startswith("rocm-validate verdict: pass:") == bool(RunEnd(recording=recording).recorded)
