"""The option machinery every suite plugin uses, and the run-wide options resolved once into `Settings`.

Each suite plugin owns its options: its `pytest_addoption` adds its `OptionSpec`s to the one
rocm-validate group (`add_spec`), and its `pytest_configure` parses them once, with the typed
parsers here, into that suite's settings. The run-wide options (suites, level, timeout,
baselines, device, reports, strict, --update-baselines) are declared and parsed here.

Precedence is command line > environment > ini > default, settled in `raw_value` alone. A
relative path follows one rule (`given_path`): from the current directory on the command line
and in the environment, from the ini file's folder in the ini file. Every parser raises
`UsageError` (rocm_validate.errors) naming the option, the bad value and the accepted forms.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from rocm_validate.core import levels
from rocm_validate.core.suites import SUITES, suites_named_by
from rocm_validate.errors import UsageError
from rocm_validate.platform.selection import DeviceSelection

GROUP = "rocm-validate"
GROUP_DESCRIPTION = "rocm-validate: GPU stack validation"
ENVIRONMENT = " (environment)"
INI = " (ini)"

T = TypeVar("T")


@dataclass(frozen=True)
class OptionSpec:
    """One option: its command-line flag, ini key, environment variable and help."""

    flag: str
    ini: str | None
    env: str | None
    help: str
    metavar: str
    default: str | None = None


SUITE = OptionSpec(
    "--rocm-suite",
    "rocm_suite",
    "ROCM_VALIDATE_SUITE",
    "suites to run, comma-separated: preflight, correctness, perf, convergence, collectives or all (default: correctness)",
    "LIST",
    "correctness",
)
BASELINES = OptionSpec(
    "--rocm-baselines",
    "rocm_baselines",
    "ROCM_VALIDATE_BASELINES",
    "folder of per-device baselines (default: baselines/ at the rootdir)",
    "DIR",
)
DEVICE = OptionSpec(
    "--rocm-device",
    "rocm_device",
    "ROCM_VALIDATE_DEVICE",
    "device(s) to validate: a GPU index, a comma list of indices (0,3,5), 'all' (every GPU, one pinned "
    "pytest-xdist worker each) or 'cpu' (default: GPU 0, or the CPU when there is no GPU)",
    "INDEX|LIST|all|cpu",
)
SUMMARY = OptionSpec(
    "--rocm-summary",
    None,
    None,
    "write a markdown summary (device and stack, suites, metrics per GPU, failures) to this path, e.g. "
    "$GITHUB_STEP_SUMMARY",
    "PATH",
)
LEVEL = OptionSpec(
    "--rocm-level",
    "rocm_level",
    "ROCM_VALIDATE_LEVEL",
    "test level: quick (a smoke check of every suite, 60 s on one GPU), standard (default) or extended "
    "(longer windows, sustained load, repeatability)",
    "LEVEL",
)
TIMEOUT = OptionSpec(
    "--rocm-timeout",
    "rocm_timeout",
    "ROCM_VALIDATE_TIMEOUT",
    "per-test timeout in seconds for every test (default: by suite and level, see docs/levels.md)",
    "SECONDS",
)
REPORT = OptionSpec(
    "--rocm-report",
    None,
    None,
    "write a JSON report (device, environment, per-test results and metrics) to this path",
    "PATH",
)
UPDATE_FLAG = "--update-baselines"
ACCEPT_FLAG = "--rocm-accept-regressions"
STRICT_FLAG = "--rocm-strict"
STRICT_INI = "rocm_strict"
STRICT_HELP = (
    "CI gating: a check that was not validated (no baseline, no RCP, a backend refusing a supported case) "
    "fails instead of skipping"
)


@dataclass(frozen=True)
class Settings:
    """What this run was asked to do; resolved once in pytest_configure."""

    suites: frozenset[str]
    update_baselines: bool
    baselines_dir: Path
    device: DeviceSelection
    report_path: Path | None
    strict: bool
    suite_given: bool  # --rocm-suite (or its env / ini twin) was set explicitly
    accept_regressions: bool = False  # --rocm-accept-regressions: --update-baselines records regressions too
    level: str = levels.DEFAULT_LEVEL  # quick, standard or extended (core.levels)
    timeout_s: float | None = None  # --rocm-timeout: one per-test timeout for every test
    summary_path: Path | None = None  # --rocm-summary: the markdown summary

    @property
    def node_run(self) -> bool:
        """--rocm-device=all or a list: every selected GPU validated, one pinned worker each."""
        return self.device.node_run

    def summary(self) -> dict[str, object]:
        """The settings as the JSON report records them."""
        return {
            "suites": sorted(self.suites),
            "update_baselines": self.update_baselines,
            "baselines_dir": str(self.baselines_dir),
            "device": self.device.argument,
            "strict": self.strict,
            "level": self.level,
        }


# --- the machinery every suite plugin uses ------------------------------------------------------


def add_spec(parser: pytest.Parser, spec: OptionSpec) -> None:
    """Register one valued option in the rocm-validate group, and its ini twin if it has one."""
    group = parser.getgroup(GROUP, GROUP_DESCRIPTION)
    group.addoption(spec.flag, action="store", default=None, metavar=spec.metavar, help=spec.help)
    if spec.ini:
        parser.addini(spec.ini, spec.help, default=None)


def add_flag(parser: pytest.Parser, flag: str, help: str) -> None:
    """Register an on/off option (no value) in the rocm-validate group."""
    parser.getgroup(GROUP, GROUP_DESCRIPTION).addoption(flag, action="store_true", default=False, help=help)


# The variable a value usually comes from, named when it expanded to nothing.
USUAL_VARIABLES = {"--rocm-summary": "GITHUB_STEP_SUMMARY"}


def empty_value_problem(flag: str, value: str, environ: Mapping[str, str]) -> str:
    """The usage error for an empty command-line value (`--rocm-report=$UNSET`): never the
    current directory or the default in silence."""
    variable = USUAL_VARIABLES.get(flag)
    if variable is None:
        why = "a shell variable that expanded to nothing?"
    else:
        state = "set here, so it came from another variable" if environ.get(variable) else "unset here"
        why = f"as {flag}=${variable} gives where {variable} is not set: {variable} is {state}; GitHub Actions sets it only inside a workflow step"
    return f"{flag}={value!r}: an empty value ({why}); give a value, or leave the option out for its default"


def refuse_empty_values(config: pytest.Config) -> None:
    """Every rocm-validate option given an empty value on the command line is a usage error
    naming it (each option's dest is its flag's: --rocm-report -> rocm_report)."""
    for dest, value in sorted(vars(config.option).items()):
        if dest.startswith("rocm_") and isinstance(value, str) and not value.strip():
            raise UsageError(empty_value_problem("--" + dest.replace("_", "-"), value, os.environ))


def raw_value(config: pytest.Config, spec: OptionSpec) -> tuple[str | None, str]:
    """The value of an option and where it came from (command line > environment > ini). An
    empty environment variable or ini value counts as unset; an empty command-line value is a
    usage error."""
    value = config.getoption(spec.flag)
    if value is not None:
        if not str(value).strip():
            raise UsageError(empty_value_problem(spec.flag, str(value), os.environ))
        return str(value), spec.flag
    if spec.env and os.environ.get(spec.env):
        return os.environ[spec.env], spec.env + ENVIRONMENT
    if spec.ini:
        ini_value = config.getini(spec.ini)
        if ini_value:
            return str(ini_value).strip(), spec.ini + INI
    return spec.default, spec.flag


def source_name(source: str) -> str:
    """'ROCM_VALIDATE_DEVICE (environment)' -> 'ROCM_VALIDATE_DEVICE', as a message shows how to set it."""
    return source.removesuffix(ENVIRONMENT).removesuffix(INI)


def parse_or_default(config: pytest.Config, spec: OptionSpec, parse: Callable[[str, str], T], default: T) -> T:
    """The option parsed by `parse(value, source)`, or `default` when it is not set anywhere."""
    value, source = raw_value(config, spec)
    return default if value is None else parse(value, source)


def given_path(config: pytest.Config, value: str, source: str) -> Path:
    """The one rule for a path an option names: a relative one is taken from the folder of the
    ini file when the ini key gave it, else from the directory pytest was started in. A blank
    value (an environment variable of spaces) is a usage error, never the current directory."""
    if not value.strip():
        raise UsageError(empty_value_problem(source_name(source), value, os.environ))
    if source.endswith(INI):
        base = config.inipath.parent if config.inipath is not None else config.rootpath
    else:
        base = config.invocation_params.dir
    return (base / Path(value).expanduser()).resolve()


def existing_folder(config: pytest.Config, spec: OptionSpec, expected: str) -> Path | None:
    """The folder an option names (None when unset); one that does not exist is a usage error
    saying what was `expected` there ('a folder of <device-key>.json floors')."""
    value, source = raw_value(config, spec)
    if value is None:
        return None
    folder = given_path(config, value, source)
    if not folder.is_dir():
        found = f"{folder} is a file" if folder.exists() else f"no such folder ({folder})"
        raise UsageError(f"{source_name(source)}={value!r}: {found}; expected {expected}")
    return folder


def writable_folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in `folder` (making it if missing), or None when they can:
    proven by creating and removing a file there, as permissions alone do not say (root writes
    anywhere the bits allow, yet not in /proc or on a read-only mount)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{folder} cannot be created ({exc.strerror or exc})"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".rocm-validate-", suffix=".probe", dir=folder)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as exc:
        return f"a file cannot be created in {folder} ({exc.strerror or exc})"
    return None


def positive_number(
    value: str,
    source: str,
    unit: str,
    example: str,
    within: tuple[float, float] | None = None,
    why: str = "",
) -> float:
    """'600' -> 600.0: a positive finite number of `unit`, or one `within` (low, high) inclusive;
    `why` explains the lower bound in the message."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if within is None:
        if 0 < number < float("inf"):
            return number
        raise UsageError(f"{source}={value!r}: expected a positive number of {unit}, e.g. {example}")
    low, high = within
    if low <= number <= high:
        return number
    raise UsageError(f"{source}={value!r}: expected a {unit} from {low:g}{why} to {high:g}, e.g. {example}")


