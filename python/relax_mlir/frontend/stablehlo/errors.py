"""Import errors and their rendering as located compiler diagnostics (`file:line:col: error: ...`).
"""
from __future__ import annotations

from relax_mlir.core.diagnostics import CompileError


class UnsupportedOpError(CompileError):
    """A StableHLO op (or a form of one) the importer does not handle. A CompileError (so also a
    ValueError, as it was before): `relax_mlir.compile(exported)` raises it for what it refuses."""

    def __init__(self, op_name: str, loc: str = "", why: str = ""):
        self.op_name = op_name
        self.loc = loc
        self.why = why
        msg = self.headline()
        if loc:
            msg += f" at {loc}"
        super().__init__(msg)

    def headline(self) -> str:
        return f"unsupported StableHLO op '{self.op_name}'" + (f": {self.why}" if self.why else "")


class UnsupportedTypesError(UnsupportedOpError):
    """Every op of a module whose element types relax does not support, found before importing."""

    def __init__(self, items: list[UnsupportedOpError]):
        self.items = items
        ValueError.__init__(self, "\n".join(str(x) for x in items))
        self.op_name, self.loc, self.why = items[0].op_name, items[0].loc, items[0].why


class StableHLOParseError(CompileError):
    """The text does not parse as MLIR (with jax's StableHLO dialects); `diagnostics` holds
    (location text, message) pairs."""

    def __init__(self, diagnostics: list[tuple[str, str]]):
        self.diagnostics = diagnostics
        super().__init__("; ".join(f"{loc}: {msg}" for loc, msg in diagnostics) or "the input does not parse")


def _file_position(loc: str) -> tuple[str, int, int] | None:
    """(file, line, col) of the first `"file":line:col` in a jax location's text (a jax location
    names the Python source inside name and callsite locations). jax's bindings have no location
    accessors, so the position is read from the location's printed form (never from op text)."""
    i, n = 0, len(loc or "")
    while i < n:
        start = loc.find('"', i)
        if start < 0:
            return None
        j = start + 1
        while j < n and loc[j] != '"':
            j += 2 if loc[j] == "\\" else 1
        if j >= n:
            return None
        nums: list[int] = []
        k = j + 1
        while len(nums) < 2 and k < n and loc[k] == ":":
            e = k + 1
            while e < n and loc[e].isdigit():
                e += 1
            if e == k + 1:
                break
            nums.append(int(loc[k + 1:e]))
            k = e
        if len(nums) == 2:
            return loc[start + 1:j], nums[0], nums[1]
        i = j + 1
    return None


def _position(loc: str, source_name: str) -> str | None:
    """'file:line:col' of the first file position in a location's text; "-" (no file name) is
    `source_name`."""
    p = _file_position(loc)
    if p is None:
        return None
    return f"{source_name if p[0] in ('-', '') else p[0]}:{p[1]}:{p[2]}"


def render_error(e: Exception, source_name: str) -> str:
    """An import error as compiler diagnostics: `file:line:col: error: ...` per problem (or
    `file: error: ...` for one about the whole input)."""
    if isinstance(e, UnsupportedOpsError):
        return e.render(source_name)
    if isinstance(e, UnsupportedTypesError):
        return "\n".join(render_error(x, source_name) for x in e.items)
    if isinstance(e, StableHLOParseError):
        return "\n".join(f"{_position(loc, source_name) or source_name}: error: {msg}" for loc, msg in e.diagnostics)
    if isinstance(e, UnsupportedOpError):
        pos = _position(e.loc, source_name)
        if pos is not None:
            return f"{pos}: error: {e.headline()}"
        return f"{source_name}: error: {e}"
    if isinstance(e, CompileError):  # already rendered diagnostics of the built module
        return str(e)
    return f"{source_name}: error: {e}"


class UnsupportedOpsError(UnsupportedOpError):
    """Every unsupported op of a module at once: `groups` holds, per op name (a custom_call per
    target), the reason (or "") and the location texts of its occurrences, in order of first
    appearance."""

    def __init__(self, groups: list[tuple[str, str, list[str]]]):
        self.groups = groups
        self.op_name, self.why, locs = groups[0]
        self.loc = locs[0]
        ValueError.__init__(self, "\n".join(self.line(g) for g in groups))

    @staticmethod
    def line(group, source_name: str = "<string>", shown: int = 3) -> str:
        name, why, locs = group
        head = UnsupportedOpError(name, "", why).headline()
        if len(locs) > 1:
            head += f" ({len(locs)} occurrences)"
        where = [_position(loc, source_name) or loc for loc in locs[:shown]]
        more = f", and {len(locs) - shown} more" if len(locs) > shown else ""
        return f"{head} at {'; '.join(where)}{more}"

    def render(self, source_name: str) -> str:
        """One `file:line:col: error:` diagnostic per unsupported op (kind), its other
        occurrences named after it."""
        out = []
        for name, why, locs in self.groups:
            pos = _position(locs[0], source_name)
            if pos is None:
                out.append(f"{source_name}: error: {self.line((name, why, locs), source_name)}")
                continue
            head = UnsupportedOpError(name, "", why).headline()
            if len(locs) > 1:
                others = [_position(loc, source_name) or loc for loc in locs[1:4]]
                more = f", and {len(locs) - 4} more" if len(locs) > 4 else ""
                head += f" ({len(locs)} occurrences; also at {', '.join(others)}{more})"
            out.append(f"{pos}: error: {head}")
        return "\n".join(out)
