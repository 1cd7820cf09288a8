"""First calls, before and after, in one run (issue 18: a first call at any shape costs at most three
ordinary calls): `bench/side_by_side.py --growing` run alternately with this checkout's relax_mlir
and with a baseline checkout's (`--baseline`, a `python/` folder, e.g. main's from
`git archive main python | tar -x -C /tmp/base`), each in its own process (a package is imported
once per process), the order swapped every round. Prints one markdown table: relax-mlir's first
call over its median ordinary call at each table shape (wall; the calling thread's CPU in
parentheses) and the growing-shape sequences (17..2047 in a new thread; after `exe.reserve` where
the checkout has it), per run, with the load average before and after.

    python bench/first_calls.py --baseline /tmp/base/python [--runs 2] [--rounds 7] [--only mlp,attention,block]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(package: str, args, out: str) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "side_by_side.py"), "--no-iree", "--new-shapes", "0",
           "--rounds", str(args.rounds), "--only", args.only, "--growing", str(args.reps), "--package", package,
           "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="the baseline checkout's python/ folder")
    ap.add_argument("--runs", type=int, default=2, help="runs per side (alternated)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3, help="ordinary calls after each growing-shape first call")
    ap.add_argument("--only", default="mlp,attention,block")
    a = ap.parse_args(argv)
    sides = {"after": os.path.join(HERE, "..", "python"), "before": os.path.abspath(a.baseline)}
    results: dict[str, list[dict]] = {"after": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.runs):
            for name in (("after", "before") if r % 2 == 0 else ("before", "after")):
                print(f"run {r + 1}: {name}", file=sys.stderr, flush=True)
                results[name].append(_run(sides[name], a, os.path.join(tmp, f"{name}{r}.json")))
    loads = [f"{res['load_before'][0]:.2f}-{res['load_after'][0]:.2f}" for k in ("after", "before") for res in results[k]]
    print(f"load average (before-after each run; after runs, then before runs): {', '.join(loads)}\n")
    print("| model | shape | ord. ms after | first / ord. after (CPU) | ord. ms before | first / ord. before (CPU) |")
    print("|---|---|---|---|---|---|")
    def table_row(res, model, n):
        return next(r for r in res["rows"] if r.get("n") == n and r["model"] == model)

    for row in results["after"][0]["rows"]:
        if "n" not in row:
            continue

        def cells(name):
            rs = [table_row(res, row["model"], row["n"]) for res in results[name]]
            ms = ", ".join(f"{r['ours_ms']:.3f}" for r in rs)
            x = ", ".join(f"{r['ours_first_x']:.2f} ({r['ours_first_cpu_x']:.2f})" for r in rs)
            return f"{ms} | {x}"
        print(f"| {row['model']} | {row['symbol']} = {row['n']} | {cells('after')} | {cells('before')} |")
    print("\n| model | sequence | side | first / ord. wall: median, max (at) | CPU: median, max | per shape (wall) |")
    print("|---|---|---|---|---|---|")
    for name in ("after", "before"):
        for res in results[name]:
            for row in res["rows"]:
                if "kind" not in row:
                    continue
                per = ", ".join(f"{n}: {r:.1f}" for n, r in zip(row["shapes"], row["ratios"]))
                print(f"| {row['model']} | {row['kind']} ({row['symbol']} = {row['shapes'][0]}..{row['shapes'][-1]}) "
                      f"| {name} | {row['ratio_median']:.2f}, {row['ratio_max']:.2f} ({row['worst']}) | "
                      f"{row['cpu_ratio_median']:.2f}, {row['cpu_ratio_max']:.2f} | {per} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