def whole_number(
    value: str, source: str, unit: str, example: str, low: int, high: int | None = None, why: str = ""
) -> int:
    """'10' -> 10: a whole number of `unit`, at least `low` (and at most `high` when given);
    `why` explains the bounds in the message."""
    text = value.strip()
    if text.isdigit() and low <= int(text) and (high is None or int(text) <= high):
        return int(text)
    bounds = f" from {low} to {high}" if high is not None else f", at least {low}"
    raise UsageError(f"{source}={value!r}: expected a whole number of {unit}{bounds}{why}, e.g. {example}")


# --- the run-wide options ---------------------------------------------------------------------


def add_options(parser: pytest.Parser) -> None:
    """Register the run-wide options (each suite plugin adds its own to the same group)."""
    for spec in (SUITE, LEVEL, TIMEOUT, BASELINES, DEVICE, REPORT, SUMMARY):
        add_spec(parser, spec)
    add_flag(parser, UPDATE_FLAG, "record this run's measurements as the new baselines (only passing tests write)")
    add_flag(
        parser,
        ACCEPT_FLAG,
        f"with {UPDATE_FLAG}: also record measurements worse than their baseline (refused otherwise)",
    )
    parser.getgroup(GROUP).addoption(STRICT_FLAG, action="store_true", default=None, help=STRICT_HELP)
    parser.addini(STRICT_INI, STRICT_HELP, type="bool", default=False)


