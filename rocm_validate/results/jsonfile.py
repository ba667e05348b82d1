"""JSON files checked against a schema: read safely, written atomically. No pickle, no eval.

Every file this project writes (reports, baselines, device descriptions) goes through
`write_json`: validated first, then written to a temporary file in the same folder and renamed
over the target, so a crash or a full disk never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocm_validate.errors import JsonFileError

Schema = Mapping[str, Any]


def schema_errors(data: Any, schema: Schema) -> list[str]:
    """Every way `data` breaks the schema, as 'path: message' lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<top>'}: {e.message}" for e in errors]


def read_json(path: Path, schema: Schema, fix: str) -> Any:
    """Load and validate `path`; every failure names the file, what is wrong and `fix`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JsonFileError(f"{path}: file not found. {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JsonFileError(f"{path}: cannot be read ({exc}). {fix}") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        what = (
            "is empty" if not text.strip() else f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        )
        raise JsonFileError(f"{path} {what}; it may be truncated or hand-edited. {fix}") from None
    except ValueError as exc:
        raise JsonFileError(f"{path}: {exc}. {fix}") from None
    problems = schema_errors(data, schema)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise JsonFileError(f"{path} does not match the {schema.get('title', 'expected')} schema: {shown}. {fix}")
    return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"contains {name}, which is not JSON")


def dumps(data: Any) -> str:
    """Sorted, indented, newline-terminated: stable diffs for files kept in git."""
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_json(path: Path, data: Any, schema: Schema) -> None:
    """Validate, then replace `path` atomically (temporary file in the same folder + rename). A
    write that fails (a full disk, a read-only folder, a file that cannot be replaced) leaves
    `path` as it was and raises JsonFileError naming it and the cause (the OSError is its cause)."""
    problems = schema_errors(data, schema)
    if problems:
        raise JsonFileError(
            f"refusing to write {path}: data breaks the {schema.get('title', 'expected')} schema: {'; '.join(problems[:5])}"
        )
    text = dumps(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise JsonFileError(f"cannot write {path}: {exc.strerror or exc}; it is unchanged") from exc
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; a shared baselines folder needs the usual mode
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise JsonFileError(f"cannot write {path}: {exc.strerror or exc}; it is unchanged") from exc
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
