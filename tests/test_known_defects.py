"""Known defects as data: the pure matching on discovered facts (fake facts), the tables' loader,
and the outcome `known-defect` end to end through a pytest run on a stand-in H200."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from xml.etree import ElementTree

import pytest

from rocm_validate.core.known_defects import shipped
from rocm_validate.results.known_defects import (
    DefectTableError,
    KnownDefect,
    StackFacts,
    VersionRange,
    applies,
    covers,
    library_version,
    match,
    parse_table,
    unmatched_tests,
)

H200 = StackFacts("cuda", "sm_90", "2.11.0+cu130", (("cublas", "13.1.0.3"), ("cudnn", "91900")))
NJT_BF16 = "suites/correctness/test_packed_attention.py::test_packed_attention_keeps_every_sequence_to_itself[bfloat16-njt-cudnn]"
GRAD_Q = "packed.njt-cudnn.grad_q [4 blocks of 512 tokens (1-3 sequences)] worst in block 2 sequence 2"


def _defect(**changes: object) -> KnownDefect:
    base = KnownDefect(
        id="x",
        summary="s",
        upstream=(),
        library="cudnn",
        versions=VersionRange("9.19", "9.26"),
        backend="cuda",
        archs=("sm_90",),
        torch=VersionRange("2.11"),
        tests=("suites/t.py::test_a[*-njt]",),
        checks=("packed.njt.grad_q",),
        workaround="w",
        measured="m",
    )
    return KnownDefect(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_cudnn_versions_are_read_from_torch_s_integer() -> None:
    assert library_version("cudnn", "91900") == (9, 19, 0)
    assert library_version("cudnn", "8902") == (8, 9, 2)
    assert library_version("hipblaslt", "1.0.70000") == (1, 0, 70000)


def test_the_shipped_cudnn_entry_matches_the_h200_failure_it_was_measured_on() -> None:
    found = match(shipped(), H200, NJT_BF16, [GRAD_Q, "packed.njt-cudnn.grad_k [..]"])
    assert found is not None and found.defect.id == "cudnn-sdpa-njt-backward" and found.version == "cudnn 9.19.0"


@pytest.mark.parametrize(
    "facts",
    [
        StackFacts("cuda", "sm_90", "2.11.0", (("cudnn", "91800"),)),  # library version below the range
        StackFacts("cuda", "sm_90", "2.11.0", (("cudnn", "92600"),)),  # the fixed version
        StackFacts("cuda", "sm_100", "2.11.0", (("cudnn", "91900"),)),  # another device family
        StackFacts("cuda", "sm_90", "2.10.0", (("cudnn", "91900"),)),  # torch below its range
        StackFacts("rocm", "sm_90", "2.11.0", (("cudnn", "91900"),)),  # another backend
        StackFacts("cuda", "sm_90", "2.11.0", ()),  # the library version is unknown
    ],
)
def test_an_entry_does_not_apply_when_any_fact_falls_outside_it(facts: StackFacts) -> None:
    assert applies(_defect(), facts) is None


def test_an_entry_applies_inside_every_range() -> None:
    assert applies(_defect(), StackFacts("cuda", "sm_90", "2.13.0", (("cudnn", "92500"),))) == "cudnn 9.25.0"


def test_a_failure_with_one_check_the_entry_does_not_name_is_not_the_known_defect() -> None:
    entry = _defect()
    assert covers(entry, ["packed.njt.grad_q [x]"])
    assert not covers(entry, ["packed.njt.grad_q [x]", "packed.njt.out [x]"])
    assert not covers(entry, [])


def test_test_patterns_take_brackets_literally() -> None:
    entry = _defect()
    assert match([entry], H200, "suites/t.py::test_a[bf16-njt]", ["packed.njt.grad_q"]) is not None
    assert match([entry], H200, "suites/t.py::test_a[bf16-pad]", ["packed.njt.grad_q"]) is None


def test_a_pass_of_a_named_test_is_matched_as_no_longer_reproducing() -> None:
    assert match([_defect()], H200, "suites/t.py::test_a[bf16-njt]", None) is not None


def _site(**entry: object) -> str:
    raw = {
        "id": "site-1",
        "summary": "s",
        "upstream": [],
        "library": "cudnn",
        "versions": {"min": "9.19"},
        "backend": "cuda",
        "archs": ["sm_90"],
        "tests": ["suites/t.py::test_a"],
        "checks": ["c"],
        "workaround": "w",
        "measured": "m",
        "owner": "ml-infra",
        "expires": "2027-03-31",
        **entry,
    }
    return json.dumps({"schema": "rocm-validate/known-defects/1", "defects": [raw]})


def test_a_site_entry_loads_with_its_owner_and_expiry() -> None:
    (entry,) = parse_table(_site(), "site.json", site=True)
    assert entry.owner == "ml-infra" and entry.expires == date(2027, 3, 31) and entry.source == "site.json"
    assert entry.expired(date(2027, 4, 1)) and not entry.expired(date(2027, 3, 31))


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"expires": "31/03/2027"}, "expires='31/03/2027' is not a date"),
        ({"colour": "red"}, "'colour' was unexpected"),
        ({"owner": None}, "None is not of type 'string'"),
        ({"versions": {"min": "9.26", "below": "9.19"}}, "versions range is empty"),
    ],
)
def test_a_bad_site_entry_is_refused_naming_it(entry: dict[str, object], said: str) -> None:
    with pytest.raises(DefectTableError, match="entry 1 \\('site-1'\\)") as raised:
        parse_table(_site(**entry), "site.json", site=True)
    assert said in str(raised.value)


def test_a_site_entry_without_an_owner_is_refused() -> None:
    data = json.loads(_site())
    del data["defects"][0]["owner"]
    with pytest.raises(DefectTableError, match="needs an 'owner' and an 'expires'"):
        parse_table(json.dumps(data), "site.json", site=True)


def test_an_entry_naming_no_test_of_a_collected_file_matches_nothing() -> None:
    entry = _defect(tests=("suites/t.py::test_gone",))
    assert unmatched_tests([entry], ["suites/t.py::test_a"]) == [
        "entry 'x' of shipped: no test matches suites/t.py::test_gone"
    ]
    assert unmatched_tests([entry], ["suites/other.py::test_a"]) == []


# --- end to end ---------------------------------------------------------------------------------

CONFTEST = """
from rocm_validate.platform.devices import DeviceInfo