def parse_suites(value: str, source: str = SUITE.flag) -> frozenset[str]:
    """'perf,correctness' -> {'perf', 'correctness'}; 'all' -> every suite."""
    names = [part.strip().lower() for part in value.split(",") if part.strip()]
    if not names:
        raise UsageError(f"{source}: expected a suite name, found an empty value; accepted: {_suite_forms()}")
    unknown = [name for name in names if name != "all" and name not in SUITES]
    if unknown:
        raise UsageError(
            f"{source}={value!r}: unknown suite {', '.join(repr(u) for u in unknown)}; accepted: {_suite_forms()}"
        )
    return frozenset(SUITES) if "all" in names else frozenset(names)


def _suite_forms() -> str:
    return ", ".join(SUITES) + ", all (comma-separated, e.g. --rocm-suite=correctness,perf)"


def parse_level(value: str, source: str = LEVEL.flag) -> str:
    try:
        return levels.parse_level(value, source)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


MIN_TIMEOUT_S = 1.0  # shorter, pytest-timeout's timer fires inside pytest's own hooks: INTERNALERROR, exit 3
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week; far longer overflows the watchdog's timers (1e308: INTERNALERROR, exit 3)


def parse_timeout(value: str, source: str = TIMEOUT.flag) -> float:
    """'600' -> 600.0; a timeout is a number of seconds, from MIN_TIMEOUT_S to MAX_TIMEOUT_S."""
    seconds = positive_number(value, source, "seconds", f"{TIMEOUT.flag}=600")
    if seconds < MIN_TIMEOUT_S:
        raise UsageError(
            f"{source}={value!r}: expected at least {MIN_TIMEOUT_S:g} second (a shorter limit ends the run inside "
            f"pytest itself, before any test can finish), e.g. {TIMEOUT.flag}=600"
        )
    return within_a_week(seconds, value, source, f"{TIMEOUT.flag}=600")


