"""Command-line options, their ini twins and environment variables, resolved once into `Settings`.

Precedence is command line > environment > ini > default, settled in `raw_value` alone.
Every parser raises `UsageError` (rocm_validate.errors) naming the option, the bad value and the accepted forms.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from rocm_validate.errors import UsageError

# In run order: preflight first (seconds long; a misconfigured host explains what follows).
SUITES: tuple[str, ...] = ("preflight", "correctness", "perf", "convergence", "collectives")
# Suites that measure the node as one group (every selected GPU together) rather than each GPU
# on its own: in a pinned-worker run their tests run once, after every GPU's own tests.
NODE_WIDE_SUITES: tuple[str, ...] = ("collectives",)
# Suites whose metrics are gated against stored baselines (named in the command that records them).
BASELINE_SUITES: tuple[str, ...] = ("perf", "collectives")
GROUP = "rocm-validate"

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


# --- preflight suite
HOST_ROOT = OptionSpec(
    "--rocm-host-root",
    "rocm_host_root",
    "ROCM_VALIDATE_HOST_ROOT",
    "folder the preflight suite reads the host's /proc, /sys and /dev from (default: /; e.g. the host's root mounted into a container)",
    "DIR",
)

# --- perf suite
THRESHOLD_FORMS = (
    "PATTERN [floor=FRACTION] [k=NUMBER] [cap=FRACTION] [clock_floor=FRACTION] [per_clock=yes|no] "
    "[detect=FRACTION|none] [backend=rocm|cuda|cpu] [info=REASON]"
)
WINDOW = OptionSpec(
    "--rocm-perf-window",
    "rocm_perf_window",
    "ROCM_VALIDATE_PERF_WINDOW",
    "scale every perf measurement window by this factor (default 1; more is quieter and slower)",
    "FACTOR",
)
BENCHMARK_JSON = OptionSpec(
    "--rocm-benchmark-json",
    None,
    None,
    "also write the perf metrics as pytest-benchmark JSON (for dashboards) to this path",
    "PATH",
)
FLOORS = OptionSpec(
    "--rocm-floors",
    "rocm_floors",
    "ROCM_VALIDATE_FLOORS",
    "folder of floors of your own (<device-key>.json, the baselines' format), before the shipped table",
    "DIR",
)
THRESHOLDS_INI = "rocm_perf_thresholds"

# --- collectives suite
CPU_RANKS = OptionSpec(
    "--rocm-cpu-ranks",
    "rocm_cpu_ranks",
    "ROCM_VALIDATE_CPU_RANKS",
    "world size of the collectives suite on the CPU: gloo ranks on this host (default 2)",
    "N",
)
COLLECTIVE_TIMEOUT = OptionSpec(
    "--rocm-collective-timeout",
    "rocm_collective_timeout",
    "ROCM_VALIDATE_COLLECTIVE_TIMEOUT",
    "seconds a collective may wait for its peers before the rank that is missing is named and the group "
    "is ended (default 60 on GPUs, 20 on the CPU)",
    "SECONDS",
)
THRESHOLDS_HELP = f"per-metric gate thresholds, one rule a line: {THRESHOLD_FORMS}"

# --- convergence suite
DEFAULT_RULESET = "5.0.0"  # MLPerf training ruleset of the RCP check
RESULTS = OptionSpec(
    "--rocm-mlperf-results",
    "rocm_mlperf_results",
    "ROCM_VALIDATE_MLPERF_RESULTS",
    "folder of MLPerf result_*.txt files (MLLOG) that the convergence suite scores and RCP-checks",
    "DIR",
)
RULESET = OptionSpec(
    "--rocm-ruleset",
    "rocm_ruleset",
    "ROCM_VALIDATE_RULESET",
    f"MLPerf training ruleset of the RCP check and compliance rules (default: {DEFAULT_RULESET})",
    "X.Y.Z",
)
RCP_FILE = OptionSpec(
    "--rocm-mlperf-rcp",
    "rocm_mlperf_rcp",
    "ROCM_VALIDATE_MLPERF_RCP",
    "RCP file (mlperf-logging format) for --rocm-mlperf-results instead of mlperf-logging's packaged RCPs",
    "FILE",
)
SEEDS = OptionSpec(
    "--rocm-convergence-seeds",
    "rocm_convergence_seeds",
    "ROCM_VALIDATE_CONVERGENCE_SEEDS",
    "mini-BERT runs per candidate (default: 10 on a GPU, as MLPerf BERT; 5 on the CPU); RCPs record twice as many",
    "N",
)


@dataclass(frozen=True)
class Settings:
    """What this run was asked to do; resolved once in pytest_configure."""

    suites: frozenset[str]
    update_baselines: bool
    baselines_dir: Path
    device: int | str | tuple[int, ...] | None  # GPU index, "cpu", "all", a list of indices, or None for automatic
    report_path: Path | None
    strict: bool
    suite_given: bool  # --rocm-suite (or its env / ini twin) was set explicitly
    device_source: str = "--rocm-device"  # the option or variable that chose the device
    accept_regressions: bool = False  # --rocm-accept-regressions: --update-baselines records regressions too
    level: str = "standard"  # quick, standard or extended (core.levels)
    timeout_s: float | None = None  # --rocm-timeout: one per-test timeout for every test
    baselines_given: str | None = None  # --rocm-baselines as the user wrote it, repeated in every hint
    summary_path: Path | None = None  # --rocm-summary: the markdown summary

    @property
    def node_run(self) -> bool:
        """--rocm-device=all or a list: every selected GPU validated, one pinned worker each."""
        return is_node_selection(self.device)

    def command(self, *words: str) -> str:
        """A pytest command line for a hint, carrying the user's --rocm-baselines."""
        given = [f"{BASELINES.flag}={self.baselines_given}"] if self.baselines_given else []
        return shlex.join(["pytest", *words, *given])

    @property
    def update_command(self) -> str:
        """The command that records this run's baselines: the perf suite's, or the collectives
        suite's (with the devices it ran on) when that is what this run measures."""
        suites = sorted(set(BASELINE_SUITES) & self.suites) or ["perf"]
        devices = [f"{DEVICE.flag}={self.device_argument()}"] if self.node_run else []
        return self.command(f"--rocm-suite={','.join(suites)}", *devices, "--update-baselines")

    def device_argument(self) -> str:
        """The --rocm-device value that reproduces this run's device choice."""
        if self.device is None:
            return "auto"
        if isinstance(self.device, tuple):
            return ",".join(str(index) for index in self.device)
        return str(self.device)

    def summary(self) -> dict[str, object]:
        """The settings as the JSON report records them."""
        return {
            "suites": sorted(self.suites),
            "update_baselines": self.update_baselines,
            "baselines_dir": str(self.baselines_dir),
            "device": self.device_argument(),
            "strict": self.strict,
            "level": self.level,
        }


