"""Options: accepted forms, precedence, and clear usage errors without tracebacks."""

import pytest

PASSING = "def test_ok():\n    pass\n"


def test_an_unknown_suite_is_a_usage_error_naming_the_accepted_forms(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-suite=speed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rocm-suite='speed': unknown suite 'speed'; accepted: preflight, correctness, perf, convergence, collectives, all*"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_a_device_that_is_neither_an_index_nor_cpu_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-device=gpu0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rocm-device='gpu0': expected a GPU index (0, 1, ...), a comma list of indices (0,3,5), 'all', 'cpu' or 'auto'*"
        ]
    )


def test_an_empty_suite_list_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-suite=,")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-suite: expected a suite name, found an empty value*"])


def test_a_bad_ini_value_names_the_ini_key(pytester):
    pytester.makeini("[pytest]\nrocm_suite = perf,bogus\n")
    pytester.makepyfile(PASSING)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: rocm_suite (ini)='perf,bogus': unknown suite 'bogus'*"])


def test_the_environment_overrides_the_ini_and_the_command_line_overrides_both(pytester, monkeypatch):
    pytester.makeini("[pytest]\nrocm_suite = perf\n")
    pytester.makeconftest(
        "from rocm_validate.core.session import run_state\n"
        "def pytest_report_header(config):\n"
        "    return 'suites=' + ','.join(sorted(run_state(config).settings.suites))\n"
    )
    pytester.makepyfile(PASSING)
    runs = [
        ((), None, "suites=perf"),
        ((), "convergence", "suites=convergence"),
        (("--rocm-suite=all",), "convergence", "suites=collectives,convergence,correctness,perf,preflight"),
    ]
    for args, env, shown in runs:
        if env:
            monkeypatch.setenv("ROCM_VALIDATE_SUITE", env)
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([shown])


def test_a_baselines_path_that_is_a_file_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    pytester.path.joinpath("baselines.json").write_text("{}")
    result = pytester.runpytest("--rocm-baselines=baselines.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-baselines='baselines.json': *baselines.json is a file; expected a folder*"]
    )


def test_all_options_share_one_help_group(pytester):
    result = pytester.runpytest("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "rocm-validate: GPU stack validation:",
            "  --rocm-suite=LIST*",
            "  --rocm-baselines=DIR*",
            "  --rocm-device=INDEX|LIST|all|cpu*",
            "  --rocm-report=PATH*",
            "  --update-baselines*",
            "  --rocm-strict*",
        ]
    )


def test_an_empty_suite_value_is_a_usage_error_not_the_default(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-suite=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-suite='': an empty value (a shell variable that expanded to nothing?)*"]
    )


def test_a_baselines_folder_that_does_not_exist_is_a_usage_error_naming_it(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-baselines=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --rocm-baselines='nowhere': no such folder ({pytester.path / 'nowhere'})*--update-baselines"]
    )
    assert "Traceback" not in result.stderr.str()


def test_update_baselines_creates_the_baselines_folder(pytester):
    pytester.makepyfile(PASSING)
    pytester.runpytest("--rocm-baselines=new/folder", "--update-baselines").assert_outcomes(passed=1)
    assert (pytester.path / "new" / "folder").is_dir()


def test_a_relative_baselines_folder_is_taken_from_the_current_directory(pytester, monkeypatch):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(PASSING)
    below = pytester.mkdir("below")
    monkeypatch.chdir(below)
    result = pytester.runpytest(str(pytester.path), "--rocm-baselines=mine", "--update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rocm-validate *baselines {below / 'mine'}; mode update baselines"])