def pytest_rocm_discover_devices(config):
    return [
        DeviceInfo(backend="cuda", index=0, name="NVIDIA H200", arch="sm_90", device_key="nvidia-h200-sm90",
                   torch_version="2.11.0+cu130", libraries=(("cudnn", "91900"),), pci_bus_id="0000:00:07.0"),
        DeviceInfo(backend="cpu", index=None, name="Test CPU", arch="Test CPU", device_key="cpu-test"),
    ]
"""

TESTS = """
import json

import pytest


def _checks(record_property, failed):
    record_property("rocm_numerics", json.dumps([{"check": f"packed.njt.{c} [block 2]", "passed": False} for c in failed]))


@pytest.mark.parametrize("failed", [("grad_q",), ("grad_q", "out")], ids=["known", "other"])
def test_njt(record_property, failed):
    _checks(record_property, failed)
    assert False, "numerics checks failed"


def test_fixed():
    pass
"""


def _site_file(path: Path, expires: str = "2099-01-01", tests: tuple[str, ...] = ()) -> Path:
    entry = {
        "id": "site-njt",
        "summary": "cuDNN nested attention",
        "upstream": ["https://example.invalid/1"],
        "library": "cudnn",
        "versions": {"min": "9.19"},
        "backend": "cuda",
        "archs": ["sm_90"],
        "tests": list(
            tests or ("suites/correctness/test_njt.py::test_njt[*]", "suites/correctness/test_njt.py::test_fixed")
        ),
        "checks": ["packed.njt.grad_q"],
        "workaround": "enable_cudnn_sdp(False)",
        "measured": "here",
        "owner": "ml-infra",
        "expires": expires,
    }
    path.write_text(json.dumps({"schema": "rocm-validate/known-defects/1", "defects": [entry]}))
    return path


def _unknown_key(path: Path) -> Path:
    data = json.loads(path.read_text())
    data["defects"][0]["expiry"] = "2099-01-01"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def node_folder(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    suite = pytester.mkdir("suites") / "correctness"
    suite.mkdir()
    (suite / "test_njt.py").write_text(TESTS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "suites/correctness",
        "-p",
        "no:cacheprovider",
        "--rocm-report=r.json",
        "--junitxml=j.xml",
        "--rocm-summary=s.md",
        *args,
    )


def test_a_matching_failure_is_a_known_defect_and_passes_the_run_while_others_fail(
    node_folder: pytest.Pytester,
) -> None:
    site = _site_file(node_folder.path / "site.json")
    result = _run(node_folder, f"--rocm-known-defects={site}")
    report = json.loads((node_folder.path / "r.json").read_text())
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}
    assert outcomes == {"test_njt[known]": "known-defect", "test_njt[other]": "failed", "test_fixed": "passed"}
    known = next(t["known_defect"] for t in report["tests"] if t["outcome"] == "known-defect")
    assert known["id"] == "site-njt" and known["library"] == "cudnn 9.19.0" and known["workaround"]
    assert result.ret == 1  # the other failure still fails
    output = result.stdout.str()
    assert "1 known-defect: site-njt (cudnn 9.19.0): workaround: enable_cudnn_sdp(False)" in output
    assert "site-njt no longer reproduces (cudnn 9.19.0): remove it from the known-defects table" in output


def test_a_run_whose_only_failure_is_a_known_defect_exits_0_and_says_so(node_folder: pytest.Pytester) -> None:
    site = _site_file(node_folder.path / "site.json")
    result = _run(node_folder, f"--rocm-known-defects={site}", "-k", "known")
    assert result.ret == 0
    verdict = json.loads((node_folder.path / "r.json").read_text())["verdict"]
    assert verdict.startswith("rocm-validate verdict: pass:")
    assert "known defect site-njt (cudnn 9.19.0) on GPU 0: tracked upstream, not failing the run" in verdict
    skipped = ElementTree.parse(node_folder.path / "j.xml").getroot().find(".//skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail"
    assert "known-defect site-njt (cudnn 9.19.0): enable_cudnn_sdp(False)" in (skipped.get("message") or "")
    summary = (node_folder.path / "s.md").read_text()
    assert "| site-njt | cudnn 9.19.0 | known defect | enable_cudnn_sdp(False) |" in summary


def test_a_known_defect_fails_the_run_under_strict(node_folder: pytest.Pytester) -> None:
    site = _site_file(node_folder.path / "site.json")
    result = _run(node_folder, f"--rocm-known-defects={site}", "-k", "known", "--rocm-strict")
    assert result.ret == 1
    report = json.loads((node_folder.path / "r.json").read_text())
    assert [t["outcome"] for t in report["tests"]] == ["known-defect"]
    assert "known defect site-njt (cudnn 9.19.0) on GPU 0 (--rocm-strict fails a known defect)" in report["verdict"]
    result.stdout.fnmatch_lines(
        ["*known-defect site-njt (cudnn 9.19.0): enable_cudnn_sdp(False) (--rocm-strict fails*"]
    )


def test_an_expired_site_entry_fails_the_run_naming_it(node_folder: pytest.Pytester) -> None:
    site = _site_file(node_folder.path / "site.json", expires="2020-01-01")
    result = _run(node_folder, f"--rocm-known-defects={site}", "-k", "fixed")
    assert result.ret == 1
    verdict = json.loads((node_folder.path / "r.json").read_text())["verdict"]
    assert f"known-defect entry 'site-njt' of {site} (owner ml-infra, expired 2020-01-01) has expired" in verdict


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p / "missing.json", "cannot read"),
        (lambda p: _site_file(p / "s.json", expires="soon"), "entry 1 ('site-njt'): expires='soon' is not a date"),
        (lambda p: _site_file(p / "s.json", tests=("suites/correctness/nothere.py::t",)), "entry 'site-njt'"),
        (lambda p: _site_file(p / "s.json", tests=("suites/correctness/test_njt.py::test_gone",)), "no test matches"),
        (
            lambda p: _unknown_key(_site_file(p / "s.json")),
            "entry 1 ('site-njt'): Additional properties are not allowed ('expiry' was unexpected)",
        ),
    ],
    ids=["missing-file", "bad-date", "no-such-file", "no-such-test", "unknown-key"],
)
def test_a_bad_known_defects_file_is_a_usage_error_naming_the_entry(
    node_folder: pytest.Pytester, make: object, said: str
) -> None:
    path = make(node_folder.path)  # type: ignore[operator]
    result = _run(node_folder, f"--rocm-known-defects={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str() + result.stdout.str()


def test_the_fleet_counts_each_node_s_known_defects_without_failing_it(tmp_path: Path) -> None:
    from rocm_validate.fleet import output
    from rocm_validate.fleet.judge import FleetBuilder
    from rocm_validate.fleet.reports import summarize

    entry = {"id": "cudnn-sdpa-njt-backward", "library": "cudnn 9.19.0", "workaround": "w", "reproduced": True}
    tests = [
        {"nodeid": "suites/correctness/t.py::a", "outcome": "known-defect", "category": None, "known_defect": entry},
        {"nodeid": "suites/correctness/t.py::b", "outcome": "passed", "category": None},
    ]
    data = {"tests": tests, "metrics": [], "device": None, "exit_status": 0, "verdict": "pass: every check"}
    builder = FleetBuilder()
    builder.add(summarize(data, tmp_path / "node-1.json"))
    fleet = builder.result()
    node = output.to_dict(fleet)["nodes"][0]
    assert node["known_defects"] == {"cudnn-sdpa-njt-backward (cudnn 9.19.0)": 1}
    assert node["action"] == "pass"
    assert "| cudnn-sdpa-njt-backward (cudnn 9.19.0) | 1 |" in output.markdown(fleet)


PLANT = """
import torch.nn.functional as F

