"""The glossary (docs/extending.md, "Words") checked against the package and its docs: each word
it marks *checked* means one thing, and a use in a meaning the glossary gives to another name
fails, naming the name to use. A planted package shows each rule catching one misuse."""

from __future__ import annotations

import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import rocm_validate

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "extending.md"
PACKAGE = Path(rocm_validate.__file__).resolve().parent


@dataclass(frozen=True)
class Token:
    """One name, string or comment of a module, with the logical line it sits on."""

    module: str  # the path under the package, e.g. "perf/gate.py"
    line: int
    kind: str  # "name", "string" or "comment"
    text: str
    before: str  # the token before it ("." for an attribute)
    after: str  # the token after it ("=" for a keyword or an assignment)
    logical_line: str


@dataclass(frozen=True)
class Misuse:
    module: str
    line: int
    word: str
    text: str
    use: str  # the glossary's name for what the text means

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.word!r} in {self.text!r}; the glossary calls this {self.use}"


def tokens(package: Path) -> Iterator[Token]:
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        found = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.NL]
        kinds = {tokenize.NAME: "name", tokenize.STRING: "string", tokenize.COMMENT: "comment"}
        for i, tok in enumerate(found):
            if tok.type not in kinds and not _is_fstring_part(tok):
                continue
            before = found[i - 1].string if i else ""
            after = found[i + 1].string if i + 1 < len(found) else ""
            logical = " ".join(lines[tok.start[0] - 1 : tok.end[0]])
            kind = kinds.get(tok.type, "string")
            yield Token(path.relative_to(package).as_posix(), tok.start[0], kind, tok.string, before, after, logical)


def _is_fstring_part(tok: tokenize.TokenInfo) -> bool:
    return tokenize.tok_name.get(tok.type) == "FSTRING_MIDDLE"


