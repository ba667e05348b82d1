"""TunableOp on the CPU: the results file format (validators, entries, the file each GPU reads),
the messages a mismatch or a slower solution gives, and the checks driven through a stand-in for
`torch.cuda.tunable` (a CPU build has no TunableOp): a wrong tuned solution fails naming its
entry, a call that misses its entry is not judged as it, a file held by earlier tuning is not
trusted, and every TunableOp setting is restored."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from rocm_validate.core.tunableop_file import (
    environment_conflict,
    node_ordinal,
    tunableop_skip_reason,
    tuning_skip_reason,
)
from rocm_validate.correctness.tunable import check_entries, check_tuned_linear
from rocm_validate.perf.tuning import slower_message
from rocm_validate.workloads import tunableop
from rocm_validate.workloads.shapes import gemm_problem
from rocm_validate.workloads.tunableop_results import (
    EntryGemm,
    candidate_files,
    device_filename,
    entry_gemm,
    ignored_message,
    parse_results,
    retune_command,
    validator_mismatches,
)

FIXTURES = Path(__file__).parent / "fixtures" / "tunableop"
CPU = torch.device("cpu")


def read(name: str):
    return parse_results((FIXTURES / name).read_text(), name)


# --- the file format --------------------------------------------------------------------------


def test_a_rocm_results_file_gives_its_validators_and_every_entry():
    results = read("rocm-mi300x-bert-large-results0.csv")
    assert results.validator_map == {
        "PT_VERSION": "2.6.0",
        "ROCM_VERSION": "6.3.42131-fa1d09cbd",
        "HIPBLASLT_VERSION": "0.12.0-1b5f8f2c",
        "ROCBLAS_VERSION": "4.3.0-fa1d09cb",
        "GCN_ARCH_NAME": "gfx942:sramecc+:xnack-",
    }
    assert len(results.entries) == 7 and not results.unparsed
    first = results.entries[0]
    assert first.line == 6 and first.solution == "Gemm_Hipblaslt_TN_73624" and first.time_ms == pytest.approx(0.0461)


def test_an_entry_becomes_the_torch_call_its_job_made():
    entries = read("rocm-mi300x-bert-large-results0.csv").entries
    assert entry_gemm(entries[0]) == EntryGemm("torch.mm", "bfloat16", 24576, 4096, 1024, 1, False, True)
    assert entry_gemm(entries[1]) == EntryGemm(
        "torch.nn.functional.linear", "bfloat16", 24576, 1024, 4096, 1, False, True
    )
    assert entry_gemm(entries[2]) == EntryGemm("torch.bmm", "bfloat16", 512, 512, 64, 768, False, True)
    assert entry_gemm(entries[5]) == EntryGemm("torch.mm", "float16", 128, 64, 32)  # the older form, without ld


@pytest.mark.parametrize(
    "index, reason",
    [
        (3, "ScaledGemmTunableOp entries are not reproduced (its scales are not in the file)"),
        (4, "TF32 entries are not checked"),
        (6, "strided sub-matrices are not reproduced"),
    ],
)
def test_an_entry_the_suite_does_not_reproduce_says_why(index, reason):
    found = entry_gemm(read("rocm-mi300x-bert-large-results0.csv").entries[index])
    assert isinstance(found, str) and reason in found


def test_lines_tunableop_cannot_parse_are_kept_and_bad_entries_refused():
    results = read("malformed-results.csv")
    assert [number for number, _ in results.unparsed] == [2, 3]
    assert results.validator_map == {"PT_VERSION": "2.6.0"}
    reasons = [entry_gemm(entry) for entry in results.entries]
    assert not isinstance(reasons[0], str) and results.entries[0].time_ms is None
    assert "not a TunableOp GEMM signature" in reasons[1]
    assert "not <layout>_<m>_<n>_<k>" in reasons[2]
    assert "disagree with the operator's layout" in reasons[3]
    assert "fields the suite does not know" in reasons[4]
    assert "both operands in one layout" in reasons[5]
    assert "dtype 'double' is not checked" in reasons[6]


def test_matching_validators_leave_nothing_to_report():
    running = dict(read("rocm-mi300x-bert-large-results0.csv").validators)
    assert validator_mismatches(running, running) == ()
    assert ignored_message("r.csv", (), loaded=True) == ""


def test_a_file_from_another_stack_names_every_difference_and_the_retune_command():
    in_file = read("rocm-mi300x-bert-large-results0.csv").validator_map
    running = {**in_file, "PT_VERSION": "2.9.0", "GCN_ARCH_NAME": "gfx950"}
    running.pop("ROCBLAS_VERSION")
    running["CUBLASLT_VERSION"] = "13.0"
    found = {m.key: m.describe() for m in validator_mismatches(in_file, running)}
    assert found == {
        "CUBLASLT_VERSION": "CUBLASLT_VERSION missing from the file (13.0 here)",
        "GCN_ARCH_NAME": "GCN_ARCH_NAME gfx942:sramecc+:xnack- in the file, gfx950 here",
        "PT_VERSION": "PT_VERSION 2.6.0 in the file, 2.9.0 here",
        "ROCBLAS_VERSION": "ROCBLAS_VERSION=4.3.0-fa1d09cb in the file, which this stack does not register",
    }
    message = ignored_message("/img/tunableop_results0.csv", validator_mismatches(in_file, running), True)
    assert message.startswith(
        "TunableOp will ignore /img/tunableop_results0.csv on this stack and the job will run untuned"
    )
    assert "PYTORCH_TUNABLEOP_FILENAME=/img/tunableop_results_retuned%d.csv" in message
    assert 'tune_gemm_in_file("/img/tunableop_results0.csv")' in message


def test_a_file_without_validators_is_rejected_for_its_missing_pytorch_version():
    (mismatch,) = validator_mismatches({}, {"PT_VERSION": "2.11.0"})
    assert mismatch.key == "PT_VERSION" and mismatch.in_file is None


def test_the_retune_command_is_one_shell_line():
    assert retune_command("a b.csv", "out%d.csv") == (
        "PYTORCH_TUNABLEOP_ENABLED=1 PYTORCH_TUNABLEOP_TUNING=1 PYTORCH_TUNABLEOP_FILENAME=out%d.csv python -c "
        "'import torch.cuda.tunable as t; t.tune_gemm_in_file(\"a b.csv\")'"
    )


@pytest.mark.parametrize(
    "name, ordinal, expected",
    [
        ("tunableop_results.csv", 3, "tunableop_results3.csv"),
        ("/img/tuned_%d.csv", 5, "/img/tuned_5.csv"),
        ("/img/v1.2/results", 1, "/img/v11.2/results"),  # TunableOp's rule: before the last '.', wherever it is
        ("results", 2, "results2"),
    ],
)
def test_tunableop_inserts_the_gpu_ordinal_into_a_filename(name, ordinal, expected):
    assert device_filename(name, ordinal) == expected


def test_a_name_from_the_environment_is_read_as_tunableop_reads_it_per_gpu():
    assert candidate_files("tunableop_results.csv", True, 1) == ("tunableop_results1.csv",)
    assert candidate_files("tunableop_results.csv", False, 1) == ("tunableop_results.csv", "tunableop_results1.csv")
    assert candidate_files("r%d.csv", False, 4) == ("r4.csv",)


def test_a_tuned_solution_slower_than_the_default_fails_naming_it():
    assert slower_message("entry", 0.99, 0.002) is None
    assert slower_message("entry", 0.9, 0.05) is None  # 3 x a 5% spread allows 15%
    message = slower_message("line 6: GemmTunableOp_BFloat16_TN -> Gemm_Hipblaslt_TN_7", 0.90, 0.004)
    assert message.startswith("line 6: GemmTunableOp_BFloat16_TN -> Gemm_Hipblaslt_TN_7: the tuned solution is slower")
    assert "10.0% slower (allowed 3.0%" in message


def test_tunableop_skips_on_the_cpu_saying_why(cpu):
    assert tunableop_skip_reason(cpu).startswith("needs a CUDA or ROCm GPU for PyTorch TunableOp")


@pytest.mark.parametrize(("backend", "tunes"), [("rocm", True), ("cuda", False), ("cpu", True)])
def test_tuning_is_skipped_only_on_a_cuda_build_whose_one_solution_is_the_default(cpu, backend, tunes):
    reason = tuning_skip_reason(dataclasses.replace(cpu, backend=backend))
    assert (reason is None) == tunes  # the CPU is refused earlier, by tunableop_skip_reason
    if reason:
        assert "only TunableOp GEMM solution is cuBLAS's Default" in reason and "--rocm-tunableop-file" in reason


def test_an_environment_that_pins_tunableop_is_named():
    assert environment_conflict({}, True, True) is None
    assert "found PYTORCH_TUNABLEOP_ENABLED=1" in environment_conflict({"PYTORCH_TUNABLEOP_ENABLED": "1"}, True, True)
    assert environment_conflict({"PYTORCH_TUNABLEOP_ENABLED": "1"}, True, False) is None
    assert "found PYTORCH_TUNABLEOP_TUNING=0" in environment_conflict({"PYTORCH_TUNABLEOP_TUNING": "0"}, True, False)


def test_a_pinned_worker_reads_the_file_of_its_gpu_on_the_node(cpu):
    assert node_ordinal(cpu, {"ROCM_VALIDATE_NODE_GPU": "5"}) == 5
    assert node_ordinal(cpu, {}) == 0


# --- the checks, through a stand-in for torch.cuda.tunable ------------------------------------


class FakeTunable:
    """torch.cuda.tunable's state as TunableOp keeps it: a switch, tuning, bounds, a filename and
    a results table whose keys are never replaced. `tune(key, solution)` is what a tuned call adds."""

    def __init__(self) -> None:
        self.enabled, self.tuning, self.duration, self.iterations, self.filename = False, True, 30, 100, ""
        self.table: dict[tuple[str, str], tuple[str, float]] = {}
        self.validators = (("PT_VERSION", "2.13.0"),)

    def enable(self, on=True):
        self.enabled = on

    def is_enabled(self):
        return self.enabled

    def tuning_enable(self, on=True):
        self.tuning = on

    def tuning_is_enabled(self):
        return self.tuning

    def set_max_tuning_duration(self, ms):
        self.duration = ms

    def get_max_tuning_duration(self):
        return self.duration

    def set_max_tuning_iterations(self, n):
        self.iterations = n

    def get_max_tuning_iterations(self):
        return self.iterations

    def set_filename(self, name, insert_device_ordinal=False):
        self.filename = name

    def get_filename(self):
        return self.filename

    def get_results(self):
        return tuple((op, params, solution, time) for (op, params), (solution, time) in self.table.items())

    def get_validators(self):
        return self.validators

    def read_file(self, path):
        results = parse_results(Path(path).read_text())
        if validator_mismatches(results.validator_map, dict(self.validators)):
            return False
        for entry in results.entries:
            self.table.setdefault(entry.key, (entry.solution, entry.time_ms))
        return True


@pytest.fixture
def fake(monkeypatch) -> FakeTunable:
    stand_in = FakeTunable()
    monkeypatch.setattr(tunableop, "_tunable", lambda: stand_in)
    return stand_in


def test_a_session_switches_tunableop_on_and_restores_every_setting(fake, tmp_path):
    with tunableop.tunableop_session(tmp_path, tuning=False) as session:
        assert (fake.enabled, fake.tuning, fake.duration, fake.iterations) == (True, False, 10, 20)
        assert fake.filename == str(tmp_path / "tunableop_scratch.csv")
        with session.outside():
            assert not fake.enabled
        assert fake.enabled
    assert (fake.enabled, fake.tuning, fake.duration, fake.iterations, fake.filename) == (False, True, 30, 100, "")


def test_a_session_reports_what_a_call_tuned(fake, tmp_path):
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        _, added = session.call(
            lambda: fake.table.setdefault(("GemmTunableOp_float_TN", "tn_8_8_8"), ("Gemm_X_1", 0.1))
        )
    assert [s.describe() for s in added] == ["GemmTunableOp_float_TN,tn_8_8_8 -> Gemm_X_1 (0.1 ms when tuned)"]


def wrong_when_tuned(fake: FakeTunable, scale: float):
    """A GEMM kernel whose tuned solution is `scale` too large; the default path stays right."""
    originals = {"mm": torch.mm, "bmm": torch.bmm, "linear": torch.nn.functional.linear}

    def wrap(name):
        def call(*args, **kwargs):
            out = originals[name](*args, **kwargs)
            return (out.double() * scale).to(out.dtype) if fake.enabled else out

        return call

    return {name: wrap(name) for name in originals}


def load(fake: FakeTunable, tmp_path: Path, name: str):
    results = read(name)
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        assert session.read_file(FIXTURES / name)
    return results


def test_every_healthy_entry_of_a_file_matches_float64(fake, cpu, tmp_path):
    results = load(fake, tmp_path, "small-shapes-results0.csv")
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        outcomes = check_entries(results, cpu, CPU, session, held={})
    failed = [o.comparison.message() for o in outcomes if not o.comparison.passed]
    assert len(outcomes) == 4 and not failed, failed


@pytest.mark.parametrize("op", ["mm", "bmm", "linear"])
def test_a_wrong_tuned_solution_fails_naming_its_entry(fake, cpu, tmp_path, monkeypatch, op):
    results = load(fake, tmp_path, "small-shapes-results0.csv")
    wrong = wrong_when_tuned(fake, 1.02)
    target = torch.nn.functional if op == "linear" else torch
    monkeypatch.setattr(target, op, wrong[op])
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        outcomes = check_entries(results, cpu, CPU, session, held={})
    failed = [o for o in outcomes if not o.comparison.passed]
    assert failed, [o.to_dict() for o in outcomes]
    assert all(
        f"{o.entry.op_signature},{o.entry.params_signature} -> {o.entry.solution}" in o.comparison.check for o in failed
    )


def test_a_call_that_tunes_instead_of_using_its_entry_is_not_judged_as_the_entry(fake, cpu, tmp_path, monkeypatch):
    results = load(fake, tmp_path, "small-shapes-results0.csv")
    original = torch.mm

    def tunes_instead(a, b):
        fake.table.setdefault(("GemmTunableOp_float_NN", "nn_1_1_1"), ("Gemm_Y_9", 0.2))
        return original(a, b)

    monkeypatch.setattr(torch, "mm", tunes_instead)
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        outcomes = check_entries(results, cpu, CPU, session, held={})
    assert "not reproduced" in outcomes[0].not_checked and outcomes[0].comparison is None


def test_an_entry_held_by_earlier_tuning_is_not_trusted(fake, cpu, tmp_path):
    results = read("small-shapes-results0.csv")
    key = results.entries[0].key
    fake.table[key] = ("Gemm_Tuned_Here", 0.1)
    held = tunableop.conflicts({e.key: e.solution for e in results.entries}, tunableop.results_table())
    assert held == {key: "Gemm_Tuned_Here"}
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        outcomes = check_entries(results, cpu, CPU, session, held=held)
    assert "already holds Gemm_Tuned_Here" in outcomes[0].not_checked


def test_a_wrong_solution_tuned_for_a_suite_shape_fails_and_names_it(fake, cpu, tmp_path, monkeypatch):
    problem = gemm_problem("bert-large.ffn_up", is_gpu=False)
    wrong = wrong_when_tuned(fake, 1.001)["linear"]

    def tuned_linear(x, w, b=None):
        fake.table.setdefault(("GemmAndBiasTunableOp_float_TN", "tn_256_64_64"), ("Gemm_Bad_3", 0.01))
        return wrong(x, w, b)

    monkeypatch.setattr(torch.nn.functional, "linear", tuned_linear)
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        comparison = check_tuned_linear(problem, "float32", True, cpu, CPU, session)
    assert not comparison.passed
    assert "[TunableOp: GemmAndBiasTunableOp_float_TN,tn_256_64_64 -> Gemm_Bad_3" in comparison.check


# --- the option -----------------------------------------------------------------------------

SHOW_FILE = """
import pytest
from rocm_validate.core.tunableop_file import device_results

