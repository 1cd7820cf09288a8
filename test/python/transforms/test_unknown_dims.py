"""Unknown ("?") parameter dims: every relation an op's deduction assumes of a "?" dim is a run-time
check (a `relax.match_cast` inserted by relax-infer-shapes) that raises ValueError before native
code runs, or a located CompileError; dims a kernel reads at run time stay free."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir


def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def one_op(params, op, result, attrs="") -> str:
    """func @main(params...) { %0 = op(params...) {attrs}; return %0 }; params: (dims, dtype)."""
    ps = ", ".join(f"%a{i}: {T(*p)}" for i, p in enumerate(params))
    names = ", ".join(f"%a{i}" for i in range(len(params)))
    tys = ", ".join(T(*p) for p in params)
    rt = T(*result)
    return (f"func.func @main({ps}) -> {rt} {{\n"
            f'  %0 = "{op}"({names}) {attrs} : ({tys}) -> {rt}\n'
            f"  return %0 : {rt}\n}}\n")


F = "f32"
rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def run_child(code: str) -> subprocess.CompletedProcess:
    """Run a program in a fresh process (a wrong kernel may crash it) and return its result."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600)


# --- the issue's repro: x declared ["?", "?"] + y [4, 8] -------------------------------------------

ADD_SRC = one_op([(["?", "?"], F), ([4, 8], F)], "relax.add", (["?", "?"], F))


def test_add_refines_the_unknown_operand_with_a_match_cast():
    m = relax_mlir.parse(ADD_SRC)
    text = str(m)
    assert '"relax.match_cast"(%arg0)' in text
    assert "-> !relax.tensor<[4, 8], f32>" in text


def test_add_unknown_dims_checked_at_run_time():
    exe = relax_mlir.compile(ADD_SRC)
    x, y = rand(4, 8), rand(4, 8)
    np.testing.assert_allclose(exe(x, y), x + y, rtol=1e-6)
    # (1, 8) would broadcast in numpy; a '?' dim is not broadcast at run time: a clean ValueError.
    for bad in [(1, 8), (4, 9), (5, 8), (0, 8)]:
        with pytest.raises(ValueError, match=r"'relax.add' op operand #0 \('lhs'\).* dim \d must be"):
            exe(rand(*bad), y)


def test_add_unknown_dim_against_a_symbol_several_shapes():
    # x ["?", 8] + y ["n", 8]: x's dim 0 must be n; one compile, n = 1, a prime, large, 0.
    src = one_op([(["?", 8], F), (["n", 8], F)], "relax.add", (["?", "?"], F))
    exe = relax_mlir.compile(src)
    for n in (1, 13, 2049, 0):
        x, y = rand(n, 8), rand(n, 8)
        np.testing.assert_allclose(exe(x, y), x + y, rtol=1e-6)
    with pytest.raises(ValueError, match=r"dim 0 must be n"):
        exe(rand(3, 8), rand(4, 8))
    with pytest.raises(ValueError, match=r"dim 0 must be n"):
        exe(rand(1, 8), rand(4, 8))


def test_where_unknown_condition():
    src = one_op([(["?"], "i1"), (["n"], F), (["n"], F)], "relax.where", (["?"], F))
    exe = relax_mlir.compile(src)
    for n in (1, 7, 1000, 0):
        c, x, y = rng.random(n) > 0.5, rand(n), rand(n)
        np.testing.assert_array_equal(exe(c, x, y), np.where(c, x, y))
    with pytest.raises(ValueError, match=r"'relax.where' op operand #0 \('condition'\)"):
        exe(np.ones(1, np.bool_), rand(5), rand(5))


def test_broadcast_to_unknown_dim():
    src = one_op([(["?", 8], F)], "relax.broadcast_to", (["?", "?"], F), "{shape = [4, 8]}")
    exe = relax_mlir.compile(src)
    x = rand(4, 8)
    np.testing.assert_array_equal(exe(x), x)
    with pytest.raises(ValueError, match=r"'relax.broadcast_to' op .* dim 0 must be 4"):
        exe(rand(1, 8))


def test_matmul_unknown_inner_dim():
    src = one_op([([4, "?"], F), ([8, 3], F)], "relax.matmul", (["?", "?"], F))
    exe = relax_mlir.compile(src)
    a, b = rand(4, 8), rand(8, 3)
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"'relax.matmul' op operand #0 \('lhs'\).* dim 1 must be 8"):
        exe(rand(4, 2), b)