def add_spec(parser: pytest.Parser, spec: OptionSpec) -> None:
    """Register one valued option in the rocm-validate group, and its ini twin if it has one."""
    group = parser.getgroup(GROUP, "rocm-validate: GPU stack validation")
    group.addoption(spec.flag, action="store", default=None, metavar=spec.metavar, help=spec.help)
    if spec.ini:
        parser.addini(spec.ini, spec.help, default=None)


def add_options(parser: pytest.Parser) -> None:
    """Register every suite's options in the one rocm-validate group."""
    for spec in (
        SUITE,
        LEVEL,
        TIMEOUT,
        BASELINES,
        DEVICE,
        REPORT,
        SUMMARY,
        HOST_ROOT,
        WINDOW,
        FLOORS,
        BENCHMARK_JSON,
        RESULTS,
        RULESET,
        RCP_FILE,
        SEEDS,
        CPU_RANKS,
        COLLECTIVE_TIMEOUT,
    ):
        add_spec(parser, spec)
    parser.addini(THRESHOLDS_INI, THRESHOLDS_HELP, type="linelist", default=[])
    group = parser.getgroup(GROUP)
    group.addoption(
        "--update-baselines",
        action="store_true",
        default=False,
        help="record this run's measurements as the new baselines (only passing tests write)",
    )
    group.addoption(
        "--rocm-accept-regressions",
        action="store_true",
        default=False,
        help="with --update-baselines: also record measurements worse than their baseline (refused otherwise)",
    )
    group.addoption("--rocm-strict", action="store_true", default=None, help=STRICT_HELP)
    parser.addini("rocm_strict", STRICT_HELP, type="bool", default=False)