def test_file(pytestconfig, rocm_device):
    found = device_results(pytestconfig, rocm_device, {"ROCM_VALIDATE_NODE_GPU": "1"})
    print("FILE", found.path.name, found.source, len(found.results.entries))
"""


def test_a_name_from_pytorch_tunableop_filename_is_read_for_the_gpu_as_tunableop_would(pytester, monkeypatch):
    (pytester.path / "node").mkdir()
    for name in ("tunableop_results0.csv", "tunableop_results1.csv"):
        (pytester.path / "node" / name).write_text((FIXTURES / "node" / name).read_text())
    pytester.makepyfile(SHOW_FILE)
    monkeypatch.setenv("PYTORCH_TUNABLEOP_FILENAME", "node/tunableop_results.csv")
    result = pytester.runpytest("-s", "--rocm-device=cpu", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*FILE tunableop_results1.csv PYTORCH_TUNABLEOP_FILENAME 1*"])


def test_a_missing_results_file_fails_as_configuration_naming_the_file_tunableop_reads(pytester):
    pytester.makepyfile(SHOW_FILE)
    result = pytester.runpytest("--rocm-device=cpu", "--rocm-tunableop-file=gone.csv", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*--rocm-tunableop-file=gone.csv: no TunableOp results file for GPU 1; looked for *gone.csv, *gone1.csv*"]
    )


def test_a_wrong_solution_tuned_for_attention_bmm_fails_and_names_it(fake, cpu, tmp_path, monkeypatch):
    from rocm_validate.correctness.tunable import attention_gemms, check_tuned_bmm

    original, wrong = torch.bmm, wrong_when_tuned(fake, 1.01)["bmm"]

    def tuned_bmm(a, b):
        fake.table.setdefault(("GemmStridedBatchedTunableOp_float_TN", "tn_64_64_64_B_4"), ("Gemm_Bad_5", 0.01))
        return wrong(a, b)

    monkeypatch.setattr(torch, "bmm", tuned_bmm)
    gemms = attention_gemms(is_gpu=False, dtype="float32")
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        bad = check_tuned_bmm("scores", gemms["scores"], cpu, CPU, session)
    assert not bad.passed and "attention scores" in bad.check and "-> Gemm_Bad_5" in bad.check
    monkeypatch.setattr(torch, "bmm", original)
    with tunableop.tunableop_session(tmp_path, tuning=True) as session:
        assert check_tuned_bmm("context", gemms["context"], cpu, CPU, session).passed
