"""The rocm-validate command."""

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_validate.cli import main as cli
from rocm_validate.platform import offline
from rocm_validate.results import jsonfile
from rocm_validate.results.report import DEVICES_SCHEMA


def test_devices_json_lists_this_machines_cpu_in_schema(capsys):
    assert cli.main(["devices", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert jsonfile.schema_errors(data, DEVICES_SCHEMA) == []
    cpu = data["devices"][-1]
    assert cpu["backend"] == "cpu" and cpu["fp8_formats"] == ["e4m3fn", "e5m2"]


def test_devices_text_names_each_device_and_its_stack(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "key cpu-" in out and "torch " in out


def test_the_console_script_is_installed_and_runs():
    done = subprocess.run([sys.executable, "-m", "rocm_validate.cli.main", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("rocm-validate ")


def test_an_unknown_command_exits_2_with_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["frobnicate"])
    assert exited.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


# --- devices --from DIR and bundle DIR ---------------------------------------------------------

AMD = Path(__file__).parent / "fixtures" / "amd"


def _bundle(folder: Path, **files: str) -> Path:
    folder.mkdir()
    for name, fixture in files.items():
        shutil.copy(AMD / fixture, folder / name)
    return folder


def test_devices_from_a_saved_folder_describes_the_node_in_text(tmp_path, capsys):
    folder = _bundle(tmp_path / "node", **{"amd-smi-static.json": "amd-smi-static-mi300x-cpx-nps4-64dev.json"})
    assert cli.main(["devices", "--from", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"64 GPUs described from amd-smi-static.json in {folder} (no torch ran)"
    assert out[1] == "AMD Instinct MI300X (cuda:0, gfx942, key amd-instinct-mi300x-gfx942-cpx-nps4, CPX/NPS4)"
    assert "    partition CPX/NPS4 from amd-smi static --json" in out


def test_devices_from_a_saved_folder_prints_json_in_the_devices_schema(tmp_path, capsys):
    folder = _bundle(
        tmp_path / "node", **{"rocminfo.txt": "rocminfo-mi300x-2gpu.txt", "rocm-smi.txt": "rocm-smi-a-mi300x-sriov.txt"}
    )
    assert cli.main(["devices", "--from", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert jsonfile.schema_errors(data, DEVICES_SCHEMA) == []
    assert (data["files"], len(data["devices"])) == (["rocminfo.txt", "rocm-smi.txt"], 2)
    assert {d["arch"] for d in data["devices"]} == {"gfx942"}
    # the two fixtures come from different nodes (no PCI address in common): said, not paired silently
    assert [e.split(":")[0] for e in data["errors"]] == ["rocm-smi.txt lists GPUs at 0000"]


def test_broken_tool_outputs_exit_0_with_the_problems_under_errors(tmp_path, capsys):
    folder = _bundle(tmp_path / "node", **{"amd-smi-static.json": "amd-smi-static-broken-rocm6.4.json"})
    (folder / "nvidia-smi.xml").write_text("<nvidia_smi_log><gpu id=")
    assert cli.main(["devices", "--from", str(folder), "--json"]) == 0
    errors = json.loads(capsys.readouterr().out)["errors"]
    assert errors[0].startswith("nvidia-smi.xml: ToolOutputError: nvidia-smi -q -x printed invalid XML")
    assert "amd-smi static --json: GPU 0: section 'asic' is 'N/A', not a table: unavailable" in errors


def test_offline_discovery_needs_no_torch(tmp_path):
    folder = _bundle(tmp_path / "node", **{"amd-smi-static.json": "amd-smi-static-mi355x-rocm7.json"})
    code = (
        "import sys\nfrom rocm_validate.cli.main import main\n"
        f"status = main(['devices', '--from', {str(folder)!r}, '--json'])\n"
        "assert status == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["devices"][0]["arch"] == "gfx950"


@pytest.mark.parametrize("made", [False, True])
def test_a_missing_folder_or_one_without_tool_outputs_is_a_one_line_error(tmp_path, capsys, made):
    folder = tmp_path / "node"
    if made:
        folder.mkdir()
        (folder / "notes.txt").write_text("MI300X node 12\n")
    assert cli.main(["devices", "--from", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rocm-validate devices: error: --from {folder}: ")
    assert err.rstrip().endswith(f"rocm-validate bundle {folder}")


@pytest.fixture
def node_tools(tmp_path, monkeypatch):
    """A PATH holding only stand-ins for amd-smi and rocminfo that print this project's fixtures."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    for name, fixture in (("amd-smi", "amd-smi-static-mi300x-rocm6.4.json"), ("rocminfo", "rocminfo-mi300x-2gpu.txt")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\nexec /bin/cat '{AMD / fixture}'\n")
        script.chmod(0o755)
    return bin_dir


def test_bundle_saves_the_outputs_that_devices_from_then_reads(tmp_path, capsys, node_tools):
    folder = tmp_path / "ticket-1234"
    assert cli.main(["bundle", str(folder), "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    assert "missing  nvidia-smi.xml" in out and out.rstrip().endswith(f"rocm-validate devices --from {folder}")
    assert (folder / "amd-smi-static.json").read_text() == (AMD / "amd-smi-static-mi300x-rocm6.4.json").read_text()
    assert json.loads((folder / "bundle.json").read_text())["outputs"][0]["status"] == "saved"
    assert cli.main(["devices", "--from", str(folder), "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert [(d["arch"], d["compute_units"], d["compute_partition"]) for d in devices] == [("gfx942", 304, "SPX")] * 2


def test_bundle_on_a_node_without_any_gpu_tool_is_a_one_line_error_with_the_manifest_kept(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cli.main(["bundle", str(tmp_path / "node")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "rocm-validate bundle: error: no GPU tool printed anything (amd-smi, nvidia-smi, rocm-smi, rocminfo)"
    )
    assert {o["status"] for o in json.loads((tmp_path / "node" / "bundle.json").read_text())["outputs"]} == {"missing"}


def one_line_error(capsys, *args):
    """Run `rocm-validate bundle ...`; its exit status and the one line it printed on stderr."""
    status = cli.main(["bundle", *map(str, args)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return status, err.rstrip()


def test_bundle_refuses_a_folder_that_holds_another_nodes_outputs_and_leaves_them_alone(tmp_path, capsys, node_tools):
    other = _bundle(tmp_path / "node-07", **{"amd-smi-static.json": "amd-smi-static-mi300x-cpx-nps4-64dev.json"})
    before = (other / "amd-smi-static.json").read_bytes()
    status, err = one_line_error(capsys, other)
    assert status == 2
    assert err == (
        f"rocm-validate bundle: error: {other} already holds amd-smi-static.json; `rocm-validate devices --from` "
        "would describe those together with this node's outputs: name a new or empty folder"
    )
    assert sorted(p.name for p in other.iterdir()) == ["amd-smi-static.json"]
    assert (other / "amd-smi-static.json").read_bytes() == before


def test_bundle_writes_into_an_empty_folder(tmp_path, capsys, node_tools):
    (tmp_path / "empty").mkdir()
    assert cli.main(["bundle", str(tmp_path / "empty")]) == 0
    assert (tmp_path / "empty" / "bundle.json").is_file()


def test_bundle_under_a_path_through_a_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    status, err = one_line_error(capsys, tmp_path / "notes.txt" / "node")
    assert status == 2
    assert err.startswith(f"rocm-validate bundle: error: cannot use {tmp_path / 'notes.txt' / 'node'}: ")
    assert err.endswith("Not a directory; name a folder you can write to")


def test_bundle_into_a_folder_it_may_not_create_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    target = tmp_path / "readonly" / "node"

    def refuse(self, *args, **kwargs):  # root writes anywhere: the refusal is injected
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    status, err = one_line_error(capsys, target)
    assert status == 2
    assert (
        err
        == f"rocm-validate bundle: error: cannot use {target}: {target}: Permission denied; name a folder you can write to"
    )


@pytest.mark.parametrize("failing", ["rocminfo.txt", offline.MANIFEST])
def test_a_write_that_fails_midway_is_a_one_line_error_saying_the_folder_is_partial(
    tmp_path, capsys, monkeypatch, node_tools, failing
):
    write_text = Path.write_text

    def disk_full(self, *args, **kwargs):
        if self.name == failing:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    folder = tmp_path / "node"
    status, err = one_line_error(capsys, folder)
    assert status == 2
    assert err == (
        f"rocm-validate bundle: error: cannot write the bundle: {folder / failing}: No space left on device; "
        f"{folder} now holds part of a bundle: remove it, then rerun naming a folder on a writable disk with space"
    )


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_bundle_refuses_a_timeout_that_is_not_a_positive_number_of_seconds(tmp_path, capsys, timeout):
    status, err = one_line_error(capsys, tmp_path / "node", "--timeout", timeout)
    assert status == 2 and "--timeout needs a positive number of seconds" in err
    assert not (tmp_path / "node").exists()


def test_devices_from_a_folder_of_only_amd_smi_partition_says_the_modes_and_that_the_list_was_cut(tmp_path, capsys):
    folder = _bundle(tmp_path / "node", **{"amd-smi-partition.txt": "amd-smi-partition-current-mi3x-cpx-rocm6.4.txt"})
    assert cli.main(["devices", "--from", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"at least 11 GPUs described from amd-smi-partition.txt in {folder} (no torch ran)"
    assert out[1] == "cut short: amd-smi-partition.txt: ...; the node may have more GPUs than these"
    assert out.count("    partition CPX/NPS1 from amd-smi partition") == 11
    assert any(line.startswith("product unknown: these outputs name none") for line in out)


def test_devices_from_a_folder_of_only_amd_smi_topology_says_the_links(tmp_path, capsys):
    folder = _bundle(tmp_path / "node", **{"amd-smi-topology.txt": "amd-smi-topology-x8-xgmi-rocm6.1.txt"})
    assert cli.main(["devices", "--from", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"8 GPUs described from amd-smi-topology.txt in {folder} (no torch ran)"
    assert "links (amd-smi topology): 8 GPUs, 28 pairs: 28 XGMI 1 hop, 50-50 GB/s" in out


def test_devices_from_a_folder_of_only_amd_smi_metric_json_says_the_readings(tmp_path, capsys):
    folder = _bundle(tmp_path / "node", **{"amd-smi-metric.json": "amd-smi-metric-mi300x-rocm7.1.json"})
    assert cli.main(["devices", "--from", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"1 GPU described from amd-smi-metric.json in {folder} (no torch ran)"
    assert "    memory 192.0 GiB" in out
    assert "GPU 0 now (amd-smi metric): gfx 132 MHz, 140 W, hotspot 37 C, ECC 0 correctable / 0 uncorrectable" in out


def test_devices_from_json_carries_links_pairs_and_readings_in_the_devices_schema(tmp_path, capsys):
    folder = _bundle(
        tmp_path / "node",
        **{
            "amd-smi-topology.json": "amd-smi-topology-a-t-2gpu-rocm6.1.1.json",
            "amd-smi-metric.txt": "amd-smi-metric-power-navi-rocm6.1.1.txt",
        },
    )
    assert cli.main(["devices", "--from", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert jsonfile.schema_errors(data, DEVICES_SCHEMA) == []
    assert [(link["source"], link["target"], link["link_type"]) for link in data["links"]] == [
        (0, 1, "PCIE"),
        (1, 0, "PCIE"),
    ]
    assert data["p2p_pairs"] == [] and [m["power_w"] for m in data["metrics"]] == [11.0, 17.0]
    assert len(data["devices"]) == 2 and data["at_least"] is False


def test_devices_from_piped_into_a_reader_that_stops_early_ends_without_a_traceback():
    folder = Path(__file__).parent / "fixtures" / "amd" / "nodes" / "mi300x-cpx-nps4-x8-rocm6.3"
    command = f"{sys.executable} -m rocm_validate.cli.main devices --from {folder} | true"  # `true` reads nothing
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