STRICT_HELP = (
    "CI gating: a check that was not validated (no baseline, no RCP, a backend refusing a supported case) "
    "fails instead of skipping"
)
# The shortest --rocm-perf-window: below it a window holds too few rounds to measure its own noise.
MIN_WINDOW_FACTOR = 0.25
MAX_WINDOW_FACTOR = 20.0


def raw_value(config: pytest.Config, spec: OptionSpec) -> tuple[str | None, str]:
    """The value of an option and where it came from (command line > environment > ini)."""
    value = config.getoption(spec.flag)
    if value is not None:
        return str(value), spec.flag
    if spec.env and os.environ.get(spec.env):
        return os.environ[spec.env], f"{spec.env} (environment)"
    if spec.ini:
        ini_value = config.getini(spec.ini)
        if ini_value:
            return str(ini_value).strip(), f"{spec.ini} (ini)"
    return spec.default, spec.flag


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
    from rocm_validate.core.levels import parse_level as level

    try:
        return level(value, source)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def parse_timeout(value: str, source: str = TIMEOUT.flag) -> float:
    """'600' -> 600.0; a timeout must be a positive number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not (seconds > 0 and seconds < float("inf")):
        raise UsageError(f"{source}={value!r}: expected a positive number of seconds, e.g. {TIMEOUT.flag}=600")
    return seconds


_DEVICE_FORMS = "a GPU index (0, 1, ...), a comma list of indices (0,3,5), 'all', 'cpu' or 'auto'"


def parse_device(value: str, source: str = DEVICE.flag) -> int | str | tuple[int, ...] | None:
    """'0' -> 0, 'cpu' -> 'cpu', 'auto' -> None, 'all' -> 'all', '0,3,5' -> (0, 3, 5)."""
    text = value.strip().lower()
    if text in ("cpu", "auto", "all"):
        return None if text == "auto" else text
    if "," in text:
        parts = [part.strip() for part in text.split(",")]
        indices = [_gpu_index(part) for part in parts]
        if any(index is None for index in indices):
            bad = ", ".join(repr(p) for p, i in zip(parts, indices) if i is None)
            raise UsageError(
                f"{source}={value!r}: {bad} is not a GPU index; expected {_DEVICE_FORMS}, e.g. {DEVICE.flag}=0,1"
            )
        repeated = sorted({i for i in indices if indices.count(i) > 1})
        if repeated:
            raise UsageError(
                f"{source}={value!r}: GPU {', '.join(map(str, repeated))} is listed twice; name each GPU once"
            )
        return tuple(i for i in indices if i is not None)
    index = _gpu_index(text)
    if index is not None:
        return index
    raise UsageError(f"{source}={value!r}: expected {_DEVICE_FORMS}, e.g. {DEVICE.flag}=0")


def _gpu_index(text: str) -> int | None:
    """'3', 'cuda:3', 'hip:3' -> 3; anything else -> None."""
    for prefix in ("cuda:", "hip:", "rocm:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return int(text) if text.isdigit() else None


def is_node_selection(device: object) -> bool:
    """Whether a parsed --rocm-device value selects a set of GPUs ('all' or a list)."""
    return device == "all" or isinstance(device, tuple)


def parse_or_default(config: pytest.Config, spec: OptionSpec, parse: Callable[[str, str], T], default: T) -> T:
    value, source = raw_value(config, spec)
    return default if value is None else parse(value, source)


def output_file(config: pytest.Config, spec: OptionSpec, example: str) -> Path | None:
    """The file a command-line option names for output, checked now so no measurement of the run
    is lost to a late write error: a folder, or a place that cannot be written, is a usage error."""
    value = config.getoption(spec.flag)
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if path.is_dir():
        raise UsageError(f"{spec.flag}={value!r} is a folder; expected a file path such as {example}")
    problem = writable_folder_problem(path.parent)
    if problem:
        raise UsageError(
            f"{spec.flag}={value!r}: cannot write there: {problem}; choose a writable path such as {example}"
        )
    return path


def writable_folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in `folder` (making it if missing), or None when they can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{folder} cannot be created ({exc.strerror or exc})"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by this user"
    return None


def _source_name(source: str) -> str:
    """'ROCM_VALIDATE_DEVICE (environment)' -> 'ROCM_VALIDATE_DEVICE'."""
    return source.removesuffix(" (environment)").removesuffix(" (ini)")


def _baselines_dir(config: pytest.Config, update: bool) -> tuple[Path, str | None]:
    """The baselines folder and the value the user gave. A given folder must exist (or, with
    --update-baselines, is created and must be writable); a relative one is taken from the
    current directory (from the ini file's folder for the ini key)."""
    value, source = raw_value(config, BASELINES)
    if value is None:
        return config.rootpath / "baselines", None
    base = config.rootpath if source.endswith("(ini)") else config.invocation_params.dir
    folder = (base / Path(value).expanduser()).resolve()
    name = _source_name(source)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{name}={value!r}: {folder} is a file; expected a folder of <device-key>.json baselines")
    if update:
        problem = writable_folder_problem(folder)
        if problem:
            raise UsageError(f"{name}={value!r}: --update-baselines cannot write there: {problem}")
    elif not folder.is_dir():
        raise UsageError(
            f"{name}={value!r}: no such folder ({folder}); give an existing folder of baselines, or record new ones "
            f"there with --update-baselines"
        )
    return folder, value


def _suites(config: pytest.Config) -> tuple[frozenset[str], bool]:
    """The selected suites and whether the user chose them. Without --rocm-suite (or its twins),
    the suites whose folders or tests were named on the command line, else correctness."""
    from rocm_validate.core.selection import suites_named_by

    value, source = raw_value(config, SUITE)
    given = source != SUITE.flag or config.getoption(SUITE.flag) is not None
    if given:
        return parse_suites(value or "", source), True
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        named = suites_named_by(list(config.args), config.invocation_params.dir, config.rootpath)
        if named:
            return frozenset(named), False
    return parse_suites(SUITE.default or "correctness", SUITE.flag), False


def resolve_settings(config: pytest.Config) -> Settings:
    """Read every core option once; raises UsageError on a bad value."""
    suites, suite_given = _suites(config)
    update = bool(config.getoption("--update-baselines"))
    accept = bool(config.getoption("--rocm-accept-regressions"))
    if accept and not update:
        raise UsageError("--rocm-accept-regressions only applies with --update-baselines; add --update-baselines")
    baselines, baselines_given = _baselines_dir(config, update)
    strict_flag = config.getoption("--rocm-strict")
    _, device_source = raw_value(config, DEVICE)
    return Settings(
        suites=suites,
        update_baselines=update,
        baselines_dir=baselines,
        device=parse_or_default(config, DEVICE, parse_device, None),
        device_source=_source_name(device_source),
        report_path=output_file(config, REPORT, "report.json"),
        summary_path=output_file(config, SUMMARY, "summary.md"),
        strict=bool(strict_flag) if strict_flag is not None else bool(config.getini("rocm_strict")),
        suite_given=suite_given,
        accept_regressions=accept,
        baselines_given=baselines_given,
        level=parse_or_default(config, LEVEL, parse_level, "standard"),
        timeout_s=parse_or_default(config, TIMEOUT, parse_timeout, None),
    )
