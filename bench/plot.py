"""Plot bench/results/{mlp,transformer,decoder}.json into bench/results/latency.png: one column per
model, latency vs shape on log-log axes (relax-mlir fused, unfused, jax.jit) on top, ours/jax
below. Models whose JSON is missing are skipped.

Run: .venv/bin/python bench/plot.py   (needs the bench extra: pip install -e '.[bench]')
"""
from __future__ import annotations

import json
import os
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
MODELS = ("mlp", "transformer", "decoder")
LABELS = {"n": "batch", "L": "KV-cache length L"}
DEFAULT_LABEL = {"mlp": "batch", "transformer": "sequence length"}


def main() -> int:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    except ImportError:
        print("bench/plot.py needs matplotlib: .venv/bin/python -m pip install -e '.[bench]' "
              "(or `make bench`)", file=sys.stderr)
        return 1
    data = []
    for m in MODELS:
        path = os.path.join(RESULTS, f"{m}.json")
        if os.path.exists(path):
            with open(path) as f:
                data.append(json.load(f))
        else:
            print(f"skipping {m}: {path} not found (run bench/{m}.py)", file=sys.stderr)
    if not data:
        print("no results to plot", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(2, len(data), figsize=(4.6 * len(data), 6.4), squeeze=False,
                             gridspec_kw={"height_ratios": [2.2, 1]}, sharex="col")
    for col, d in enumerate(data):
        xs = [r["n"] for r in d["rows"]]
        top, bot = axes[0][col], axes[1][col]
        c = d["compile"]
        top.plot(xs, [r["ours_ms"] for r in d["rows"]], "o-", label="relax-mlir (1 compile)")
        top.plot(xs, [r["ours_nofuse_ms"] for r in d["rows"]], "o:", alpha=0.6, label="relax-mlir, unfused")
        top.plot(xs, [r["jax_ms"] for r in d["rows"]], "s-", label=f"jax.jit ({c['jax_jit_compiles']} compiles)")
        top.set_xscale("log")
        top.set_yscale("log")
        top.set_title(f"{d['model']} (median of {d['reps']})")
        top.set_ylabel("latency per call (ms)")
        top.grid(True, which="both", alpha=0.3)
        top.legend(fontsize=8)
        bot.plot(xs, [r["ratio_ours_over_jax"] for r in d["rows"]], "o-", color="C3")
        bot.axhline(1.0, color="gray", lw=1, ls="--")
        bot.set_xscale("log")
        bot.set_yscale("log")
        bot.set_ylabel("ours / jax.jit")
        bot.set_xlabel(DEFAULT_LABEL.get(d["model"]) or LABELS.get(d.get("shape_name", "n"), "shape"))
        bot.grid(True, which="both", alpha=0.3)
        bot.set_xticks(xs)
        for ax in (top, bot):  # plain numbers, no crowded minor labels on short log ranges
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            lo, hi = ax.get_ylim()
            subs = (1.0, 2.0, 5.0) if hi / lo > 3 else (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
    host = data[0].get("host", {})
    fig.suptitle(f"relax-mlir vs jax.jit on CPU ({host.get('machine', '?')}, {host.get('cpus', '?')} cpus, "
                 f"jax {host.get('jax', '?')}); below 1 = relax-mlir faster", fontsize=10)
    fig.tight_layout()
    out = os.path.join(RESULTS, "latency.png")
    fig.savefig(out, dpi=120)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
