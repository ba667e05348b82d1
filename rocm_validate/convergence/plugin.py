"""pytest side of the convergence suite: its options, fixtures and progress output.

Imports only the standard library, pytest and torch-free project modules at module level;
training and scoring are imported inside the fixtures that need them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rocm_validate.convergence import mlperf
from rocm_validate.core import options
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.commands import Commands
from rocm_validate.core.requirements import not_validated
from rocm_validate.core.session import is_xdist_worker, run_state
from rocm_validate.errors import MlperfError, UsageError

if TYPE_CHECKING:
    from rocm_validate.convergence.check import MiniBertCheck
    from rocm_validate.convergence.mlperf import RunSetScore
    from rocm_validate.convergence.rcps import StoredRcp
    from rocm_validate.platform.devices import DeviceInfo

RECORD_TEST = "test_reference_records_convergence_points"
RESULTS = options.OptionSpec(
    "--rocm-mlperf-results",
    "rocm_mlperf_results",
    "ROCM_VALIDATE_MLPERF_RESULTS",
    "folder of MLPerf result_*.txt files (MLLOG) that the convergence suite scores and RCP-checks",
    "DIR",
)
RULESET = options.OptionSpec(
    "--rocm-ruleset",
    "rocm_ruleset",
    "ROCM_VALIDATE_RULESET",
    f"MLPerf training ruleset of the RCP check and compliance rules (default: {mlperf.DEFAULT_RULESET})",
    "X.Y.Z",
)
RCP_FILE = options.OptionSpec(
    "--rocm-mlperf-rcp",
    "rocm_mlperf_rcp",
    "ROCM_VALIDATE_MLPERF_RCP",
    "RCP file (mlperf-logging format) for --rocm-mlperf-results instead of mlperf-logging's packaged RCPs",
    "FILE",
)
SEEDS = options.OptionSpec(
    "--rocm-convergence-seeds",
    "rocm_convergence_seeds",
    "ROCM_VALIDATE_CONVERGENCE_SEEDS",
    "mini-BERT runs per candidate (default: 10 on a GPU, as MLPerf BERT; 5 on the CPU); RCPs record twice as many",
    "N",
)
# Node-wide in a whole-node run: they pool the runs every GPU trained (its share of the seeds).
JUDGE_TEST = "test_candidate_converges_like_the_reference"
PEERS_TEST = "test_every_gpu_converges_like_its_peers"
RUNS_METRIC = "mini_bert.runs.samples_to_converge"  # each GPU's runs, against its peers'


@dataclass(frozen=True)
class ConvergenceSettings:
    """What the convergence suite was asked to do; resolved once in pytest_configure."""

    results_dir: Path | None
    ruleset: str
    rcp_file: Path | None
    seeds: int | None  # None: the mini-BERT preset's default


def pytest_addoption(parser: pytest.Parser) -> None:
    for spec in (RESULTS, RULESET, RCP_FILE, SEEDS):
        options.add_spec(parser, spec)


def _results_folder(config: pytest.Config) -> Path | None:
    folder = options.existing_folder(config, RESULTS, "a folder of MLPerf result_*.txt files")
    if folder is not None and not mlperf.result_files(folder):
        value, source = options.raw_value(config, RESULTS)
        raise UsageError(
            f"{options.source_name(source)}={value!r}: the folder holds no result_*.txt files (MLPerf names each "
            f"run's log result_<n>.txt)"
        )
    return folder


def _ruleset(value: str, source: str) -> str:
    try:
        mlperf.require_ruleset(value.strip())
    except MlperfError as exc:
        raise UsageError(f"{source}={value!r}: {exc}") from None
    return value.strip()


def _rcp_file(config: pytest.Config) -> Path | None:
    value, source = options.raw_value(config, RCP_FILE)
    if value is None:
        return None
    path = options.given_path(config, value, source)
    try:
        mlperf.load_rcp_file(path)
    except MlperfError as exc:
        raise UsageError(f"{source}={value!r}: {exc}") from None
    return path


def _seeds(value: str, source: str) -> int:
    return options.whole_number(value, source, "seeds", "10", low=3, why=" (olympic scoring drops two)")


def resolve_settings(config: pytest.Config) -> ConvergenceSettings:
    """Read every convergence option once; raises UsageError on a bad value, and on results whose
    benchmark has mlperf-logging's RCPs in another ruleset than the one asked for."""
    settings = ConvergenceSettings(
        results_dir=_results_folder(config),
        # only a ruleset asked for is checked: runs that never touch this suite need no mlperf-logging
        ruleset=options.parse_or_default(config, RULESET, _ruleset, mlperf.DEFAULT_RULESET),
        rcp_file=_rcp_file(config),
        seeds=options.parse_or_default(config, SEEDS, _seeds, None),
    )
    if settings.results_dir is not None and settings.rcp_file is None:
        logs = [mlperf.read_mllog(path) for path in mlperf.result_files(settings.results_dir)]
        try:
            mlperf.require_packaged_rcps(mlperf.common_benchmark(logs), settings.ruleset, RULESET.flag)
        except MlperfError as exc:
            raise UsageError(f"{RESULTS.flag}={str(settings.results_dir)!r}: {exc}") from None
    return settings


