"""`Session`: an MLIR context with the relax dialect loaded, collecting diagnostics; `parse_module`."""
from __future__ import annotations

import ctypes
import os
import re

from mlir import ir

from relax_mlir.core.diagnostics import Diag, nesting_error, to_diag
from relax_mlir.dialect import load


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
    deep = nesting_error(text, session.source_name)
    if deep is not None:  # MLIR's parser would overflow the stack
        session.diags.append(deep)
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


def parse_bytecode(session: Session, data: bytes):
    """The `builtin.module` in MLIR bytecode `data` (what `--emit-bytecode` writes), or None with
    the reader's diagnostics recorded. Read through the C API, as `_parses_cleanly` does: the
    bindings' `Operation.parse` takes text only."""
    lib, get = _capi()
    ctx = get(session.ctx._CAPIPtr, b"mlir.ir.Context._CAPIPtr")
    before = len(session.diags)
    with session.ctx, ir.Location.unknown():
        m = lib.mlirModuleCreateParse(ctx, _MlirString(data, len(data)))
        if m and not any(d.severity == "error" for d in session.diags[before:]):
            return ir.Module._CAPICreate(_capsule(m, b"mlir.ir.Module._CAPIPtr")).operation
        if m:
            lib.mlirModuleDestroy(m)
    if not session.has_errors():
        session.error("the input is not valid MLIR bytecode")
    return None


def _capsule(ptr: int, name: bytes):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ptr, name, None)


def load_irdl(session: Session, text: str, file: str) -> bool:
    """Load the dialects an IRDL file defines into the session's context (mlir-opt's --irdl-file).
    False, with located errors recorded, when the file does not parse, holds anything but
    `irdl.dialect`s, or a dialect exists already or names an op, type or attribute twice (MLIR
    aborts the process on either)."""
    from mlir.dialects import irdl

    own = Session(file)  # diagnostics named after the IRDL file
    twice = _dialect_defined_twice(text, file)
    if twice is not None:  # MLIR's verifier aborts on it (a symbol table with a name twice)
        session.diags.append(twice)
        return False
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
