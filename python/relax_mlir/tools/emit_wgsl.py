"""`python -m relax_mlir.tools.emit_wgsl FILE.mlir`: a relax module -> the WGSL of each of its
kernels (what compile(..., target="webgpu") ships, backend/wgsl.py), each after a
`// gpu.module @name` line. A tool (the top layer): it drives the whole pipeline."""
from __future__ import annotations

import sys

import relax_mlir
from relax_mlir.backend import spirv
from relax_mlir.backend.wgsl import emit_module
from relax_mlir.core.diagnostics import CompileError
from relax_mlir.targets import get_target
from relax_mlir.targets.gpu import module_op


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m relax_mlir.tools.emit_wgsl FILE.mlir", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            text = f.read()
        m = relax_mlir.run_passes(relax_mlir.parse(text, source_name=args[0]), get_target("webgpu").pipeline(True))
        op, ctx = module_op(m)
        with ctx:
            spirv.lower(op, spirv.SPIRVOptions(), until="flatten")
            kernels = emit_module(op)
    except (CompileError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, k in kernels.items():
        print(f"// gpu.module @{name}")
        print(k.wgsl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
