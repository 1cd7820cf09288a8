"""On a GPU machine (numpy, CuPy, ml_dtypes; no MLIR, no jax needed): run the fuzz programs that
bench/export_gpu_fuzz.py exported as cuda artifacts at every stored binding and compare with
jax.jit's results by the campaign's rules (`fuzz.campaign.compare`: exact for ints, bools and
exact float chains, a tolerance otherwise, NaN positions and Inf signs always). A result that
misses jax.jit's but equals the CPU build's (which the campaign had judged correct, possibly by a
wider or perturbed reference) counts as the CPU's disposition. A binding of a symbol to 0 must
raise ValueError. Exit status 1 on any failure or if mlir got imported.

Run: python3 bench/gpu_fuzz_check.py DIR [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))


def restore(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        import ml_dtypes

        return a.view(ml_dtypes.bfloat16)
    return a


def check_case(path: str) -> dict:
    from fuzz import campaign
    from relax_mlir.runtime import load

    with open(os.path.join(path, "case.json")) as f:
        case = json.load(f)
    data = np.load(os.path.join(path, "case.npz"))
    exe = load(path)
    row = {"seed": case["seed"], "families": case["families"], "failures": [], "cpu_disposition": 0}
    for b, bind in enumerate(case["bindings"]):
        dt = bind["dtypes"]
        args = [restore(data[f"arg{b}_{i}"], dt[f"arg{i}"]) for i in range(bind["args"])]
        want = [restore(data[f"want{b}_{i}"], dt[f"want{i}"]) for i in range(bind["results"])]
        cpu = [restore(data[f"cpu{b}_{i}"], dt[f"cpu{i}"]) for i in range(bind["results"])]
        try:
            got = [np.asarray(g) for g in campaign.as_list(exe(*args))]
        except Exception as e:
            row["failures"].append({"env": bind["env"], "kind": "run-error", "detail": f"{type(e).__name__}: {e}"[:300]})
            continue
        if len(got) != len(want):
            row["failures"].append({"env": bind["env"], "kind": "mismatch", "detail": f"{len(got)} results, want {len(want)}"})
            continue
        for i, (g, w, c) in enumerate(zip(got, want, cpu)):
            flags = (case["exact"][i], case["precision"][i], case["order_dependent"][i], case["unit_scale"][i])
            msg = campaign.compare(g, w, *flags)
            if msg is None:
                continue
            if campaign.compare(g, c, *flags) is None:
                row["cpu_disposition"] += 1
                continue
            row["failures"].append({"env": bind["env"], "kind": "mismatch", "detail": f"result #{i}: {msg}"})
    if case["zero"] is not None:
        z = case["zero"]
        args = [restore(data[f"zero_{i}"], d) for i, d in enumerate(z["dtypes"])]
        try:
            exe(*args)
            row["failures"].append({"env": z["env"], "kind": "not-refused", "detail": "a symbol bound to 0 ran"})
        except ValueError:
            pass
        except Exception as e:
            row["failures"].append({"env": z["env"], "kind": "run-error", "detail": f"want ValueError, got {type(e).__name__}: {e}"[:300]})
    row["ok"] = not row["failures"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    with open(os.path.join(a.dir, "index.json")) as f:
        index = json.load(f)
    rows, t0 = [], time.perf_counter()
    for r in index["rows"]:
        if r["status"] != "exported":
            continue
        try:
            row = check_case(os.path.join(a.dir, str(r["seed"])))
        except Exception as e:  # a broken case must not hide the others
            row = {"seed": r["seed"], "ok": False, "failures": [{"kind": "load-error", "detail": f"{type(e).__name__}: {e}"[:300]}]}
        rows.append(row)
        if not row["ok"]:
            print(f"seed {row['seed']} FAILED: {row['failures'][:3]}", flush=True)
    mlir_loaded = any(k == "mlir" or k.startswith("mlir.") for k in sys.modules)
    ok = sum(r["ok"] for r in rows)
    statuses = {}
    for r in index["rows"]:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"exported statuses: {statuses}")
    print(f"{ok} of {len(rows)} programs ok on the GPU ({sum(r.get('cpu_disposition', 0) for r in rows)} results "
          f"resolved as the CPU build's) in {time.perf_counter() - t0:.1f} s; mlir imported: {mlir_loaded}")
    out = {"ok": ok == len(rows) and not mlir_loaded, "rows": rows, "statuses": statuses}
    with open(a.json or os.path.join(a.dir, "gpu_fuzz_check.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
