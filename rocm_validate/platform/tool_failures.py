"""Why an AMD tool that ran found no GPU, in the tool's own words: the line it printed, what it
means and what fixes it.

rocminfo, rocm-smi and amd-smi each say why they saw nothing ("Unable to open /dev/kfd
read-write: Permission denied", "HSA_STATUS_ERROR_OUT_OF_RESOURCES", "Driver not initialized
(amdgpu not found in modules)"); reading that line beats a generic "no agent in the output".
`diagnose` is a pure function of the text, used by the parsers (`amd_tools`, for saved outputs)
and by live discovery when a ROCm build of torch sees no GPU (`devices`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_CONTAINER = (
    "in a container, pass the devices: `docker run --device=/dev/kfd --device=/dev/dri --group-add video "
    "--group-add render ...`"
)


@dataclass(frozen=True)
class ToolFailure:
    """One tool's reason for finding no GPU."""

    tool: str
    line: str  # the tool's own line, as printed
    meaning: str
    fix: str

    def message(self) -> str:
        """'rocminfo said "...": meaning. Fix: ...' (one line)."""
        return f'{self.tool} said "{self.line}": {self.meaning}. Fix: {self.fix}'


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    meaning: str
    fix: str


def _rule(pattern: str, meaning: str, fix: str) -> _Rule:
    return _Rule(re.compile(pattern, re.IGNORECASE), meaning, fix)


# The most specific first: rocminfo prints the /dev/kfd line before HSA_STATUS_ERROR_OUT_OF_RESOURCES.
_RULES: tuple[_Rule, ...] = (
    _rule(
        r"Unable to open /dev/kfd read-write: (?:Permission denied|Operation not permitted)",
        "this user (or container) may not open the GPU compute device /dev/kfd",
        "add the user to the render and video groups (`sudo usermod -aG render,video $USER`, then log in "
        f"again); {_CONTAINER}",
    ),
    _rule(
        r"Unable to open /dev/kfd read-write: No such file or directory",
        "there is no /dev/kfd: the container was started without the GPU devices, or amdgpu is not loaded",
        f"{_CONTAINER}; on the host, `sudo modprobe amdgpu`",
    ),
    _rule(
        r"Unable to open /dev/kfd read-write: Invalid argument",
        "/dev/kfd exists but the driver refused to open it: a device node bind-mounted into a container or "
        "an unprivileged LXC guest, or a GPU the driver's compute part (KFD) does not support",
        f"{_CONTAINER} (device passthrough, not a bind mount); check `dmesg | grep kfd` on the host",
    ),
    _rule(
        r"Unable to open /dev/kfd read-write: Cannot allocate memory",
        "the driver's compute part (KFD) refused the GPU: an unsupported GPU ('not supported in kfd'), or /dev "
        "mounted noexec",
        "check `dmesg | grep kfd`; `sudo mount -o remount,exec /dev`",
    ),
    _rule(
        r"User is missing the following required groups|Permission needed to access required GPU device node"
        r"|/dev/dri/(?:card|renderD)\d+: Permission denied",
        "this user is not in the groups that own the GPU device nodes (/dev/dri/card*, /dev/dri/renderD*), so "
        "amd-smi may not open them",
        "add the user to the render and video groups (`sudo usermod -aG render,video $USER`, then log in again), "
        f"or run amd-smi with sudo; {_CONTAINER}",
    ),
    _rule(
        r"amdgpu not found in modules|Unable to detect any GPU devices|ROCk module is NOT (?:loaded|live)",
        "the amdgpu kernel driver is not loaded, so no tool can see a GPU",
        "`sudo modprobe amdgpu` and check `dmesg | grep amdgpu` (install amdgpu-dkms for this kernel if it "
        "fails); where amdgpu is built into the kernel, an older rocm-smi misreads it: use amd-smi",
    ),
    _rule(
        r"HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        "the HSA runtime could not open any GPU: usually no access to /dev/kfd or /dev/dri/renderD*, an "
        "unsupported GPU, or the driver out of resources after many processes",
        "check the render and video group membership (compare with `sudo rocminfo`), stop processes holding "
        f"the GPUs (`amd-smi process`), check `dmesg | grep -E 'amdgpu|kfd'`; {_CONTAINER}",
    ),
    _rule(
        r"HSA_STATUS_ERROR_INVALID_ARGUMENT|HSA_STATUS_ERROR_NOT_INITIALIZED",
        "the HSA runtime failed to start on this node",
        "check `dmesg | grep -E 'amdgpu|kfd'` and that the ROCm user space matches the driver",
    ),
    _rule(
        r"No AMD GPUs specified",
        "rocm-smi sees no AMD GPU on the PCI bus it can read",
        "check `lspci -d 1002:` and `dmesg | grep amdgpu`; in a virtual machine, that the GPU is passed through",
    ),
)


def diagnose(tool: str, text: str) -> ToolFailure | None:
    """The tool's own reason for finding no GPU in `text`, if it printed a known one."""
    for rule in _RULES:
        found = rule.pattern.search(text)
        if found is not None:
            line = next((ln.strip() for ln in text.splitlines() if rule.pattern.search(ln)), found.group(0))
            return ToolFailure(tool, _plain(line), rule.meaning, rule.fix)
    return None


def _plain(line: str) -> str:
    """The line without the logger prefix and colour codes amd-smi and rocm-smi add."""
    line = re.sub(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z]", "", line)
    return re.sub(r"^(?:ERROR|WARNING):root:", "", line).strip()


# What live discovery runs when a ROCm build of torch sees no GPU: the first tool that says why wins.
NO_GPU_COMMANDS: tuple[tuple[str, ...], ...] = (("rocminfo",), ("amd-smi", "list"), ("rocm-smi",))
NO_GPU_TOOLS = tuple(command[0] for command in NO_GPU_COMMANDS)


def why_no_gpu(say: Callable[[list[str]], str | None]) -> ToolFailure | None:
    """Run each of NO_GPU_COMMANDS through `say` (its whole output, standard error included, or
    None where the tool is missing) and return the first reason a tool gave."""
    for command in NO_GPU_COMMANDS:
        text = say(list(command))
        reason = diagnose(command[0], text) if text else None
        if reason is not None:
            return reason
    return None
