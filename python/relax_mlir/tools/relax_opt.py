"""`relax-opt`: the mlir-opt of relax-mlir. Relax (Python) passes and upstream passes in one pipeline.

    relax-opt in.mlir --pass-pipeline='builtin.module(relax-infer-shapes,canonicalize)' -o out.mlir
    relax-opt in.mlir --relax-infer-shapes --relax-legalize
    relax-opt in.mlir --split-input-file --verify-diagnostics
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from mlir import ir
from mlir.passmanager import PassManager

VERSION = "0.1.0"
SPLIT_MARKER = re.compile(r"^// -----\s*$", re.M)


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


def _to_diag(d, default_file: str) -> Diag:
    loc_text = str(d.location)
    m = _LOC_RE.search(loc_text)
    file, line, col = (m.group(1), int(m.group(2)), int(m.group(3))) if m else (default_file, 0, 0)
    if file == "-":  # parsed by ir.Module.parse, which names no file
        file = default_file
    notes = [_to_diag(n, default_file) for n in d.notes]
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


class Session:
    """A Context with the relax dialect, collecting diagnostics."""

    def __init__(self, source_name: str = "<stdin>"):
        from relax_mlir.dialect import load

        self.ctx = ir.Context()
        load(self.ctx)
        self.source_name = source_name
        self.diags: list[Diag] = []
        # The handler must not reference `self`: a Session <-> handler cycle lets the garbage
        # collector free the Context before the operations that live in it (a segfault).
        diags, name = self.diags, source_name

        def on_diag(d) -> bool:
            diags.append(_to_diag(d, name))
            return True

        self._handler = self.ctx.attach_diagnostic_handler(on_diag)

    def add_error_diagnostics(self, e: Exception) -> None:
        seen = {(d.line, d.col, d.message) for d in self.diags}
        for d in getattr(e, "error_diagnostics", []) or []:
            nd = _to_diag(d, self.source_name)
            if (nd.line, nd.col, nd.message) not in seen:
                self.diags.append(nd)


_TOP_LEVEL_COUNT = "source must contain a single top-level operation"
_CUSTOM_FORM_RE = re.compile(r'(?:^|=)\s*(relax(?:_v)?\.[A-Za-z_][\w.]*)\b', re.M)


def parse_module(session: Session, text: str):
    """Parse `text` into a `builtin.module` (an implicit one around zero, one or several top-level
    ops, as mlir-opt does). None, with located diagnostics recorded, when the text does not parse."""
    with session.ctx, ir.Location.unknown():
        try:
            op = ir.Operation.parse(text, source_name=session.source_name)
        except ir.MLIRError as e:
            if any(_TOP_LEVEL_COUNT in d.message for d in e.error_diagnostics):
                return _parse_implicit_module(session, text)
            session.add_error_diagnostics(e)
            if not any(d.severity == "error" for d in session.diags):
                session.diags.append(_silent_parse_failure(session.source_name, text))
            return None
        if op.operation.name != "builtin.module":
            # A single top-level op is returned as is: wrap it in a module, as mlir-opt does.
            m = ir.Module.create()
            m.body.append(op.operation)
            return m.operation
        return op.operation


def _parse_implicit_module(session: Session, text: str):
    # ir.Module.parse wraps any number of top-level ops in a module; it takes no source name, so
    # its locations say "-", which _to_diag maps back to the session's file.
    try:
        return ir.Module.parse(text).operation
    except ir.MLIRError as e:
        session.add_error_diagnostics(e)
        if not any(d.severity == "error" for d in session.diags):
            session.diags.append(_silent_parse_failure(session.source_name, text))
        return None


def _silent_parse_failure(file: str, text: str) -> Diag:
    """MLIR's parser fails without a diagnostic on an IRDL op written in custom form
    (`relax.exp(%x)`, not `"relax.exp"(%x)`): point at the first such op if there is one."""
    for m in _CUSTOM_FORM_RE.finditer(text):
        start = m.start(1)
        if start > 0 and text[start - 1] == '"':
            continue
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        name = m.group(1)
        return Diag(file, line, col, "error", f"custom assembly form of '{name}' is not supported: relax ops are "
                                              f"written in the generic form, \"{name}\"(...)")
    return Diag(file, 0, 0, "error", "the input does not parse (the MLIR parser gave no diagnostic)")


def run_pipeline(session: Session, module: ir.Operation, items: list[str], *, print_after_all=False,
                 timing=False, verify_each=True) -> bool:
    """Verify, run the pipeline, verify. False (with diagnostics recorded) on failure."""
    from relax_mlir.passes import build_pipeline, run_pass
    from relax_mlir.transforms import PASSES
    from relax_mlir.transforms.infer_shapes import VerifyPass

    with session.ctx, ir.Location.unknown():
        if not run_pass(VerifyPass(), module):
            return False
        if not items:
            return True
        pm = PassManager("builtin.module")
        try:
            build_pipeline(pm, items, PASSES)
        except ValueError as e:
            session.diags.append(Diag("", 0, 0, "error", str(e)))
            return False
        if print_after_all:
            session.ctx.enable_multithreading(False)  # required by MLIR's IR printing
            pm.enable_ir_printing(print_after_all=True, print_module_scope=True)
        if timing:
            pm.enable_timing()
        pm.enable_verifier(verify_each)
        try:
            pm.run(module)
        except ir.MLIRError as e:
            session.add_error_diagnostics(e)
            if not any(d.severity == "error" for d in session.diags):
                session.diags.append(Diag(session.source_name, 0, 0, "error", "pass pipeline failed"))
            return False
        return True


# --- --verify-diagnostics ----------------------------------------------------------------------

_EXPECT_RE = re.compile(r"//\s*expected-(error|warning|note|remark)\s*(@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclass
class Expect:
    line: int
    severity: str
    text: str
    seen: bool = False


def collect_expectations(text: str, line_offset: int) -> list[Expect]:
    out = []
    lines = text.split("\n")
    for i, l in enumerate(lines):
        for m in _EXPECT_RE.finditer(l):
            lineno = i + 1 + line_offset
            where = m.group(3)
            if where is None:
                target = lineno
            elif where == "above":
                target = lineno - 1
            elif where == "below":
                target = lineno + 1
            else:
                target = lineno + int(where)
            out.append(Expect(target, m.group(1), m.group(4)))
    return out


def _flatten(diags: list[Diag]) -> list[Diag]:
    out = []
    for d in diags:
        out.append(d)
        out.extend(_flatten(d.notes))
    return out


def verify_diagnostics(diags: list[Diag], expects: list[Expect], file: str) -> list[str]:
    """Match diagnostics to expectations; the list of failures (empty = success)."""
    errors = []
    for d in _flatten(diags):
        if d.severity == "note" and d.message.startswith("see current operation"):
            continue
        for e in expects:
            if not e.seen and e.line == d.line and e.severity == d.severity and e.text in d.message:
                e.seen = True
                break
        else:
            errors.append(f"{file}:{d.line}:{d.col}: error: unexpected {d.severity}: {d.message}")
    for e in expects:
        if not e.seen:
            errors.append(f"{file}:{e.line}: error: expected {e.severity} \"{e.text}\" was not produced")
    return errors


# --- main --------------------------------------------------------------------------------------

def decode_source(data: bytes, file: str) -> tuple[str, Diag | None]:
    """The input as text, or a diagnostic at the first byte that is not UTF-8 (line:col, col in bytes)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        return "", Diag(file, line, col, "error", f"the input is not valid UTF-8 (byte 0x{data[e.start]:02x})")


