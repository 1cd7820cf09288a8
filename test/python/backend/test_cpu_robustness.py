"""CPU backend review findings: the library-call table built once under a lock, i1 recognised by
the bindings' type API, and a failing build tool of `export` reported as a CompileError."""
from __future__ import annotations

import os
import shutil
import stat
import threading
import time

import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.backend import cpu, cpu_artifact

SRC = """
func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %y = "relax.add"(%x, %x) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %y : !relax.tensor<["n", 4], f32>
}
"""


def test_libcalls_are_built_once_when_two_threads_race(monkeypatch):
    """Two threads' first calls of `_libcalls()`: one loads the libraries, both get the same table."""
    loads = []
    real = cpu._load_local

    def slow_load(path):
        loads.append(path)
        time.sleep(0.05)  # widen the window in which a second thread would start its own load
        return real(path)

    monkeypatch.setattr(cpu, "_LIBCALL_ADDRS", None)
    monkeypatch.setattr(cpu, "_load_local", slow_load)
    got = [None, None]
    start = threading.Barrier(2)

    def first_call(k):
        start.wait()
        got[k] = cpu._libcalls()

    threads = [threading.Thread(target=first_call, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1
    assert got[0] is got[1] and isinstance(got[0], dict)


def test_i1_is_recognised_by_type_not_by_its_text():
    with ir.Context():
        assert cpu._is_i1(ir.IntegerType.get_signless(1))
        assert cpu._is_i1(ir.Type.parse("memref<3xi1>").element_type)
        for text in ("i8", "i32", "f32", "index", "f16"):
            assert not cpu._is_i1(ir.Type.parse(text)), text


def test_i1_memory_is_legalized_and_bool_kernels_run():
    """memref<i1> loads/stores become byte accesses (found through `_is_i1`), so a bool kernel runs."""
    src = """
func.func @main(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1> {
  %c = "relax.less"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1>
  %d = "relax.logical_not"(%c) : (!relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  return %d : !relax.tensor<["n"], i1>
}
"""
    exe = relax_mlir.compile(src)
    rng = np.random.default_rng(0)
    for n in (0, 1, 13, 1000):
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(exe(x, y), ~(x < y))


def _failing_tool(tmp_path, name: str, message: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 3\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_export_reports_a_failing_c_compiler_as_compile_error(tmp_path, monkeypatch):
    exe = relax_mlir.compile(SRC)
    fake = _failing_tool(tmp_path, "cc", "fake cc: cannot link today")
    real_which = shutil.which
    monkeypatch.setattr(cpu_artifact.shutil, "which", lambda n, *a, **k: fake if n == "cc" else real_which(n, *a, **k))
    with pytest.raises(relax_mlir.CompileError) as info:
        exe.export(str(tmp_path / "art"))
    msg = str(info.value)
    assert "fake cc: cannot link today" in msg and "status 3" in msg and "cc" in msg


def test_export_reports_a_failing_llvm_tool_as_compile_error(tmp_path, monkeypatch):
    exe = relax_mlir.compile(SRC)
    fake = _failing_tool(tmp_path, "opt", "fake opt: bad IR")
    real_tool = cpu_artifact._tool
    monkeypatch.setattr(cpu_artifact, "_tool", lambda pkg, name: fake if name == "opt" else real_tool(pkg, name))
    with pytest.raises(relax_mlir.CompileError, match="fake opt: bad IR"):
        exe.export(str(tmp_path / "art"))
    assert not os.path.exists(tmp_path / "art" / "kernels.so")
