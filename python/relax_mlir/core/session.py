"""`Session`: an MLIR context with the relax dialect loaded, collecting diagnostics; `parse_module`."""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile

import mlir
from mlir import ir
from mlir.dialects import irdl

from relax_mlir.core.diagnostics import Diag, dense_string_error, nesting_error, result_number_error, string_escape_error, to_diag
from relax_mlir.dialect import _cached_text, load


class Session:
    """A Context with the relax dialect, collecting diagnostics."""

    def __init__(self, source_name: str = "<stdin>"):
        self.ctx = ir.Context()
        load(self.ctx)
        self.source_name = source_name
        self.diags: list[Diag] = []
        # The handler must not reference `self`: a Session <-> handler cycle lets the garbage
        # collector free the Context before the operations that live in it (a segfault).
        diags, name = self.diags, source_name

        def on_diag(d) -> bool:
            diags.append(to_diag(d, name))
            return True

        self._handler = self.ctx.attach_diagnostic_handler(on_diag)

    def add_error_diagnostics(self, e: Exception) -> None:
        seen = {(d.line, d.col, d.message) for d in self.diags}
        for d in getattr(e, "error_diagnostics", []) or []:
            nd = to_diag(d, self.source_name)
            if (nd.line, nd.col, nd.message) not in seen:
                self.diags.append(nd)

    def error(self, message: str) -> None:
        """Record an error that has no location in the input."""
        self.diags.append(Diag("", 0, 0, "error", message))

    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diags)


_TOP_LEVEL_COUNT = "source must contain a single top-level operation"
_CUSTOM_FORM_RE = re.compile(r'(?:^|=)\s*(relax(?:_v)?\.[A-Za-z_][\w.]*)\b', re.M)


class _MlirString(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("length", ctypes.c_size_t)]


_CAPI: list = []


def _capi():
    """MLIR's C API from the Python bindings' own library, called with the GIL held (the
    session's diagnostic handler is Python)."""
    if not _CAPI:
        import mlir._mlir_libs as libs

        lib = ctypes.PyDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
        lib.mlirOperationCreateParse.restype = ctypes.c_void_p
        lib.mlirOperationCreateParse.argtypes = [ctypes.c_void_p, _MlirString, _MlirString]
        lib.mlirOperationDestroy.argtypes = [ctypes.c_void_p]
        lib.mlirModuleCreateParse.restype = ctypes.c_void_p
        lib.mlirModuleCreateParse.argtypes = [ctypes.c_void_p, _MlirString]
        lib.mlirModuleDestroy.argtypes = [ctypes.c_void_p]
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        _CAPI.append((lib, get))
    return _CAPI[0]


def _parses_cleanly(session: Session, text: str, implicit: bool) -> bool:
    """Parse `text` once through the C API, the session's handler recording the diagnostics: True
    when it parses without an error (the parse is then redone through the bindings). MLIR's parser
    can succeed after emitting an error (an IRDL type followed by a bad token, `!relax.tensor<[2],
    f32>@`: malformed-IR mutant 20 of relax-plan-memory-alias.mlir), and the bindings then abort
    the process (an assertion on unhandled captured errors), so such text never reaches them."""
    lib, get = _capi()
    ctx = get(session.ctx._CAPIPtr, b"mlir.ir.Context._CAPIPtr")
    data = text.encode()
    before = len(session.diags)
    if implicit:
        m = lib.mlirModuleCreateParse(ctx, _MlirString(data, len(data)))
        if m:
            lib.mlirModuleDestroy(m)
    else:
        name = session.source_name.encode()
        m = lib.mlirOperationCreateParse(ctx, _MlirString(data, len(data)), _MlirString(name, len(name)))
        if m:
            lib.mlirOperationDestroy(m)
    errors = any(d.severity == "error" for d in session.diags[before:])
    if m and not errors:
        del session.diags[before:]  # the bindings' parse reports them again
        return True
    if not errors:
        session.diags.append(_silent_parse_failure(session.source_name, text))
    return False


