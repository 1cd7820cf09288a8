"""os.fork() while another thread compiles: the fork waits for the compile in flight, and the
child never collects the parent's MLIR garbage (a context whose thread pool ran threads aborts
when destroyed where those threads do not exist). The children then call executables built
before the fork, or compile, and exit cleanly (were SIGSEGV, SIGABRT or hangs: probe s22/rt F6)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import os, sys, threading, time, faulthandler
    import numpy as np
    import relax_mlir
    TXT = """func.func @main(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 64], f32>) -> !relax.tensor<["n", 64], f32> {
      %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 64], f32>) -> !relax.tensor<["n", 64], f32>
      %1 = "relax.OP"(%0) : (!relax.tensor<["n", 64], f32>) -> !relax.tensor<["n", 64], f32>
      return %1 : !relax.tensor<["n", 64], f32>
    }"""
    stop = threading.Event()
    def compiler():
        ops = ["relax.relu", "relax.tanh", "relax.exp", "relax.sigmoid"]
        i = 0
        while not stop.is_set():
            relax_mlir.compile(TXT.replace("relax.OP", ops[i % 4])); i += 1
    E0 = relax_mlir.compile(TXT.replace("relax.OP", "relax.negative"))
    t = threading.Thread(target=compiler); t.start()
    time.sleep(0.5)
    codes = []
    for mode in ("call", "compile", "call", "compile"):
        time.sleep(0.3)
        pid = os.fork()
        if pid == 0:
            faulthandler.dump_traceback_later(60, exit=True)
            e = relax_mlir.compile(TXT.replace("relax.OP", "relax.negative")) if mode == "compile" else E0
            import gc; gc.collect()
            x = np.ones((3, 64), np.float32); w = np.eye(64, dtype=np.float32)
            os._exit(0 if np.array_equal(e(x, w), -x) else 5)
        codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    stop.set(); t.join()
    print("children", codes)
''')


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_compiles():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("children [0, 0, 0, 0]"), out.stdout + out.stderr[-3000:]
