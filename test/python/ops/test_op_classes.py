"""Every op is one `class <Name>Op(...)` statement in ops/<family>.py that holds its signature,
deduction and legalization (STYLE.md, Conventions: Dialect), so `grep "class <Name>Op"` finds it."""
import inspect
import re
import sys

import pytest

import relax_mlir.ops  # noqa: F401  (registers every op)
from relax_mlir.dialect.spec import OPS

OP_CLASSES = sorted(OPS.items())
LEGALIZABLE = [(n, c) for n, c in OP_CLASSES if hasattr(c, "legalize")]


def _module_source(cls) -> str:
    return inspect.getsource(sys.modules[cls.__module__])


@pytest.mark.parametrize("name,cls", OP_CLASSES, ids=[n for n, _ in OP_CLASSES])
def test_op_is_a_class_statement(name, cls):
    assert cls.__module__.startswith("relax_mlir.ops."), cls.__module__
    assert cls.__name__.endswith("Op"), cls.__name__
    # A `class` statement at module level, not a type() call in a factory.
    assert re.search(rf"^class {cls.__name__}\(", _module_source(cls), re.M), \
        f"{name}: no `class {cls.__name__}(` in {cls.__module__}"
    assert getattr(sys.modules[cls.__module__], cls.__name__) is cls
    doc = cls.__dict__.get("__doc__")
    assert doc and doc.strip(), f"{name}: {cls.__name__} has no docstring of its own"


@pytest.mark.parametrize("name,cls", LEGALIZABLE, ids=[n for n, _ in LEGALIZABLE])
def test_legalize_is_defined_in_a_class_body(name, cls):
    owner = next(k for k in cls.__mro__ if "legalize" in k.__dict__)
    assert owner.__module__.startswith("relax_mlir.ops."), owner.__module__
    fn = owner.__dict__["legalize"]
    fn = getattr(fn, "__func__", fn)
    # A function assigned after the class (`X.legalize = classmethod(_f)`) keeps its own qualname.
    assert fn.__qualname__ == f"{owner.__name__}.legalize", \
        f"{name}: legalize is {fn.__qualname__}, not defined in class {owner.__name__}"
    assert re.search(r"^\s+def legalize\(", inspect.getsource(owner), re.M)


def test_no_legalize_assigned_from_outside():
    for mod in {sys.modules[c.__module__] for c in OPS.values()}:
        assert not re.search(r"^\w+\.legalize\s*=", inspect.getsource(mod), re.M), mod.__name__


def test_some_ops_are_legalizable():
    # The legalizable set must not silently vanish (e.g. a base class losing its legalize).
    assert len(LEGALIZABLE) >= 59, len(LEGALIZABLE)
