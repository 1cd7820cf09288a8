"""Peak RSS of one call with and without relax-plan-memory (each in a fresh subprocess).

A chain of elementwise kernels on a (n, 1024) tensor at n = 8192 (32 MiB per intermediate).
Prints the planned bytes, the live-set lower bound, the process peak RSS, and the peak-RSS growth
during calls (VmHWM reset through /proc/self/clear_refs after a warm-up call, minus VmRSS before).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import sys, json, numpy as np, relax_mlir
planned = sys.argv[1] == "1"
t = '!relax.tensor<["n", 1024], f32>'
body, prev = [], "%x"
for i in range(8):
    op = ("relax.exp", "relax.tanh")[i % 2]
    body.append(f'  %v{i} = "{op}"({prev}) : ({t}) -> {t}')
    if i % 2:
        body.append(f'  %s{i} = "relax.add"(%v{i}, %v{i - 1}) : ({t}, {t}) -> {t}'); prev = f"%s{i}"
    else:
        prev = f"%v{i}"
src = f"func.func @main(%x: {t}) -> {t} attributes {{relax.symbol_bounds = {{n = 8192}}}} {{\n" + "\n".join(body) + f"\n  return {prev} : {t}\n}}"
P = ["relax-infer-shapes", "relax-legalize"] + (["relax-plan-memory"] if planned else []) + ["relax-lower-shapes", "relax-to-upstream"]
exe = relax_mlir.compile(src, passes=P)
x = np.random.rand(8192, 1024).astype(np.float32)
def status_kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
out = exe(x)  # warm
del out
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM: the compile's own peak must not hide the call's
before = status_kib("VmRSS")
for _ in range(3):
    out = exe(x)
    del out
after = status_kib("VmHWM")
m = relax_mlir.run_passes(relax_mlir.parse(src), ["relax-legalize", "relax-plan-memory"])
with m.context:
    plan = m.op.regions[0].blocks[0].operations[0].attributes["relax.memory_plan"]
    info = {k: plan[k].value for k in ("planned_peak_bytes", "live_peak_bytes", "unplanned_bytes")}
info["peak_rss_kib"] = after
info["rss_before_calls_kib"] = before
# The planned blocks are a workspace the runtime keeps between calls: resident before the calls,
# so counted back in as memory a call needs.
info["workspace_kib"] = exe[exe.main].workspace_bytes() // 1024
info["call_peak_delta_kib"] = after - before + info["workspace_kib"]
print(json.dumps(info))
"""


def run(planned: bool) -> dict:
    # glibc returns freed 64 KiB+ buffers to the kernel at once, so the delta is the call's own.
    env = dict(os.environ, RELAX_MLIR_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="65536")
    out = subprocess.run([sys.executable, "-c", CHILD, "1" if planned else "0"], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    a, b = run(True), run(False)
    mib = 1 << 20
    print(f"planned storage: {a['planned_peak_bytes'] / mib:.0f} MiB; live-set lower bound: {a['live_peak_bytes'] / mib:.0f} MiB; "
          f"sum of intermediates (unplanned): {a['unplanned_bytes'] / mib:.0f} MiB")
    print(f"peak RSS: planned {a['peak_rss_kib'] / 1024:.0f} MiB, unplanned {b['peak_rss_kib'] / 1024:.0f} MiB, "
          f"ratio {a['peak_rss_kib'] / b['peak_rss_kib']:.2f}")
    print(f"peak RSS growth during a call (beyond input and code): planned {a['call_peak_delta_kib'] / 1024:.0f} MiB, "
          f"unplanned {b['call_peak_delta_kib'] / 1024:.0f} MiB, "
          f"ratio {a['call_peak_delta_kib'] / b['call_peak_delta_kib']:.2f}")
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "memory_plan.json"), "w") as f:
        json.dump({"planned": a, "unplanned": b}, f, indent=1)


if __name__ == "__main__":
    main()
