"""Fixed cost of a call through the CPU runtime (issue 18, item 4: at most 10 us + 0.3 us per
argument): a trivial entry with 2, 20 and 200 arguments (f32[n] each, n symbolic and bound to 4 at
the call; the result is their sum), called

* ``relax``: `exe(*arrays)`: argument checks, symbol binding, output allocation, descriptors, the call;
* ``partial``: the same entry with all but the first argument bound once (`exe["main"].partial`);
* ``bare``: the compiled entry called through ctypes with a descriptor buffer built once (the floor:
  what native code and the ctypes call itself cost);

interleaved in rounds of about a millisecond (the best round per side is kept), in one process. The overhead is
relax - bare, in wall time and in the calling thread's CPU time (`time.thread_time`; the "cpu"
columns): on a loaded machine a round of many calls is preempted, which only the wall time counts.

Run: .venv/bin/python bench/call_overhead.py [--rounds R] [--calls C] [--json PATH]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def module_text(n_args: int) -> str:
    t = '!relax.tensor<["n"], f32>'
    params = ", ".join(f"%a{i}: {t}" for i in range(n_args))
    body, acc = [], "%a0"
    for i in range(1, n_args):
        body.append(f'    %s{i} = "relax.add"({acc}, %a{i}) : ({t}, {t}) -> {t}')
        acc = f"%s{i}"
    body.append(f"    return {acc} : {t}")
    return f"func.func @main({params}) -> {t} {{\n" + "\n".join(body) + "\n}\n"


def bare_call(exe, arrays):
    """A zero-argument callable running the compiled entry on `arrays` (inputs, a preallocated
    output, workspace, error slot) with its descriptor buffer built once: the ctypes floor."""
    from relax_mlir.backend.cpu import _contiguous_strides, _data_pointer, _layout

    _, dispatch = exe._keepalive
    fn, _ = dispatch.jit1._lookup("main")
    sig = exe.signature()
    out = np.empty(arrays[0].shape, np.float32)
    ws = exe["main"].workspace({"n": arrays[0].shape[0]})
    err = np.zeros(1, np.int32)
    every = list(arrays) + [out] + ws + [err]
    assert len(every) == len(sig.params) + len(sig.results) + len(sig.workspace) + 1
    words = []
    for a in every:
        p = _data_pointer(a)
        words += [p, p, 0, *a.shape, *_contiguous_strides(a.shape)]
    buf_type, descs, slots = _layout(tuple(a.ndim for a in every))
    buf = buf_type()
    base = ctypes.addressof(buf)
    words += [base + o for o in descs] + [base + o for o in slots]
    buf[:] = words
    arg = base + 8 * len(words) - 8 * len(every)

    def call():
        fn(arg)
    call.keep = (buf, every)
    return call


def best_us(f, calls: int) -> tuple[float, float]:
    """Microseconds per call: wall, and the calling thread's CPU."""
    c, t = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - t) / calls * 1e6, (time.thread_time() - c) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--args", default="2,20,200")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import relax_mlir

    rows = []
    print(f"{'args':>5s} {'relax us':>9s} {'partial us':>10s} {'bare us':>8s} {'overhead us':>11s} "
          f"{'budget us':>9s} {'partial ovh':>11s} {'cpu: overhead':>13s} {'partial ovh':>11s}")
    for n_args in (int(x) for x in a.args.split(",")):
        exe = relax_mlir.compile(module_text(n_args))
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(4).astype(np.float32) for _ in range(n_args)]
        f = exe["main"]
        want = np.sum(arrays, axis=0, dtype=np.float32)
        np.testing.assert_allclose(exe(*arrays), want, rtol=1e-5)
        part = f.partial({i: arrays[i] for i in range(1, n_args)}) if hasattr(f, "partial") else None
        if part is not None:
            np.testing.assert_allclose(part(arrays[0]), want, rtol=1e-5)
        bare = bare_call(exe, arrays)
        sides = {"relax": lambda: exe(*arrays), "bare": bare}
        if part is not None:
            sides["partial"] = lambda: part(arrays[0])
        best = {k: float("inf") for k in sides}
        cpu = {k: float("inf") for k in sides}
        # rounds of about a millisecond (fewer calls for wide argument lists): the best one is then
        # likely to have run without losing the core, which a loaded machine does every few ms
        per_round = max(1, min(a.calls // a.rounds, 4000 // n_args))
        for _ in range(a.rounds):  # interleaved: every side once per round
            for k, g in sides.items():
                wall, c = best_us(g, per_round)
                best[k], cpu[k] = min(best[k], wall), min(cpu[k], c)
        ovh = best["relax"] - best["bare"]
        povh = best.get("partial", float("nan")) - best["bare"]
        covh = cpu["relax"] - cpu["bare"]
        cpovh = cpu.get("partial", float("nan")) - cpu["bare"]
        budget = 10 + 0.3 * n_args
        rows.append({"args": n_args, **{f"{k}_us": v for k, v in best.items()}, "overhead_us": ovh,
                     "partial_overhead_us": povh, "budget_us": budget, **{f"{k}_cpu_us": v for k, v in cpu.items()},
                     "overhead_cpu_us": covh, "partial_overhead_cpu_us": cpovh})
        print(f"{n_args:5d} {best['relax']:9.2f} {best.get('partial', float('nan')):10.2f} {best['bare']:8.2f} "
              f"{ovh:11.2f} {budget:9.1f} {povh:11.2f} {covh:13.2f} {cpovh:11.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "load": os.getloadavg()}, fh, indent=1)


if __name__ == "__main__":
    main()