def pytest_configure(config: pytest.Config) -> None:
    run_state(config).put(resolve_settings(config))  # the convergence suite's part of the run context


def pytest_sessionstart(session: pytest.Session) -> None:
    """With the convergence suite selected, check this device's RCP file before any test runs:
    a corrupt one is a usage error naming the file and how to restore it, as for baselines."""
    config = session.config
    state = run_state(config)
    if "convergence" not in state.settings.suites or is_xdist_worker(config):
        return
    from rocm_validate.convergence.rcps import check_rcp_file, rcp_path
    from rocm_validate.errors import JsonFileError

    device = state.device()
    try:
        check_rcp_file(rcp_path(state.settings.baselines_dir, device.device_key), rcp_commands(config, device)[0])
    except JsonFileError as exc:
        raise UsageError(str(exc)) from None


def convergence_settings(config: pytest.Config) -> ConvergenceSettings:
    return run_state(config).part(ConvergenceSettings)


def pytest_rocm_node_wide(config: pytest.Config, nodeid: str) -> bool | None:
    """The verdicts that pool every GPU's share of the mini-BERT seeds run once, after the shares."""
    from rocm_validate.core.suites import suite_of_nodeid

    function = nodeid.split("::")[-1].split("[")[0]
    if function in (JUDGE_TEST, PEERS_TEST) and suite_of_nodeid(nodeid, config.rootpath) == "convergence":
        return True
    return None


# First: a firstresult hook, and the perf suite's answer (its gate's rule) covers any metric name,
# so this suite's own metric is answered before perf's can be.
@pytest.hookimpl(tryfirst=True)
def pytest_rocm_noise_band(
    config: pytest.Config, name: str, backend: str, dispersions: tuple[float | None, ...]
) -> tuple[float, str] | None:
    """A GPU's mini-BERT runs against its peers': the RCPs' run-to-run spread, not a timing's noise."""
    if name != RUNS_METRIC:
        return None
    from rocm_validate.convergence.check import peer_band

    return peer_band(*(tuple(dispersions) + (None, None))[:2])


# --- scoring MLPerf results ----------------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per result file of --rocm-mlperf-results."""
    if "mlperf_result_file" not in metafunc.fixturenames:
        return
    folder = convergence_settings(metafunc.config).results_dir
    if folder is None:
        skip = pytest.mark.skip(reason=f"needs {RESULTS.flag}=DIR (a folder of MLPerf result_*.txt files), found none")
        metafunc.parametrize("mlperf_result_file", [pytest.param(None, id="no-results", marks=skip)])
        return
    names = [path.name for path in mlperf.result_files(folder)]
    metafunc.parametrize("mlperf_result_file", names, ids=names)


@pytest.fixture(scope="session")
def mlperf_results(pytestconfig: pytest.Config) -> RunSetScore:
    """The --rocm-mlperf-results run set, scored: per-run facts, olympic mean, RCP verdict."""
    settings = convergence_settings(pytestconfig)
    if settings.results_dir is None:
        pytest.skip(f"needs {RESULTS.flag}=DIR (a folder of MLPerf result_*.txt files), found none")
    try:
        return mlperf.score_run_set(settings.results_dir, settings.ruleset, settings.rcp_file)
    except MlperfError as exc:
        fail_as("configuration", str(exc))


# --- the built-in mini-BERT benchmark -------------------------------------------------------