def test_reduce_over_unknown_dim_is_free():
    # The kernel reads the reduced dim at run time: no check, any size is right.
    src = one_op([(["?", 3], F)], "relax.sum", ([3], F), "{axes = [0]}")
    exe = relax_mlir.compile(src)
    assert "relax.match_cast" not in str(relax_mlir.parse(src))
    for n in (1, 11, 3000, 0):
        x = rand(n, 3)
        np.testing.assert_allclose(exe(x), x.sum(0), rtol=1e-4, atol=1e-4)


def test_reshape_unknown_dim_gets_an_element_count_check():
    src = one_op([(["?", 4], F)], "relax.reshape", (["?"], F), '{shape = ["4*n"]}')
    src = src.replace("%a0: ", "%a0: ", 1)
    # n must be bound: a second parameter carries it.
    src = (f"func.func @main(%a0: {T(['?', 4])}, %s: {T(['n'])}) -> {T(['?'])} {{\n"
           f'  %0 = "relax.reshape"(%a0) {{shape = ["4*n"]}} : ({T(["?", 4])}) -> {T(["?"])}\n'
           f"  return %0 : {T(['?'])}\n}}\n")
    exe = relax_mlir.compile(src)
    for n in (1, 5, 1031, 0):
        x = rand(n, 4)
        np.testing.assert_array_equal(exe(x, rand(n)), x.reshape(-1))
    with pytest.raises(ValueError, match=r"'relax.reshape' op .* dim 0 must be n .*element counts"):
        exe(rand(3, 4), rand(2))


def test_reshape_of_one_element_to_50_million_is_refused_before_reading():
    # Unchecked, this reads 200 MB past a 4-byte buffer (segfault or garbage): run it in a child.
    r = run_child(f"""
        import numpy as np, relax_mlir
        src = {one_op([(["?"], F)], "relax.reshape", (["?"], F), "{shape = [50000000]}")!r}
        exe = relax_mlir.compile(src)
        try:
            exe(np.ones(1, np.float32))
        except ValueError as e:
            print("VALUEERROR", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "VALUEERROR" in r.stdout and "dim 0 must be 50000000" in r.stdout, r.stdout


def test_reshape_constant_count_mismatch_is_a_compile_error():
    src = one_op([(["?", 3], F)], "relax.reshape", (["?"], F), "{shape = [10]}")
    with pytest.raises(relax_mlir.CompileError, match=r"2:8: .*not a multiple of 3"):
        relax_mlir.compile(src)


@pytest.mark.parametrize("src, msg", [
    (one_op([(["?", "?"], F)], "relax.reshape", (["?"], F), "{shape = [12]}"), r"dim 0 is unknown"),
    (one_op([([4, "?"], F), (["?", 3], F)], "relax.matmul", (["?", "?"], F)), r"'lhs'\) dim 1 is unknown"),
    (one_op([(["?"], F)], "relax.strided_slice", (["?"], F), "{axes = [0], begin = [0], end = [5]}"),
     r"dim 0 is unknown|needs known dims"),
])
def test_unknown_dims_the_op_cannot_check_are_refused_at_compile_time(src, msg):
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: error: .*(" + msg + ")"):
        relax_mlir.compile(src)


def test_take_from_table_with_unknown_rows_is_free():
    src = one_op([(["?", 3], F), (["k"], "i32")], "relax.take", (["?", "?"], F))
    exe = relax_mlir.compile(src)
    for n in (1, 5, 257):
        x = rand(n, 3)
        idx = np.array([0, n - 1, n // 2], np.int32)
        np.testing.assert_array_equal(exe(x, idx), x[idx])


def test_crash_candidates_exit_cleanly():
    # Each of these read or wrote out of bounds before: the child must end with the ValueError.
    r = run_child(f"""
        import numpy as np, relax_mlir
        cases = [
            ({ADD_SRC!r}, [np.ones((1, 8), np.float32), np.ones((4, 8), np.float32)]),
            ({ADD_SRC!r}, [np.ones((400, 800), np.float32), np.ones((4, 8), np.float32)]),
            ({one_op([(["?", 8], F)], "relax.broadcast_to", ([4096, 8], F), "{shape = [4096, 8]}")!r},
             [np.ones((1, 8), np.float32)]),
            ({one_op([([4, "?"], F), ([8, 3], F)], "relax.matmul", (["?", "?"], F))!r},
             [np.ones((4, 1), np.float32), np.ones((8, 3), np.float32)]),
        ]
        for src, args in cases:
            exe = relax_mlir.compile(src)
            try:
                exe(*args)
                print("NO ERROR")
            except ValueError as e:
                print("VALUEERROR", e)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("VALUEERROR") == 4 and "NO ERROR" not in r.stdout, r.stdout