def _words(text: str) -> set[str]:
    """The words of an identifier or a sentence: snake_case and CamelCase split, lower-cased."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+|_", spaced) if w}


# --- reference: a correctness check's same-precision computation -------------------------------
# MLPerf keeps its word (reference convergence points); a citation of the shared facts folder
# (reference/<file>.md) is a path; the report's timing key of a speedup's default path is kept.
# The comparator's words live in the correctness package and in the record of a check's margins.
COMPARATOR_HOMES = ("correctness/", "results/margins.py")
REFERENCE_HOMES = (*COMPARATOR_HOMES, "convergence/")
REFERENCE_KEPT = ('"reference": default.timing',)


def reference_misuses(tok: Token) -> Iterator[Misuse]:
    if tok.module.startswith(REFERENCE_HOMES) or "reference" not in _words(tok.text):
        return
    line = tok.logical_line
    if re.search(r"\bRCPs?\b|MLPerf|ReferenceFailed|reference/[\w-]+\.md", line) or any(
        k in line for k in REFERENCE_KEPT
    ):
        return
    yield Misuse(tok.module, tok.line, "reference", tok.text, "baseline (a stored value) or default (a speedup's path)")


# --- floor: the least a metric may measure on a SKU ---------------------------------------------
SKU_FLOOR_NAMES = {
    "floor",
    "floors",
    "Floor",
    "FloorTable",
    "FLOORS",
    "FLOORS_KEY",
    "FLOOR_PASS",
    "BELOW_FLOOR",
    "floor_judgement",
    "floors_dir",
    "judge_floor",
    "read_floor_file",
    "shipped_floor",
    "_amd_floor",
    "_nvidia_floor",
    "sku_floor",
    "sku_floor_source",
    "sku_floor_verdict",
    "floor_value",  # the report's keys for the SKU floor a metric was held to
    "floor_source",
    "floor_verdict",
}
FLOOR_SAID = r"max\(floor|floor=|clock.floor|lean.floor|noise.floor"
FLOOR_OTHER_MEANINGS = "min_band (the gate's band), underflow, allowance, min_lean or the minimum SQNR"


def floor_misuses(tok: Token) -> Iterator[Misuse]:
    if "floor" not in tok.text.lower():
        return
    if tok.kind == "name" and tok.text == "floor" and tok.before == ".":  # math.floor, torch.floor
        return
    in_comparator = tok.module.startswith(COMPARATOR_HOMES)
    if tok.kind == "name":
        misused = in_comparator or tok.text not in SKU_FLOOR_NAMES
    else:
        misused = "FORMER_KEYS" not in tok.logical_line and (
            in_comparator or re.search(FLOOR_SAID, tok.text) is not None
        )
    if misused:
        yield Misuse(tok.module, tok.line, "floor", tok.text, FLOOR_OTHER_MEANINGS)


# --- k: the comparator's error ratio (and BLAS's m, n, k of a GEMM) ------------------------------
K_KEPT = ('"k": threshold.noise_multiple', "FORMER_KEYS")


def k_misuses(tok: Token) -> Iterator[Misuse]:
    if tok.module.startswith(COMPARATOR_HOMES) or any(kept in tok.logical_line for kept in K_KEPT):
        return
    line = tok.logical_line
    if tok.kind == "name" and tok.text == "k":
        gemm_size = re.search(r"\b[mn]\b", line) is not None  # BLAS's m, n, k beside it
        a_factor = re.search(r"\bk\s*:\s*float\b|\bk\s*=\s*\d*\.\d", line) is not None
        if a_factor or (tok.before == "." and not gemm_size):
            yield Misuse(tok.module, tok.line, "k", tok.text, "noise_multiple (the gate's noise factor)")
    elif tok.kind != "name":
        said = re.search(r"\bk (x|\*|times)\b|/ k\b|\bk=", tok.text) is not None
        keyed = tok.module.startswith("perf/") and re.fullmatch(r"['\"]k['\"]", tok.text) is not None
        if said or keyed:
            yield Misuse(tok.module, tok.line, "k", tok.text, "noise_multiple (the gate's noise factor)")


# --- rtol: torch.testing's per-element meaning only ----------------------------------------------
def rtol_misuses(tok: Token) -> Iterator[Misuse]:
    if not re.search(r"\brtol\b", tok.text):  # rtol_of_max and former_rtol are other names
        return
    if re.search(r"torch\.testing|assert_close|allclose|isclose|former name|rtol_of_max", tok.logical_line):
        return
    yield Misuse(tok.module, tok.line, "rtol", tok.text, "rtol_of_max (a fraction of max|golden|)")


RULES: dict[str, Callable[[Token], Iterator[Misuse]]] = {
    "reference": reference_misuses,
    "floor": floor_misuses,
    "k": k_misuses,
    "rtol": rtol_misuses,
}


@functools.lru_cache
def misuses(package: Path) -> tuple[Misuse, ...]:
    return tuple(found for tok in tokens(package) for rule in RULES.values() for found in rule(tok))


# --- the docs: the phrases the renamed meanings had ---------------------------------------------
DOC_PHRASES = {
    r"max\(floor|floor, k x|clock.floor|lean.floor|noise.floor": "min_band, min_lean or allowance",
    r"SQNR floor|dB floor": "minimum SQNR",
    r"k [x×] (combined )?noise|cap / k\b": "noise_multiple",
    r"gate\.Reference|reference_from_entry|\.reference\(": "gate.Baseline",
    r"\brtol\b(?!_of_max)": "rtol_of_max",
}


def doc_misuses(text: str, name: str) -> list[str]:
    """Lines of a doc that use a renamed meaning, outside the glossary itself and outside lines
    that say what is still read under a former name (or quote torch.testing's rtol)."""
    found = []
    in_glossary = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            in_glossary = line.startswith("## 5. Words")
        if in_glossary or re.search(r"former|still read|torch\.testing|assert_close|allclose", line):
            continue
        found += [
            f"{name}:{number}: {line.strip()} (use {use})" for p, use in DOC_PHRASES.items() if re.search(p, line)
        ]
    return found


def checked_in_glossary() -> set[str]:
    return set(re.findall(r"^\* \*\*(\w+)\*\* \(\*checked\*\)", GLOSSARY.read_text(), re.M))


def test_every_word_the_glossary_marks_checked_has_a_rule_and_every_rule_a_word() -> None:
    assert checked_in_glossary() == set(RULES)


@pytest.mark.parametrize("word", sorted(RULES))
def test_the_package_uses_the_word_in_the_glossary_s_meaning_only(word: str) -> None:
    found = [str(m) for m in misuses(PACKAGE) if m.word == word]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("word", sorted(RULES))
def test_the_suites_use_the_word_in_the_glossary_s_meaning_only(word: str) -> None:
    found = [f"suites/{m}" for m in misuses(ROOT / "suites") if m.word == word]
    assert not found, "\n".join(found)


def test_the_docs_use_the_names_the_glossary_gives_the_other_meanings() -> None:
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [line for doc in docs if doc.exists() for line in doc_misuses(doc.read_text(), doc.name)]
    assert not found, "\n".join(found)


PLANTED = {
    "perf/gate.py": (
        "from dataclasses import dataclass\n\n\n"
        "@dataclass(frozen=True)\n"
        "class Threshold:\n"
        "    clock_floor: float = 0.02\n"
        "    k: float = 3.0\n\n"
        "    def describe(self, noise: float) -> str:\n"
        "        return f'max(floor 3%, {self.k:g} x noise {noise:.2%})'\n\n\n"
        "def judge(metric: float, reference: float) -> bool:  # the stored baseline\n"
        "    return metric >= reference\n"
    ),
    "correctness/compare.py": (
        "def allowed(atol: float, rtol: float, scale: float) -> float:\n"
        "    noise_floor = atol + rtol * scale\n"
        "    return noise_floor\n"
    ),
    "perf/kernels.py": "def gemm_flops(m: int, n: int, k: int) -> int:\n    return 2 * m * n * k\n",
    "correctness/gemm.py": "import math\n\n\ndef blocks(n: int) -> int:\n    return math.floor(n / 2)\n",
}


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    for module, source in PLANTED.items():
        path = tmp_path / "pkg" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return tmp_path / "pkg"


def test_a_planted_package_fails_for_each_word_used_in_another_meaning(planted: Path) -> None:
    found = {(m.module, m.word, m.text) for m in misuses(planted)}
    assert ("perf/gate.py", "floor", "clock_floor") in found
    assert ("perf/gate.py", "k", "k") in found  # the gate's noise factor named k
    assert ("perf/gate.py", "reference", "reference") in found  # a stored baseline named reference
    assert ("correctness/compare.py", "rtol", "rtol") in found
    assert ("correctness/compare.py", "floor", "noise_floor") in found
    assert any(m.module == "perf/gate.py" and m.word == "floor" and "max(floor" in m.text for m in misuses(planted))


def test_a_gemm_s_k_and_math_floor_are_not_misuses(planted: Path) -> None:
    modules = {m.module for m in misuses(planted)}
    assert "perf/kernels.py" not in modules
    assert "correctness/gemm.py" not in modules


def test_a_doc_using_the_gate_s_former_words_fails_and_the_glossary_section_does_not() -> None:
    text = "## 4. Gate\n\n    allowed = min(cap, max(floor, k x noise))\n\n## 5. Words\n\n* **floor** max(floor\n"
    assert doc_misuses(text, "planted.md") == [
        "planted.md:3: allowed = min(cap, max(floor, k x noise)) (use min_band, min_lean or allowance)",
        "planted.md:3: allowed = min(cap, max(floor, k x noise)) (use noise_multiple)",
    ]
