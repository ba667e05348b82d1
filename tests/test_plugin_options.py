"""Options: accepted forms, precedence, and clear usage errors without tracebacks."""

import pytest

PASSING = "def test_ok():\n    pass\n"


def test_an_unknown_suite_is_a_usage_error_naming_the_accepted_forms(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-suite=speed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-suite='speed': unknown suite 'speed'; accepted: correctness, perf, convergence, all*"])
    assert "Traceback" not in result.stderr.str()


def test_a_device_that_is_neither_an_index_nor_cpu_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-device=gpu0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-device='gpu0': expected a GPU index (0, 1, ...), 'cpu' or 'auto'*"])


def test_an_empty_suite_list_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--rocm-suite=,")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-suite: expected a suite name, found an empty value*"])


def test_a_bad_ini_value_names_the_ini_key(pytester):
    pytester.makeini("[pytest]\nrocm_suite = perf,bogus\n")
    pytester.makepyfile(PASSING)
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["ERROR: rocm_suite (ini)='perf,bogus': unknown suite 'bogus'*"])


def test_the_environment_overrides_the_ini_and_the_command_line_overrides_both(pytester, monkeypatch):
    pytester.makeini("[pytest]\nrocm_suite = perf\n")
    pytester.makeconftest(
        "from rocm_validate.core.session import run_state\n"
        "def pytest_report_header(config):\n"
        "    return 'suites=' + ','.join(sorted(run_state(config).settings.suites))\n"
    )
    pytester.makepyfile(PASSING)
    pytester.runpytest().stdout.fnmatch_lines(["suites=perf"])
    monkeypatch.setenv("ROCM_VALIDATE_SUITE", "convergence")
    pytester.runpytest().stdout.fnmatch_lines(["suites=convergence"])
    pytester.runpytest("--rocm-suite=all").stdout.fnmatch_lines(["suites=convergence,correctness,perf"])


def test_a_baselines_path_that_is_a_file_is_a_usage_error(pytester):
    pytester.makepyfile(PASSING)
    pytester.path.joinpath("baselines.json").write_text("{}")
    result = pytester.runpytest("--rocm-baselines=baselines.json")
    result.stderr.fnmatch_lines(["ERROR: --rocm-baselines: *baselines.json is a file; expected a folder*"])


def test_all_options_share_one_help_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "rocm-validate: GPU stack validation:",
            "  --rocm-suite=LIST*",
            "  --rocm-baselines=DIR*",
            "  --rocm-device=INDEX|cpu*",
            "  --rocm-report=PATH*",
            "  --update-baselines*",
            "  --rocm-strict*",
        ]
    )
