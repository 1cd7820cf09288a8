"""Diagnostics: MLIR's as located `Diag` records, the library's `CompileError`, and did-you-mean."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field


class CompileError(ValueError):
    """Parsing, verification or compilation failed; the message holds the MLIR diagnostics."""


@dataclass
class Diag:
    file: str
    line: int
    col: int
    severity: str
    message: str
    notes: list["Diag"] = field(default_factory=list)

    def render(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}: " if self.line else (f"{self.file}: " if self.file else "")
        out = f"{where}{self.severity}: {self.message}"
        for n in self.notes:
            out += "\n" + n.render()
        return out


_SEV = {"DiagnosticSeverity.ERROR": "error", "DiagnosticSeverity.WARNING": "warning",
        "DiagnosticSeverity.NOTE": "note", "DiagnosticSeverity.REMARK": "remark"}
_LOC_RE = re.compile(r'loc\("([^"]*)":(\d+):(\d+)')
_NOTE_OP_RE = re.compile(r'see current operation: (?:[^=]*= )?"([\w.$]+)"')


def to_diag(d, default_file: str) -> Diag:
    """An MLIR `Diagnostic` (or `DiagnosticInfo`) as a `Diag`, its location as file:line:col."""
    loc_text = str(d.location)
    m = _LOC_RE.search(loc_text)
    file, line, col = (m.group(1), int(m.group(2)), int(m.group(3))) if m else (default_file, 0, 0)
    if file == "-":  # parsed by ir.Module.parse, which names no file
        file = default_file
    notes = [to_diag(n, default_file) for n in d.notes]
    message = d.message
    if notes and not message.startswith("'"):
        # IRDL verifiers say "op expects exactly 2 operands" or "expected base attribute ...";
        # name the op, as every other verifier does ("'relax.add' op expects ..."), from the
        # "see current operation" note.
        for n in notes:
            mo = _NOTE_OP_RE.search(n.message)
            if mo:
                message = f"'{mo.group(1)}' " + (message if message.startswith("op ") else f"op {message}")
                break
    return Diag(file, line, col, _SEV.get(str(d.severity), "error"), message, notes)


def suggest(word: str, candidates) -> str:
    """' (did you mean 'x'?)' for the closest candidate, or ''."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def decode_source(data: bytes, file: str) -> tuple[str, Diag | None]:
    """The input as text, or a diagnostic at the first byte that is not UTF-8 (line:col, col in bytes)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        return "", Diag(file, line, col, "error", f"the input is not valid UTF-8 (byte 0x{data[e.start]:02x})")


# The deepest bracket nesting a parse is given. MLIR's parser recurses once or more per nested
# region, attribute or type and has no depth limit of its own: 3000 nested regions or a 100000-deep
# array attribute overflow the C stack (a segfault, in mlir-opt too). Real programs nest a few
# dozen deep.
MAX_NESTING = 1000
_NEST_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|[{}()\[\]]|(?<=[\w.])<|(?<!-)>')
_OPENS = "{([<"


_ESCAPED_STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*\\[0-9a-fA-F]{2}(?:[^"\\\n]|\\.)*"')
_HEX_ESCAPE_RE = re.compile(r'\\([0-9a-fA-F]{2})|\\(.)')


def string_escape_error(text: str, file: str) -> Diag | None:
    """A located error at the first string literal whose hex escapes (`"\\FF"`) make bytes that
    are not UTF-8, else None (a lexical scan before parsing). MLIR keeps such bytes; an op name or
    message made of them reaches Python in a diagnostic, whose conversion to str failed inside the
    bindings' C++ and terminated the process (malformed-IR fuzzer seed 53054, a bytecode mutant
    decoded to `"rel\\FFx.max"()`)."""
    for m in _ESCAPED_STRING_RE.finditer(text):
        body, out, pos = m.group()[1:-1], bytearray(), 0
        for e in _HEX_ESCAPE_RE.finditer(body):
            out += body[pos:e.start()].encode("utf-8", "surrogatepass")
            out += bytes([int(e.group(1), 16)]) if e.group(1) else e.group(2).encode("utf-8", "surrogatepass")
            pos = e.end()
        out += body[pos:].encode("utf-8", "surrogatepass")
        try:
            out.decode("utf-8")
        except UnicodeDecodeError:
            start = m.start()
            line = text.count("\n", 0, start) + 1
            col = start - (text.rfind("\n", 0, start) + 1) + 1
            return Diag(file, line, col, "error", "a string whose escapes make bytes that are not UTF-8 "
                                                 "(relax-mlir takes UTF-8 names and strings)")
    return None


_ELEMENTS_RE = re.compile(r'\b(?:dense|sparse)<\s*[\[(]')
_DIMS_RE = re.compile(r'^\s*(?:(?:\d+|\?)\s*x\s*)*')
_INT_ELEMENT_RE = re.compile(r'(?:si|ui|i)\d+|index|complex<\s*(?:si|ui|i)\d+\s*>')


def _closing(text: str, start: int) -> int | None:
    """The index just past the `>` closing the `<` before `start` (strings skipped), or None."""
    depth, i = 1, start
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "<":
            depth += 1
        elif c == ">" and text[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def dense_string_error(text: str, file: str) -> Diag | None:
    """A located error at a string element in the element list of a `dense<[...]>` / `sparse<>`
    literal of integer, index or complex-integer elements, else None (a lexical scan before
    parsing). MLIR's parser asserts on such an element and aborts the process (stock mlir-opt too;
    malformed-IR fuzzer seed 53055: `dense<[0, "n*"]> : tensor<2xi32>`); a string list of floats is
    an ordinary parse error, and a string element type (`!tf.string`) takes strings."""
    for m in _ELEMENTS_RE.finditer(text):
        end = _closing(text, m.end() - 1)
        if end is None:
            return None
        body = text[m.end() - 1:end - 1]
        q = body.find('"')
        if q < 0:
            continue
        rest = text[end:end + 400]
        alias = re.match(r'\s*:\s*!([\w.$-]+)', rest)
        if alias is not None:  # a type alias: its definition, `!name = tensor<...>`
            d = re.search(rf'^\s*!{re.escape(alias.group(1))}\s*=(\s*(?:tensor|vector)<.{{0,400}})', text, re.M)
            rest = ":" + d.group(1) if d is not None else rest
        t = re.match(r'\s*:\s*(?:tensor|vector)<', rest)
        if t is None:
            continue
        tend = _closing(rest, t.end())
        if tend is None:
            continue
        elem = _DIMS_RE.sub("", rest[t.end():tend - 1]).strip()  # (the dims `2x?x` dropped)
        if not _INT_ELEMENT_RE.fullmatch(elem):
            continue
        start = m.end() - 1 + q
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        return Diag(file, line, col, "error", f"a string element in a literal of {elem} elements (integers "
                                              f"expected): refused before parsing")
    return None


# The largest result number a use `%x#N` may name: MLIR's parser sizes a result list by N before it
# checks N against the op (%0#2147483648: out of memory, an abort in relax-opt).
MAX_RESULT_NUMBER = 1 << 20
_RESULT_NUMBER_RE = re.compile(r"%[\w.$-]+#(\d+)")


def result_number_error(text: str, file: str) -> Diag | None:
    """A located error at the first use `%x#N` (outside strings and comments) whose N exceeds
    MAX_RESULT_NUMBER, else None. A lexical scan before parsing."""
    for m in _RESULT_NUMBER_RE.finditer(text):
        if int(m.group(1)) <= MAX_RESULT_NUMBER:
            continue
        start = m.start()
        bol = text.rfind("\n", 0, start) + 1
        if text.count('"', bol, start) % 2 or "//" in text[bol:start]:
            continue  # (inside a string literal or a comment)
        line = text.count("\n", 0, start) + 1
        return Diag(file, line, start - bol + 1, "error", f"result number {m.group(1)} is out of range (at most "
                                                         f"{MAX_RESULT_NUMBER}): refused before parsing")
    return None


def nesting_error(text: str, file: str, limit: int = MAX_NESTING) -> Diag | None:
    """A located error if brackets ({, (, [, and the < of a type or attribute) nest deeper than
    `limit` in `text` (strings and comments skipped), else None. A lexical scan before parsing."""
    depth = 0
    for m in _NEST_RE.finditer(text):
        c = m.group()
        if c in _OPENS:
            depth += 1
            if depth > limit:
                start = m.start()
                line = text.count("\n", 0, start) + 1
                col = start - (text.rfind("\n", 0, start) + 1) + 1
                return Diag(file, line, col, "error", f"the input nests deeper than {limit} brackets here "
                                                      f"(regions, attributes or types): refused before parsing")
        elif c in "})]>":
            depth = max(0, depth - 1)
    return None