SDPA = F.scaled_dot_product_attention


def wrong_on_nested(q, k, v, *args, **kwargs):
    return SDPA(q * 1.5 if q.is_nested else q, k, v, *args, **kwargs)


def pytest_configure(config):
    F.scaled_dot_product_attention = wrong_on_nested
"""


def test_the_real_suite_s_failure_is_matched_on_its_failed_checks(tmp_path: Path) -> None:
    """The packed-attention test of the suite itself, with nested-tensor attention planted wrong on
    the CPU and a site entry keyed on torch: its failed checks reach the matching, so it is a known defect."""
    import os
    import subprocess
    import sys

    (tmp_path / "plant_nested_attention.py").write_text(PLANT)
    repo = Path(__file__).resolve().parents[1]
    test = "suites/correctness/test_packed_attention.py::test_packed_attention_keeps_every_sequence_to_itself"
    entry = json.loads(_site(library="torch", backend="cpu", archs=["*"], versions={"min": "2.0"}))
    entry["defects"][0].update(tests=[f"{test}[*-njt-math]"], checks=["packed.njt-math.*"], expires="2099-01-01")
    (tmp_path / "site.json").write_text(json.dumps(entry))
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", f"{test}[float32-njt-math]", "--rocm-device=cpu", "-p", "no:cacheprovider",
            "-p", "plant_nested_attention", f"--rocm-known-defects={tmp_path / 'site.json'}",
            f"--rocm-report={tmp_path / 'r.json'}",
        ],
        cwd=repo, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t["outcome"] for t in report["tests"]] == ["known-defect"], done.stdout[-3000:]
    assert done.returncode == 0
    assert report["tests"][0]["known_defect"]["library"].startswith("torch 2.")
