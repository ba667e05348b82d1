"""The launch files in deploy/: they parse (bash -n, YAML), they ask for what a fleet run needs
(one task or pod per node, every GPU of it, the node's name, a shared reports folder), and every
command they run exists: each `rocm-validate` subcommand and option, each `pytest --rocm-*`
option, each option of the collectives' torchrun program."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_validate.cli.main import build_parser

yaml = pytest.importorskip("yaml", reason="needs PyYAML (the test extra), found none")

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SBATCH = DEPLOY / "slurm" / "rocm-validate.sbatch"
JOBS = {
    "amd.com/gpu": DEPLOY / "kubernetes" / "validate-job-amd.yaml",
    "nvidia.com/gpu": DEPLOY / "kubernetes" / "validate-job-nvidia.yaml",
}
MERGE = DEPLOY / "kubernetes" / "fleet-merge-job.yaml"


def commands(script: str) -> list[list[str]]:
    """The commands of a shell script (continuation lines joined, comments dropped), split into words."""
    joined = re.sub(r"\\\n\s*", " ", script)
    found = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            found.append(line)
    return [shlex.split(line, posix=True) for line in found if re.search(r"\b(pytest|rocm-validate|torchrun)\b", line)]


def invocations(words: list[str], program: str) -> list[list[str]]:
    """The arguments of each `program` among `words` (up to a shell operator)."""
    found = []
    for index, word in enumerate(words):
        if word == program:
            arguments = []
            for rest in words[index + 1 :]:
                if rest in ("||", "&&", "|", ";", ">", "2>&1") or rest.startswith(">"):
                    break
                arguments.append(rest)
            found.append(arguments)
    return found


def sbatch_commands() -> list[list[str]]:
    text = SBATCH.read_text()
    inner = re.findall(r"bash -c '(.*?)'", text, flags=re.S)
    return commands(re.sub(r"bash -c '.*?'", "", text, flags=re.S)) + [c for block in inner for c in commands(block)]


def job_script(path: Path) -> str:
    spec = yaml.safe_load(path.read_text())
    container = spec["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "-c"]
    return container["args"][0]


def pytest_options() -> set[str]:
    """Every option `pytest --help` lists here (this plugin's included)."""
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]+)", help_text))


def rocm_validate_accepts(arguments: list[str]) -> None:
    """Parse as `rocm-validate ...` would, shell variables standing for values."""
    build_parser().parse_args([re.sub(r"\$\{?\w+\}?", "X", a) for a in arguments])


@pytest.fixture(scope="module")
def options() -> set[str]:
    return pytest_options()


def test_the_sbatch_script_is_valid_bash():
    bash = shutil.which("bash")
    assert bash, "needs bash"
    done = subprocess.run([bash, "-n", str(SBATCH)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_sbatch_script_runs_one_task_per_node_on_every_gpu_named_as_slurm_names_the_node():
    text = SBATCH.read_text()
    assert "#SBATCH --ntasks-per-node=1" in text and "#SBATCH --exclusive" in text
    (run,) = [c for c in sbatch_commands() if "pytest" in c]
    assert "--rocm-device=all" in run and any(a.startswith("--rocm-report=$report.json") for a in run)
    assert 'report="$ROCM_VALIDATE_FLEET_DIR/$SLURMD_NODENAME"' in text


def test_every_command_of_the_sbatch_script_exists(options):
    found = sbatch_commands()
    for words in found:
        for arguments in invocations(words, "pytest"):
            assert {a.split("=", 1)[0] for a in arguments if a.startswith("--")} <= options
        for arguments in invocations(words, "rocm-validate"):
            rocm_validate_accepts(arguments)
    merge = [a for w in found for a in invocations(w, "rocm-validate")]
    assert merge and merge[0][:1] == ["fleet"] and "--expect" in merge[0]


def test_the_torchrun_steps_of_the_sbatch_script_run_the_collectives_and_training_programs_with_options_they_have():
    programs = [words[words.index("-m") + 1 :] for words in sbatch_commands() if "torchrun" in words]
    assert [p[0] for p in programs] == ["rocm_validate.collectives", "rocm_validate.collectives.training"]
    for program in programs:
        help_text = subprocess.run([sys.executable, "-m", program[0], "--help"], capture_output=True, text=True).stdout
        options = set(re.findall(r"(--[a-z][a-z0-9-]+)", help_text))
        assert {a for a in program[1:] if a.startswith("--")} <= options, program[0]


@pytest.mark.parametrize("resource", sorted(JOBS))
def test_the_kubernetes_job_is_indexed_one_pod_per_node_with_the_device_plugins_gpus(resource):
    spec = yaml.safe_load(JOBS[resource].read_text())
    assert (spec["apiVersion"], spec["kind"], spec["spec"]["completionMode"]) == ("batch/v1", "Job", "Indexed")
    pod = spec["spec"]["template"]["spec"]
    (spread,) = pod["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["maxSkew"], spread["whenUnsatisfiable"]) == (
        "kubernetes.io/hostname",
        1,
        "DoNotSchedule",
    )
    container = pod["containers"][0]
    assert set(container["resources"]["limits"]) == {resource}
    (host,) = [e for e in container["env"] if e["name"] == "ROCM_VALIDATE_HOST"]
    assert host["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/reports"}


def test_the_amd_and_nvidia_jobs_differ_only_in_the_gpu_resource():
    amd, nvidia = (yaml.safe_load(JOBS[r].read_text()) for r in ("amd.com/gpu", "nvidia.com/gpu"))
    limits = nvidia["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["amd.com/gpu"] = limits.pop("nvidia.com/gpu")
    assert amd == nvidia


@pytest.mark.parametrize("resource", sorted(JOBS))
def test_every_command_of_the_kubernetes_job_exists(resource, options):
    script = job_script(JOBS[resource])
    bash = shutil.which("bash")
    assert bash and subprocess.run([bash, "-n", "-c", script]).returncode == 0
    runs = [a for words in commands(script) for a in invocations(words, "pytest")]
    assert runs and all({a.split("=", 1)[0] for a in run if a.startswith("--")} <= options for run in runs)
    assert "--rocm-device=all" in runs[0]


def test_the_merge_job_runs_rocm_validate_fleet_on_the_reports_volume():
    spec = yaml.safe_load(MERGE.read_text())
    container = spec["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["rocm-validate", "fleet"]
    rocm_validate_accepts(container["command"][1:])
    assert "gpu" not in str(container.get("resources", {}))
    claims = {v["persistentVolumeClaim"]["claimName"] for v in spec["spec"]["template"]["spec"]["volumes"]}
    pvc = yaml.safe_load((DEPLOY / "kubernetes" / "reports-pvc.yaml").read_text())
    assert claims == {pvc["metadata"]["name"]} and pvc["spec"]["accessModes"] == ["ReadWriteMany"]


def test_an_unknown_option_is_caught_by_these_checks(options):
    with pytest.raises(SystemExit):
        rocm_validate_accepts(["fleet", "/reports", "--expected", "x"])
    assert "--rocm-devices" not in options and "--rocm-device" in options
