"""PyTorch TunableOp results files, read without torch: their validators, their entries, the file
each GPU reads, and the GEMM each entry stands for.

TunableOp (`torch.cuda.tunable`) benchmarks every rocBLAS / hipBLASLt (or cuBLAS / cuBLASLt)
solution of a GEMM shape and keeps the fastest in a CSV file that images ship and jobs reuse.
The format, as PyTorch writes and reads it (`aten/src/ATen/cuda/tunable/Tunable.cpp`,
`TuningContext::WriteFile` / `ReadFile`; the format is described in `torch/cuda/tunable.py`):

    Validator,PT_VERSION,2.6.0
    Validator,ROCM_VERSION,6.3.42131-fa1d09cbd
    Validator,HIPBLASLT_VERSION,0.12.0-1b5f8f2c
    Validator,ROCBLAS_VERSION,4.3.0-fa1d09cb
    Validator,GCN_ARCH_NAME,gfx942:sramecc+:xnack-
    GemmTunableOp_BFloat16_TN,tn_4096_2048_1024_ld_1024_1024_4096,Gemm_Hipblaslt_TN_73624,0.0461

A `Validator` line names one fact of the stack that tuned the file. On reading, TunableOp
compares them with the running stack (`TuningResultsValidator::ValidateAll`): a missing or an
extra key, or any value that differs, rejects the whole file, which is then silently ignored
and the job runs untuned. Every other line is an entry: operator signature, parameter
signature, solution name, and optionally its tuned time in ms. The operator signature is
`<Op>_<dtype>_<layout>` (`GemmTunableOp_BFloat16_TN`); the parameters are the BLAS call's
column-major `<transa><transb>_<m>_<n>_<k>`, optionally `_B_<batch>` (strided batched) and
`_ld_<lda>_<ldb>_<ldc>` (newer releases), where the BLAS `a` operand is torch's second matrix:
`torch.mm(A[M, K], B[K, N])` is `m = N, n = M` (`torch.cuda.tunable._process_single_offline_gemm`).

Which file a process reads: `PYTORCH_TUNABLEOP_FILENAME` (default `tunableop_results.csv`) with
the GPU's ordinal inserted, in place of a `%d` or before the last '.'
(`TuningContext::SetFilename(filename, insert_device_ordinal=true)`), so one file per GPU; a
filename given through `torch.cuda.tunable.set_filename(name)` is read as written.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_FILENAME = "tunableop_results.csv"
ORDINAL_TOKEN = "%d"  # TunableOp's place for the device ordinal in a filename
MANDATORY_VALIDATORS = ("PT_VERSION",)
# TunableOp's dtype names (TypeName<T> in TunableGemm.h) -> the torch dtype each stands for.
DTYPES: dict[str, str] = {
    "float": "float32",
    "tf32": "float32",
    "double": "float64",
    "BFloat16": "bfloat16",
    "Half": "float16",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2": "float8_e5m2",
    "Float8_e4m3fnuz": "float8_e4m3fnuz",
    "Float8_e5m2fnuz": "float8_e5m2fnuz",
}
# The GEMMs the suite reproduces from an entry, and what each is called through in torch.
REPRODUCED_OPS = {
    "GemmTunableOp": "torch.mm",
    "GemmAndBiasTunableOp": "torch.nn.functional.linear",
    "GemmStridedBatchedTunableOp": "torch.bmm",
}
CHECKED_DTYPES = ("float32", "bfloat16", "float16")
_OP = re.compile(r"^(?P<op>[A-Za-z]+TunableOp)_(?P<types>.+)_(?P<layout>[NT]{2})$")


@dataclass(frozen=True)
class ResultsEntry:
    """One tuned solution: the GEMM it is for and what TunableOp picked."""

    line: int  # 1-based line number in its file
    op_signature: str  # GemmTunableOp_BFloat16_TN
    params_signature: str  # tn_4096_2048_1024_ld_1024_1024_4096
    solution: str  # Gemm_Hipblaslt_TN_73624, Gemm_Cublaslt_TN_3, Default, ...
    time_ms: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What TunableOp looks an entry up by."""
        return self.op_signature, self.params_signature

    def describe(self) -> str:
        timed = "" if self.time_ms is None else f", tuned at {self.time_ms:g} ms"
        return f"line {self.line}: {self.op_signature},{self.params_signature} -> {self.solution}{timed}"


@dataclass(frozen=True)
class ResultsFile:
    """A parsed results file: its validators, entries and any lines TunableOp could not parse."""

    path: str
    validators: tuple[tuple[str, str], ...]
    entries: tuple[ResultsEntry, ...]
    unparsed: tuple[tuple[int, str], ...] = ()

    @property
    def validator_map(self) -> dict[str, str]:
        return dict(self.validators)