def parse_module(session: Session, text: str):
    """Parse `text` into a `builtin.module` (an implicit one around zero, one or several top-level
    ops, as mlir-opt does). None, with located diagnostics recorded, when the text does not parse."""
    deep = nesting_error(text, session.source_name) or (result_number_error(text, session.source_name)
                                                         if "#" in text else None)
    if deep is not None:  # MLIR's parser would overflow the stack, or run out of memory
        session.diags.append(deep)
        return None
    bad = string_escape_error(text, session.source_name) if "\\" in text else None
    if bad is not None:  # the bindings would terminate converting such bytes in a diagnostic
        session.diags.append(bad)
        return None
    if "irdl.dialect" in text:  # MLIR's verifier aborts on a dialect defined twice (see load_irdl)
        twice = _dialect_defined_twice(text, session.source_name)
        if twice is not None:
            session.diags.append(twice)
            return None
    literal = dense_string_error(text, session.source_name) if '"' in text else None
    if literal is not None:  # MLIR's literal parser asserts on it
        session.diags.append(literal)
        return None
    with session.ctx, ir.Location.unknown():
        before = len(session.diags)
        if not _parses_cleanly(session, text, implicit=False):
            if any(_TOP_LEVEL_COUNT in d.message for d in session.diags[before:]):
                del session.diags[before:]
                return _parse_implicit_module(session, text)
            return None
        try:
            op = ir.Operation.parse(text, source_name=session.source_name)
        except ir.MLIRError as e:
            if any(_TOP_LEVEL_COUNT in d.message for d in e.error_diagnostics):
                return _parse_implicit_module(session, text)
            session.add_error_diagnostics(e)
            if not session.has_errors():
                session.diags.append(_silent_parse_failure(session.source_name, text))
            return None
        if op.operation.name != "builtin.module":
            # A single top-level op is returned as is: wrap it in a module, as mlir-opt does.
            m = ir.Module.create()
            m.body.append(op.operation)
            return m.operation
        return op.operation


BYTECODE_MAGIC = b"ML\xefR"


def stock_mlir_opt() -> str:
    """The path of the mlir-opt that ships with the MLIR Python bindings (the same build)."""
    return os.path.join(list(mlir.__path__)[0], "bin", "mlir-opt")


def bytecode_timeout_s(size: int) -> float:
    """How long the bytecode reader may take: 10 s and 1 s more per MiB (real files decode at
    hundreds of MiB/s; a corrupted one can make it loop)."""
    return 10.0 + size / 2**20


def parse_bytecode(session: Session, data: bytes, extra_irdl: str | None = None):
    """The `builtin.module` in MLIR bytecode `data` (what `--emit-bytecode` writes), or None with
    errors recorded. MLIR's bytecode reader trusts its input (a corrupted file aborts, hangs or
    overflows), so stock `mlir-opt` decodes it in a child process, with the relax dialect (and
    `extra_irdl`, a user's IRDL file) loaded; its text output, locations kept, is then parsed as
    any input is."""
    exe = stock_mlir_opt()
    with tempfile.TemporaryDirectory(prefix="relax-bytecode-") as tmp:
        irdl_path = os.path.join(tmp, "dialects.irdl.mlir")
        with open(irdl_path, "w", encoding="utf-8") as f:
            f.write(_cached_text() + "\n" + (extra_irdl or ""))
        try:
            run = subprocess.run([exe, "--irdl-file=" + irdl_path, "--allow-unregistered-dialect",
                                  "--mlir-print-debuginfo", "--mlir-print-op-generic", "-"],
                                 input=data, capture_output=True, timeout=bytecode_timeout_s(len(data)))
        except subprocess.TimeoutExpired:
            return _whole_file_error(session, f"reading the MLIR bytecode took over "
                                              f"{bytecode_timeout_s(len(data)):.0f} s (a corrupted file?)")
        except OSError as e:
            return _whole_file_error(session, f"cannot run mlir-opt to read MLIR bytecode: {e.strerror or e}")
    if run.returncode != 0:
        lines = [l.strip() for l in run.stderr.decode("utf-8", "replace").splitlines()]
        errors = [l.split("error: ", 1)[1] for l in lines if "error: " in l]
        for e in errors:
            _whole_file_error(session, f"malformed MLIR bytecode: {e}")
        if not errors:
            how = f"signal {-run.returncode}" if run.returncode < 0 else f"exit status {run.returncode}"
            _whole_file_error(session, f"malformed MLIR bytecode (MLIR's reader stopped with {how})")
        return None
    try:
        text = run.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return _whole_file_error(session, "malformed MLIR bytecode (its strings are not UTF-8)")
    return parse_module(session, text)