@pytest.mark.parametrize("place", ["/proc/rocm-validate-test/baselines", "a-file/baselines"])
def test_an_unwritable_baselines_folder_is_refused_before_anything_runs(pytester, place):
    pytester.makepyfile(PASSING)
    (pytester.path / "a-file").write_text("")
    result = pytester.runpytest(f"--rocm-baselines={place}", "--update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --rocm-baselines='{place}': --update-baselines cannot write there: *cannot be created*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stderr.str()


@pytest.mark.parametrize("option", ["--rocm-report", "--rocm-benchmark-json"])
@pytest.mark.parametrize("place", ["/proc/rocm-validate-test/out.json", "a-file/out.json"])
def test_an_unwritable_output_file_is_refused_before_anything_runs(pytester, option, place):
    pytester.makepyfile(PASSING)
    (pytester.path / "a-file").write_text("")
    result = pytester.runpytest(f"{option}={place}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option}='{place}': cannot write there: *"])
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stderr.str()


def test_a_perf_window_below_the_minimum_is_refused_naming_the_minimum(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-perf-window=0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-perf-window='0.1': expected a factor from 0.25*"])


def test_accepting_regressions_without_updating_baselines_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-accept-regressions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-accept-regressions only applies with --update-baselines*"])


def test_naming_a_suite_folder_runs_that_suite_instead_of_deselecting_it(pytester):
    pytester.makeini("[pytest]\n")
    pytester.mkdir("suites")
    pytester.mkdir("suites/perf")
    (pytester.path / "suites" / "perf" / "test_mine.py").write_text(PASSING)
    result = pytester.runpytest("suites/perf", "--rocm-device=cpu")
    result.assert_outcomes(passed=1)
    assert result.ret == 0 and "deselected" not in result.stdout.str()
    by_id = pytester.runpytest("suites/perf/test_mine.py::test_ok", "--rocm-device=cpu")
    by_id.assert_outcomes(passed=1)


def test_the_lock_file_beside_a_baseline_is_ignored_by_git():
    from fnmatch import fnmatch
    from pathlib import Path

    patterns = (Path(__file__).resolve().parents[1] / ".gitignore").read_text().split()
    assert any(fnmatch(".nvidia-h100-80gb-hbm3-sm90.json.lock", p.strip("/")) for p in patterns)


def test_each_suite_plugin_owns_its_options(pytester):
    """Without the perf plugin its options are gone from --help; the run-wide ones stay."""
    result = pytester.runpytest("-p", "no:rocm_validate.perf.plugin", "--help")
    assert result.ret == 0
    text = result.stdout.str()
    assert "--rocm-suite=LIST" in text and "--rocm-host-root=DIR" in text
    assert "--rocm-perf-window" not in text and "--rocm-floors" not in text


def _config(tmp_path, ini: bool):
    from types import SimpleNamespace

    return SimpleNamespace(
        inipath=tmp_path / "project" / "pytest.ini" if ini else None,
        rootpath=tmp_path / "root",
        invocation_params=SimpleNamespace(dir=tmp_path / "started-here"),
    )


def test_a_relative_path_on_the_command_line_or_in_the_environment_is_taken_from_where_pytest_started(tmp_path):
    from rocm_validate.core.options import given_path

    config = _config(tmp_path, ini=True)
    assert given_path(config, "floors", "--rocm-floors") == tmp_path / "started-here" / "floors"
    assert given_path(config, "floors", "ROCM_VALIDATE_FLOORS (environment)") == tmp_path / "started-here" / "floors"


def test_a_relative_path_in_the_ini_file_is_taken_from_the_ini_files_folder(tmp_path):
    from rocm_validate.core.options import given_path

    assert given_path(_config(tmp_path, ini=True), "floors", "rocm_floors (ini)") == tmp_path / "project" / "floors"
    assert given_path(_config(tmp_path, ini=False), "floors", "rocm_floors (ini)") == tmp_path / "root" / "floors"


def test_a_relative_floors_folder_follows_the_same_rule_as_the_baselines(pytester, monkeypatch):
    (pytester.path / "sub" / "my-floors").mkdir(parents=True)
    pytester.makepyfile("def test_x():\n    pass\n")
    monkeypatch.chdir(pytester.path / "sub")
    result = pytester.runpytest(str(pytester.path), "--rocm-floors=my-floors")
    result.assert_outcomes(passed=1)
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest("--rocm-floors=my-floors")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rocm-floors='my-floors': no such folder ({pytester.path / 'my-floors'})*"])
