"""The browser side of target="webgpu": `relax_runtime.js` (an ES module, no build step) runs an
exported webgpu artifact on WebGPU; `serve(dir)` serves a directory on localhost (WebGPU needs a
secure context: localhost or https); `find_browser()` is Debian's chromium-headless-shell that
the tests drive with Playwright (`--enable-unsafe-webgpu`).

`python -m relax_mlir.runtime.web DIR [PORT]` serves DIR (with the runtime copied beside it)."""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading

__all__ = ["RUNTIME", "BROWSER_ARGS", "copy_runtime", "find_browser", "serve"]

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relax_runtime.js")
BROWSER_ARGS = ["--enable-unsafe-webgpu"]


def find_browser() -> str | None:
    """The chromium-headless-shell binary (apt package of that name), or None."""
    return shutil.which("chromium-headless-shell")


def copy_runtime(directory: str) -> str:
    """Copy relax_runtime.js into `directory`; its path there."""
    os.makedirs(directory, exist_ok=True)
    dst = os.path.join(directory, "relax_runtime.js")
    shutil.copyfile(RUNTIME, dst)
    return dst


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
