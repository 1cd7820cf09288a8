"""The browser side of target="webgpu": `relax_runtime.js` (an ES module, no build step) runs an
exported webgpu artifact on WebGPU; `serve(dir)` serves a directory on localhost (WebGPU needs a
secure context: localhost or https); `find_browser()` is Debian's chromium-headless-shell that
the tests drive with Playwright (`--enable-unsafe-webgpu`).

`export_llm(generator, dir)` writes what `relax_llm.js` (the greedy generation loop in the
page, KV cache on the GPU) loads: a `relax_mlir.llm.Generator` compiled for target="webgpu" as
its prefill and decode artifacts, its weights and cache layout.

`python -m relax_mlir.runtime.web DIR [PORT]` serves DIR (with the runtime copied beside it)."""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading

__all__ = ["RUNTIME", "LLM_RUNTIME", "BROWSER_ARGS", "copy_runtime", "export_llm", "find_browser", "serve"]

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relax_runtime.js")
LLM_RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relax_llm.js")
BROWSER_ARGS = ["--enable-unsafe-webgpu"]


def find_browser() -> str | None:
    """The chromium-headless-shell binary (apt package of that name), or None."""
    return shutil.which("chromium-headless-shell")


def copy_runtime(directory: str) -> str:
    """Copy relax_runtime.js (and relax_llm.js, which imports it) into `directory`; the path of
    relax_runtime.js there."""
    os.makedirs(directory, exist_ok=True)
    dst = os.path.join(directory, "relax_runtime.js")
    shutil.copyfile(RUNTIME, dst)
    shutil.copyfile(LLM_RUNTIME, os.path.join(directory, "relax_llm.js"))
    return dst


def export_llm(gen, directory: str) -> None:
    """Write `gen` (a `relax_mlir.llm.Generator` for target="webgpu") into `directory` for
    relax_llm.js: prefill/ and decode/ (the two artifacts), weights.bin (every weight, in the
    functions' parameter order, each at a 4-byte-aligned offset) and llm.json (the cache layout,
    vocabulary, max_context, cache_chunk, pad token and each weight's dtype, shape and offset)."""
    import json

    import numpy as np

    if gen.target != "webgpu":
        raise ValueError(f"export_llm needs a Generator compiled for target='webgpu', not {gen.target!r}")
    lm = gen.lm
    names = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32"}
    for i, w in enumerate(lm.weights):  # before anything is written
        if np.dtype(w.dtype) not in names:
            raise ValueError(f"weight #{i} is {w.dtype}: the browser runtime takes f32 and i32 weights")
    os.makedirs(directory, exist_ok=True)
    gen.prefill_exe.export(os.path.join(directory, "prefill"))
    gen.decode_exe.export(os.path.join(directory, "decode"))
    table, offset = [], 0
    with open(os.path.join(directory, "weights.bin"), "wb") as f:
        for w in lm.weights:
            w = np.ascontiguousarray(w)
            table.append({"dtype": names[w.dtype], "shape": list(w.shape), "offset": offset})
            f.write(w.tobytes())
            offset += w.nbytes
            if offset % 4:
                f.write(b"\0" * (4 - offset % 4))
                offset += 4 - offset % 4
    meta = {"format": "relax-mlir-llm-1", "name": lm.name, "prefill_entry": gen.prefill_exe.main, "decode_entry": gen.decode_exe.main,
            "layers": lm.layers,
            "kv_heads": lm.kv_heads, "head_dim": lm.head_dim, "vocab": lm.vocab, "max_context": gen.max_context,
            "cache_chunk": gen.cache_chunk, "pad_token_id": gen.pad_token_id, "weights_file": "weights.bin",
            "weights": table}
    with open(os.path.join(directory, "llm.json"), "w") as f:
        json.dump(meta, f)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript",
                      ".mjs": "text/javascript", ".wgsl": "text/plain", ".json": "application/json"}

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory: str, port: int = 0):
    """Serve `directory` on http://localhost:PORT/ in a thread; yields the base URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(_Quiet, directory=directory))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://localhost:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


def main(argv: list[str] | None = None) -> int:
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or len(args) > 2:
        print("usage: python -m relax_mlir.runtime.web DIR [PORT]", file=sys.stderr)
        return 2
    copy_runtime(args[0])
    with serve(args[0], int(args[1]) if len(args) > 1 else 8000) as url:
        print(f"serving {args[0]} at {url} (Ctrl-C to stop)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0