class ProgressLine:
    """Shows training progress while a test runs, past pytest's capture; silent in xdist workers.

    On a terminal each evaluation rewrites one line; in a log only the line ending a run is kept.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
        self._capture = config.pluginmanager.get_plugin("capturemanager")
        self._silent = is_xdist_worker(config) or self._reporter is None
        self._fresh = True

    def __call__(self, line: str, final: bool) -> None:
        reporter = self._reporter
        if self._silent or (not final and not reporter.isatty):
            return
        with self._capture.global_and_fixture_disabled() if self._capture else contextlib.nullcontext():
            if self._fresh:
                reporter.ensure_newline()
                self._fresh = False
            if reporter.isatty:
                reporter.rewrite(line, erase=True)
                if final:
                    reporter.write("\n")
            else:
                reporter.write_line(line)


def rcp_commands(config: pytest.Config, device: DeviceInfo) -> tuple[str, Callable[[str], str | None]]:
    """The command that records this device's mini-BERT RCPs, and the refusal of a regression
    while recording them (None when --rocm-accept-regressions lets it through)."""
    seeds = convergence_settings(config).seeds
    words = ("suites/convergence", *([f"{SEEDS.flag}={seeds}"] if seeds else []), "-k", RECORD_TEST)
    commands = Commands(run_state(config).settings, device)
    return commands.record(["convergence"], *words), lambda finding: commands.refusal(finding, ["convergence"], *words)


@pytest.fixture(scope="session")
def mini_bert(
    pytestconfig: pytest.Config, rocm_device: DeviceInfo, torch_device: Any, tmp_path_factory: pytest.TempPathFactory
) -> MiniBertCheck:
    """The built-in RCP benchmark on the selected device: records RCPs, checks candidates."""
    from rocm_validate.convergence.check import MiniBertCheck
    from rocm_validate.convergence.minibert import preset_for
    from rocm_validate.convergence.rcps import rcp_path

    if not mlperf.available_rulesets():
        pytest.fail(
            "mini-BERT needs mlperf-logging (its MLLOG writer and RCP checker), found none; install it with: pip install mlperf-logging",
            pytrace=False,
        )
    settings = convergence_settings(pytestconfig)
    spec = preset_for(torch_device.type)  # the size of the device the runs train on
    record_command, refusal = rcp_commands(pytestconfig, rocm_device)
    return MiniBertCheck(
        spec=spec,
        device=rocm_device,
        torch_device=torch_device,
        rcp_file=rcp_path(run_state(pytestconfig).settings.baselines_dir, rocm_device.device_key),
        record_command=record_command,
        seeds=settings.seeds or spec.seeds,
        workdir=_workdir(pytestconfig, tmp_path_factory),
        ruleset=settings.ruleset,
        progress=ProgressLine(pytestconfig),
        refusal=refusal,
    )


def _workdir(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the runs' result files go: in a whole-node run one folder every worker shares (the
    workers' base temporary folders are siblings, pytest-xdist's documented way to share files),
    so the pooled verdict reads every GPU's share; elsewhere a fresh folder."""
    node = run_state(config).node
    if node is None or node.gpu is None:
        return tmp_path_factory.mktemp("mini-bert")
    folder = tmp_path_factory.getbasetemp().parent / "mini-bert"
    folder.mkdir(exist_ok=True)
    return folder


def trained_here(config: pytest.Config) -> tuple[str, int | None]:
    """Who trains the runs of this process: 'GPU 1 (BDF ...)' and its index in a whole-node run,
    else the device's description."""
    state = run_state(config)
    node = state.node
    ref = node.gpu_ref(node.gpu) if node is not None and node.gpu is not None else None
    if ref is not None:
        return ref.label, ref.index
    device = state.device()
    return (f"GPU {device.index}" if device.is_gpu else "the CPU"), None


def require_rcp(config: pytest.Config, check: MiniBertCheck) -> StoredRcp:
    """The device's mini-BERT RCPs, called from a test: missing ones skip with the command that
    records them (not validated: a failure under --rocm-strict), a corrupt file fails naming it; under
    --update-baselines candidates are not checked."""
    from rocm_validate.errors import JsonFileError, RcpUnavailable

    __tracebackhide__ = True
    settings = run_state(config).settings
    if settings.update_baselines:
        pytest.skip(
            f"--update-baselines records the mini-BERT RCPs only ({RECORD_TEST}); run without it to check candidates"
        )
    try:
        return check.rcp()
    except RcpUnavailable as exc:
        not_validated(str(exc), "configuration", f"record this device's mini-BERT RCPs with {check.record_command}")
    except JsonFileError as exc:
        pytest.fail(str(exc), pytrace=False)