HELP = """usage: relax-opt [options] [input-file]

  -o FILE                       write the output to FILE (default: stdout)
  --pass-pipeline=PIPELINE      'builtin.module(relax-infer-shapes,canonicalize,...)': relax and
                                upstream passes in one textual pipeline
  --<relax-pass>[=opts]         run one relax pass (e.g. --relax-infer-shapes, --relax-legalize);
  --<upstream-pass>             any other --flag that names an upstream pass runs it (--canonicalize)
  --split-input-file            process each '// -----' chunk separately
  --verify-diagnostics          check '// expected-error @+1 {{...}}' annotations
  --mlir-print-ir-after-all     print the IR after each pass (stderr)
  --mlir-print-op-generic       print in the generic form
  --mlir-print-debuginfo        print locations
  --mlir-timing                 report pass timings
  --no-verify                   do not verify after each pass
  --list-passes                 list the relax passes
  --version                     print the version
"""

_DRIVER_FLAGS = {"--split-input-file", "--verify-diagnostics", "--mlir-print-ir-after-all",
                 "--mlir-print-op-generic", "--mlir-timing", "--list-passes", "--version", "--help", "-h",
                 "--mlir-print-debuginfo", "--no-verify", "--allow-unregistered-dialect"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _main(argv: list[str]) -> int:
    from relax_mlir.transforms import PASSES

    flags: set[str] = set()
    items: list[str] = []
    out_path = "-"
    in_path = "-"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _DRIVER_FLAGS:
            flags.add(a)
        elif a == "-o":
            i += 1
            if i >= len(argv):
                print("relax-opt: error: -o needs a file name", file=sys.stderr)
                return 1
            out_path = argv[i]
        elif a.startswith("-o") and len(a) > 2 and not a.startswith("--"):
            out_path = a[2:]
        elif a.startswith("--pass-pipeline"):
            if "=" in a:
                text = a.split("=", 1)[1]
            else:
                i += 1
                text = argv[i] if i < len(argv) else ""
            from relax_mlir.passes import parse_pipeline
            items.extend(parse_pipeline(text))
        elif a.startswith("--") and len(a) > 2:
            name, _, opts = a[2:].partition("=")
            if name in PASSES:
                items.append(name + ("{" + opts + "}" if opts else ""))
            else:
                items.append(name + ("{" + opts + "}" if opts else ""))
        elif a == "-":
            in_path = "-"
        elif a.startswith("-") and len(a) > 1:
            print(f"relax-opt: error: unknown option '{a}' (see --help)", file=sys.stderr)
            return 1
        else:
            in_path = a
        i += 1

    if "--help" in flags or "-h" in flags:
        print(HELP)
        return 0
    if "--version" in flags:
        import mlir
        print(f"relax-opt {VERSION} (relax-mlir), MLIR Python bindings from {list(mlir.__path__)[0]}")
        return 0
    if "--list-passes" in flags:
        print("Relax passes:")
        for name in sorted(PASSES):
            doc = (PASSES[name].__doc__ or "").strip().splitlines()[0]
            print(f"  --{name:32s} {doc}")
        print("Any other upstream MLIR pass may be named in the same pipeline.")
        return 0

    source_name = "<stdin>" if in_path == "-" else in_path
    try:
        if in_path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(in_path, "rb") as f:
                data = f.read()
    except OSError as e:
        print(f"relax-opt: error: cannot read '{in_path}': {e.strerror}", file=sys.stderr)
        return 1
    text, bad = decode_source(data, source_name)
    if bad is not None:
        print(bad.render(), file=sys.stderr)
        return 1

    chunks: list[tuple[str, int]] = []
    if "--split-input-file" in flags:
        pos, line = 0, 0
        for m in SPLIT_MARKER.finditer(text):
            chunk = text[pos:m.start()]
            chunks.append((chunk, line))
            line += chunk.count("\n") + 1
            pos = m.end() + 1
        chunks.append((text[pos:], line))
    else:
        chunks.append((text, 0))

    outputs: list[str] = []
    failed = False
    verify = "--verify-diagnostics" in flags
    all_errors: list[str] = []
    for chunk, line_offset in chunks:
        session = Session(source_name)
        padded = "\n" * line_offset + chunk  # keep original line numbers in locations
        module = parse_module(session, padded)
        ok = module is not None and run_pipeline(
            session, module, items, print_after_all="--mlir-print-ir-after-all" in flags,
            timing="--mlir-timing" in flags, verify_each="--no-verify" not in flags)
        if verify:
            errs = verify_diagnostics(session.diags, collect_expectations(chunk, line_offset), source_name)
            all_errors.extend(errs)
            if ok and module is not None:
                outputs.append(_print(module, flags, session))
            continue
        for d in session.diags:
            print(d.render(), file=sys.stderr)
        if not ok:
            failed = True
            continue
        outputs.append(_print(module, flags, session))

    if verify:
        for e in all_errors:
            print(e, file=sys.stderr)
        failed = bool(all_errors)
    result = "\n// -----\n".join(outputs)
    if not failed or "--split-input-file" in flags:
        if out_path == "-":
            sys.stdout.write(result)
        else:
            with open(out_path, "w", encoding="utf-8") as f:
                f.write(result)
    return 1 if failed else 0


def _print(module, flags, session: Session) -> str:
    with session.ctx:
        return module.get_asm(print_generic_op_form="--mlir-print-op-generic" in flags,
                              enable_debug_info="--mlir-print-debuginfo" in flags)


if __name__ == "__main__":
    sys.exit(main())