def parse_results(text: str, path: str = "<text>") -> ResultsFile:
    """A results file's text, read as TunableOp reads it: comma-separated fields, `Validator,KEY,VALUE`
    lines (the last one of a key wins), entries of three or four fields, blank lines skipped."""
    validators: dict[str, str] = {}
    entries: list[ResultsEntry] = []
    unparsed: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line:
            continue
        parts = line.split(",")
        if parts[0] == "Validator" and len(parts) >= 3:
            validators[parts[1]] = parts[2]
        elif len(parts) >= 3 and parts[0] != "Validator":
            entries.append(
                ResultsEntry(number, parts[0], parts[1], parts[2], _time(parts[3]) if len(parts) > 3 else None)
            )
        else:
            unparsed.append((number, line))
    return ResultsFile(path, tuple(validators.items()), tuple(entries), tuple(unparsed))


def _time(field: str) -> float | None:
    try:
        return float(field)
    except ValueError:
        return None


@dataclass(frozen=True)
class ValidatorMismatch:
    """One validator on which the file and the running stack disagree (None: absent on that side)."""

    key: str
    in_file: str | None
    running: str | None

    def describe(self) -> str:
        if self.in_file is None:
            return f"{self.key} missing from the file ({self.running} here)"
        if self.running is None:
            return f"{self.key}={self.in_file} in the file, which this stack does not register"
        return f"{self.key} {self.in_file} in the file, {self.running} here"


def validator_mismatches(in_file: Mapping[str, str], running: Mapping[str, str]) -> tuple[ValidatorMismatch, ...]:
    """Every reason TunableOp rejects a file on the running stack (`ValidateAll`): a mandatory key
    missing, the key sets differing, or a value differing. Empty: the file is used."""
    keys = sorted(set(in_file) | set(running) | set(MANDATORY_VALIDATORS))
    return tuple(
        ValidatorMismatch(key, in_file.get(key), running.get(key))
        for key in keys
        if in_file.get(key) != running.get(key)
    )


def device_filename(filename: str, ordinal: int) -> str:
    """The file a process on GPU `ordinal` reads when TunableOp inserts the device ordinal
    (`PYTORCH_TUNABLEOP_FILENAME`, or the default name): in place of the first '%d', else before
    the last '.', else at the end."""
    if ORDINAL_TOKEN in filename:
        return filename.replace(ORDINAL_TOKEN, str(ordinal), 1)
    dot = filename.rfind(".")
    return f"{filename[:dot]}{ordinal}{filename[dot:]}" if dot >= 0 else f"{filename}{ordinal}"


def candidate_files(value: str, from_environment: bool, ordinal: int) -> tuple[str, ...]:
    """The files GPU `ordinal` may read for a given name, in order. From PYTORCH_TUNABLEOP_FILENAME
    only the ordinal-inserted name counts: that is the file TunableOp reads in the job. A name given
    to the suite is read as written when it holds no '%d', else (or when missing) per GPU."""
    per_device = device_filename(value, ordinal)
    if from_environment or ORDINAL_TOKEN in value:
        return (per_device,)
    return (value, per_device)


def missing_file_message(value: str, source: str, tried: Sequence[str], ordinal: int) -> str:
    """Why no results file was found for GPU `ordinal`, and what TunableOp itself would read."""
    looked = ", ".join(tried)
    rule = (
        f"TunableOp inserts the GPU's ordinal into the name ({value} -> {device_filename(value, ordinal)} on GPU "
        f"{ordinal}; write '%d' where it goes)"
    )
    return f"{source}={value}: no TunableOp results file for GPU {ordinal}; looked for {looked}. {rule}"


def retune_command(stale: str, filename: str) -> str:
    """The command that tunes the stale file's GEMMs again on this stack (every GPU its own file):
    TunableOp's offline tuner reads each entry's operator and parameters and ignores the rest."""
    script = f"import torch.cuda.tunable as t; t.tune_gemm_in_file({json.dumps(stale)})"
    environment = (
        "PYTORCH_TUNABLEOP_ENABLED=1",
        "PYTORCH_TUNABLEOP_TUNING=1",
        f"PYTORCH_TUNABLEOP_FILENAME={shlex.quote(filename)}",
    )
    return " ".join((*environment, "python", "-c", shlex.quote(script)))


def retuned_name(stale: str) -> str:
    """Where a retuned copy of `stale` goes: beside it, one file per GPU ('%d')."""
    stem, dot, suffix = stale.rpartition(".")
    base = stem if dot else stale
    base = re.sub(r"\d+$", "", base)
    return f"{base}_retuned{ORDINAL_TOKEN}{dot}{suffix if dot else ''}"