def within_a_week(seconds: float, value: str, source: str, example: str) -> float:
    """`seconds`, when a time limit of at most MAX_TIMEOUT_S; else a UsageError."""
    if seconds > MAX_TIMEOUT_S:
        raise UsageError(
            f"{source}={value!r}: expected at most {MAX_TIMEOUT_S:g} seconds (a week; no test of a suite needs "
            f"longer), e.g. {example}"
        )
    return seconds


def _baselines_dir(config: pytest.Config, update: bool) -> Path:
    """The baselines folder: baselines/ at the rootdir, or the one given (by the one rule for
    relative paths), which must exist or, with --update-baselines, is created and must be writable."""
    value, source = raw_value(config, BASELINES)
    if value is None:
        return config.rootpath / "baselines"
    if not update:
        expected = f"a folder of <device-key>.json baselines, or record new ones there with {UPDATE_FLAG}"
        folder = existing_folder(config, BASELINES, expected)
        assert folder is not None
        return folder
    folder = given_path(config, value, source)
    problem = f"{folder} is a file" if folder.is_file() else writable_folder_problem(folder)
    if problem:
        raise UsageError(f"{source_name(source)}={value!r}: {UPDATE_FLAG} cannot write there: {problem}")
    return folder


def _suites(config: pytest.Config) -> tuple[frozenset[str], bool]:
    """The selected suites and whether the user chose them. Without --rocm-suite (or its twins),
    the suites whose folders or tests were named on the command line, else correctness."""
    value, source = raw_value(config, SUITE)
    given = source != SUITE.flag or config.getoption(SUITE.flag) is not None
    if given:
        return parse_suites(value or "", source), True
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        named = suites_named_by(list(config.args), config.invocation_params.dir, config.rootpath)
        if named:
            return frozenset(named), False
    return parse_suites(SUITE.default or "correctness", SUITE.flag), False


def _strict(config: pytest.Config) -> bool:
    """--rocm-strict, else the ini's rocm_strict; a value that is no truth value names the key."""
    flag = config.getoption(STRICT_FLAG)
    if flag is not None:
        return bool(flag)
    try:
        return bool(config.getini(STRICT_INI))
    except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises UsageError without the key's name
        raise UsageError(
            f"{STRICT_INI} in {config.inipath}: {exc}; expected true or false (yes / no, 1 / 0, on / off), or "
            f"{STRICT_FLAG} on the command line"
        ) from None


def resolve_settings(config: pytest.Config, report_path: Path | None, summary_path: Path | None) -> Settings:
    """Read every run-wide option once (the output paths were claimed before, `core.outputs`);
    raises UsageError on a bad value."""
    suites, suite_given = _suites(config)
    update = bool(config.getoption(UPDATE_FLAG))
    accept = bool(config.getoption(ACCEPT_FLAG))
    if accept and not update:
        raise UsageError(f"{ACCEPT_FLAG} only applies with {UPDATE_FLAG}; add {UPDATE_FLAG}")
    return Settings(
        suites=suites,
        update_baselines=update,
        baselines_dir=_baselines_dir(config, update),
        device=parse_or_default(config, DEVICE, DeviceSelection.parse, DeviceSelection()),
        report_path=report_path,
        summary_path=summary_path,
        strict=_strict(config),
        suite_given=suite_given,
        accept_regressions=accept,
        level=parse_or_default(config, LEVEL, parse_level, levels.DEFAULT_LEVEL),
        timeout_s=parse_or_default(config, TIMEOUT, parse_timeout, None),
    )