def _whole_file_error(session: Session, message: str) -> None:
    session.diags.append(Diag(session.source_name, 0, 0, "error", message))


def load_irdl(session: Session, text: str, file: str) -> bool:
    """Load the dialects an IRDL file defines into the session's context (mlir-opt's --irdl-file).
    False, with located errors recorded, when the file does not parse, holds anything but
    `irdl.dialect`s, or a dialect exists already or names an op, type or attribute twice (MLIR
    aborts the process on either)."""
    twice = _dialect_defined_twice(text, file)
    if twice is not None:  # MLIR's verifier aborts on it (a symbol table with a name twice)
        session.diags.append(twice)
        return False
    own = Session(file)  # diagnostics named after the IRDL file
    checked = parse_module(own, text)
    if checked is not None:
        with own.ctx:
            _check_irdl(session.ctx, checked)
    session.diags.extend(own.diags)
    if checked is None or own.has_errors():
        return False
    with session.ctx, ir.Location.unknown():
        try:
            irdl.load_dialects(ir.Module.parse(text))
        except ir.MLIRError as e:
            session.add_error_diagnostics(e)
            return False
    return True


_IRDL_DIALECT_RE = re.compile(r'irdl\.dialect\s+@(?:"((?:[^"\\]|\\.)*)"|([\w.$-]+))'
                              r'|"irdl\.dialect"\s*\(\s*\)\s*<?\s*\{\s*sym_name\s*=\s*"((?:[^"\\]|\\.)*)"')


def _dialect_defined_twice(text: str, file: str) -> Diag | None:
    """A located error at the second definition of an IRDL dialect name in `text` (a lexical scan
    before parsing, comments skipped), else None."""
    seen: set[str] = set()
    for m in _IRDL_DIALECT_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "//" in text[line_start:m.start()]:
            continue
        name = next(g for g in m.groups() if g is not None)
        if name in seen:
            line = text.count("\n", 0, m.start()) + 1
            return Diag(file, line, m.start() - line_start + 1, "error", f"dialect '{name}' is defined twice")
        seen.add(name)
    return None


def _check_irdl(ctx: ir.Context, module) -> None:
    """Emit a located error (in the module's context) for what `irdl.load_dialects` would abort on."""
    dialects: set[str] = set()
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "irdl.dialect":
            op.location.emit_error(f"'{op.operation.name}' at the top level of an IRDL file (expected irdl.dialect)")
            continue
        dialect = ir.StringAttr(op.attributes["sym_name"]).value
        if dialect in dialects:  # spelled in a way the lexical scan missed
            op.location.emit_error(f"dialect '{dialect}' is defined twice")
        dialects.add(dialect)
        try:
            ctx.dialects[dialect]
            op.location.emit_error(f"dialect '{dialect}' is already loaded")
        except IndexError:
            pass
        seen: set[str] = set()
        for inner in op.regions[0].blocks[0].operations:
            if "sym_name" in inner.attributes:
                sym = ir.StringAttr(inner.attributes["sym_name"]).value
                if sym in seen:
                    inner.location.emit_error(f"'{sym}' is defined twice in dialect '{dialect}'")
                seen.add(sym)


def _parse_implicit_module(session: Session, text: str):
    # ir.Module.parse wraps any number of top-level ops in a module; it takes no source name, so
    # its locations say "-", which to_diag maps back to the session's file.
    if not _parses_cleanly(session, text, implicit=True):
        return None
    try:
        return ir.Module.parse(text).operation
    except ir.MLIRError as e:
        session.add_error_diagnostics(e)
        if not session.has_errors():
            session.diags.append(_silent_parse_failure(session.source_name, text))
        return None


def _silent_parse_failure(file: str, text: str) -> Diag:
    """MLIR's parser fails without a diagnostic on an IRDL op written in custom form
    (`relax.exp(%x)`, not `"relax.exp"(%x)`): point at the first such op if there is one.
    (A scan of the source text for the error message only: the text is not edited or re-parsed.)"""
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