@dataclass(frozen=True)
class EntryGemm:
    """The torch call an entry's GEMM comes from: `op` (torch.mm, F.linear, torch.bmm) on
    A [batch, M, K] and B [batch, K, N] in `dtype`, each stored transposed where `a_transposed` /
    `b_transposed` (column-major in the BLAS call)."""

    op: str
    dtype: str
    m: int
    n: int
    k: int
    batch: int = 1
    a_transposed: bool = False
    b_transposed: bool = False

    def describe(self) -> str:
        batch = f"{self.batch} x " if self.batch > 1 else ""
        layout = f"A{'^T' if self.a_transposed else ''} B{'^T' if self.b_transposed else ''}"
        return f"{self.op} {batch}M={self.m} N={self.n} K={self.k}, {self.dtype}, {layout}"


def entry_gemm(entry: ResultsEntry) -> EntryGemm | str:
    """The GEMM an entry stands for, or why the suite does not reproduce it."""
    found = _OP.match(entry.op_signature)
    if not found:
        return f"operator {entry.op_signature!r} is not a TunableOp GEMM signature"
    op, types = found["op"], found["types"]
    if op not in REPRODUCED_OPS:
        scaled = " (its scales are not in the file)" if op == "ScaledGemmTunableOp" else ""
        return f"{op} entries are not reproduced{scaled}; the suite reproduces {', '.join(REPRODUCED_OPS)}"
    if types == "tf32":
        return "TF32 entries are not checked: the suite checks fp32 GEMMs at full precision"
    dtype = DTYPES.get(types)
    if dtype not in CHECKED_DTYPES:
        return f"dtype {types!r} is not checked; the suite checks float, BFloat16 and Half"
    fields = entry.params_signature.split("_")
    try:
        layout, blas_m, blas_n, k = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return f"parameters {entry.params_signature!r} are not <layout>_<m>_<n>_<k>"
    named = _named_fields(fields[4:])
    if named is None:
        return f"parameters {entry.params_signature!r} hold fields the suite does not know"
    if layout.upper() != found["layout"]:
        return f"parameters {entry.params_signature!r} disagree with the operator's layout {found['layout']}"
    batch = named.get("B", [1])[0]
    b_transposed, a_transposed = layout[0].upper() == "T", layout[1].upper() == "T"
    dense = [k if b_transposed else blas_m, blas_n if a_transposed else k, blas_m]  # BLAS a is torch's B
    leading = named.get("ld")
    if leading is not None and leading != dense:
        return (
            f"leading dimensions {leading} are not those of dense operands {dense} "
            "(strided sub-matrices are not reproduced)"
        )
    gemm = EntryGemm(
        op=REPRODUCED_OPS[op],
        dtype=dtype,
        m=blas_n,
        n=blas_m,
        k=k,
        batch=batch if op == "GemmStridedBatchedTunableOp" else 1,
        a_transposed=a_transposed,
        b_transposed=b_transposed,
    )
    if gemm.op == REPRODUCED_OPS["GemmAndBiasTunableOp"] and gemm.a_transposed == gemm.b_transposed:
        return "a GEMM-and-bias entry with both operands in one layout is not one F.linear makes"
    return gemm


def _named_fields(fields: Sequence[str]) -> dict[str, list[int]] | None:
    """'B', '8', 'ld', '1024', '1024', '4096' -> {'B': [8], 'ld': [1024, 1024, 4096]}; None when
    a field is not one of those."""
    named: dict[str, list[int]] = {}
    current: str | None = None
    for item in fields:
        if item in ("B", "ld"):
            current = item
            named[current] = []
        elif current is not None and item.isdigit():
            named[current].append(int(item))
        else:
            return None
    if any(not values for values in named.values()) or len(named.get("B", [1])) != 1:
        return None
    return named


def ignored_message(path: str, mismatches: Sequence[ValidatorMismatch], loaded: bool) -> str:
    """What a results file that TunableOp rejects means here, and the command that fixes it."""
    if mismatches:
        why = "its validators do not match this stack: " + "; ".join(m.describe() for m in mismatches)
    elif not loaded:
        why = "TunableOp could not read it (torch.cuda.tunable.read_file returned False)"
    else:
        return ""
    return (
        f"TunableOp will ignore {path} on this stack and the job will run untuned: {why}. TunableOp rejects a whole "
        f"file whose validators differ (aten/src/ATen/cuda/tunable/Tunable.cpp, TuningResultsValidator::ValidateAll). "
        f"Retune its GEMMs here: {retune_command(path, retuned_name(path))}"
    )
