"""`rocm-validate devices [--from DIR] [--json]`: describe this machine's GPUs and CPU, or a node
from the tool outputs `rocm-validate bundle` saved on it (no torch, no GPU needed).

Exit status 0, broken tool output included (the problems are listed under `errors`); 2 when
DIR does not exist or holds none of the known files: one line, no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rocm_validate.errors import CommandError

DEVICES_SCHEMA_ID = "rocm-validate/devices/1"


def add_parser(commands: Any) -> None:
    """Register the devices subcommand on the rocm-validate parser."""
    parser = commands.add_parser(
        "devices",
        help="describe every GPU (and the CPU) this machine exposes, or a node from saved tool outputs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the description as JSON")
    parser.add_argument(
        "--from",
        dest="saved",
        metavar="DIR",
        type=Path,
        help="describe the node whose tool outputs are in DIR (as `rocm-validate bundle DIR` saves them)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BrokenPipeError:  # the reader stopped early (`| head`): what it read was printed whole
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    from rocm_validate.platform.devices import discover_devices

    if args.saved is not None:
        return _describe_saved(args.saved, args.json)
    devices = discover_devices()
    if args.json:
        _print_json({"devices": [d.to_dict() for d in devices]})
    else:
        for device in devices:
            _print_device(device)
    return 0


def _describe_saved(folder: Path, as_json: bool) -> int:
    from dataclasses import asdict

    from rocm_validate.platform import offline, topology

    if not folder.is_dir():
        raise CommandError(f"--from {folder}: no such folder; save one on the node with: rocm-validate bundle {folder}")
    outputs = offline.read_saved_outputs(folder)
    if not outputs:
        raise CommandError(
            f"--from {folder}: none of the known tool outputs ({', '.join(offline.KNOWN_FILES)}); "
            f"save them on the node with: rocm-validate bundle {folder}"
        )
    node = offline.describe_outputs(outputs)
    if as_json:
        _print_json(
            {
                "source": "saved tool outputs",
                "folder": str(folder),
                "files": list(node.files),
                "errors": list(node.errors),
                "at_least": node.at_least,
                "truncated": list(node.truncated),
                "devices": [d.to_dict() for d in node.devices],
                "links": [asdict(link) for link in node.links],
                "p2p_pairs": [list(pair) for pair in topology.p2p_pairs(list(node.links))],
                "metrics": [asdict(reading) for reading in node.metrics],
            }
        )
        return 0
    count = len(node.devices)
    at_least = "at least " if node.at_least else ""
    print(
        f"{at_least}{count} GPU{'' if count == 1 else 's'} described from {', '.join(node.files)} in {folder} "
        "(no torch ran)"
    )
    for cut in node.truncated:
        print(f"cut short: {cut}; the node may have more GPUs than these")
    for device in node.devices:
        _print_device(device, with_errors=False)
    if node.devices and all(d.arch == "unknown" for d in node.devices):
        print(
            "product unknown: these outputs name none (no device ID, name or ISA); save `amd-smi static` beside "
            "them (rocm-validate bundle DIR saves every output)"
        )
    if node.links:
        print(f"links ({node.links_tool}): {topology.describe_links(list(node.links))}")
    for reading in node.metrics:
        print(f"GPU {reading.index} now (amd-smi metric): {reading.summary()}")
    for error in node.errors:
        print(f"problem: {error}")
    return 0


def _print_json(fields: dict[str, Any]) -> None:
    from rocm_validate.results import jsonfile
    from rocm_validate.results.report import DEVICES_SCHEMA

    data = {"schema": DEVICES_SCHEMA_ID, **fields}
    problems = jsonfile.schema_errors(data, DEVICES_SCHEMA)
    if problems:
        raise CommandError(f"device description breaks its schema: {'; '.join(problems)}")
    sys.stdout.write(jsonfile.dumps(data))


def _print_device(device: Any, with_errors: bool = True) -> None:
    from rocm_validate.results.report import device_summary, stack_summary

    print(device_summary(device))
    if device.torch_version:
        print(f"    {stack_summary(device)}")
    elif device.driver_version or device.fp8_formats:
        facts = [f"driver {device.driver_version}" if device.driver_version else None]
        facts.append(f"fp8 {'/'.join(device.fp8_formats)}" if device.fp8_formats else None)
        print("    " + ", ".join(f for f in facts if f))
    details = [
        f"compute units {device.compute_units}" if device.compute_units else None,
        f"memory {device.memory_gib:.1f} GiB" if device.memory_gib else None,
        f"L2 {device.l2_cache_bytes // 1024**2} MiB" if device.l2_cache_bytes else None,
        f"attention {'/'.join(device.attention_backends)}" if device.torch_version else None,
        f"flash attention via {device.attention_library}" if device.attention_library else None,
    ]
    if any(details):
        print("    " + ", ".join(d for d in details if d))
    if device.key_aliases:
        print(f"    baselines stored under its older keys are read too: {', '.join(device.key_aliases)}")
    if device.partition_source:
        modes = "/".join(m for m in (device.compute_partition, device.memory_partition) if m)
        said = device.partition_source
        print(f"    partition {modes} {said if said.startswith('inferred') else f'from {said}'}")
    for error in device.errors if with_errors else ():
        print(f"    probe failed: {error}")
