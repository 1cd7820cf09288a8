"""`PASSES`: the one registry of relax passes, read by `relax-opt`, `relax_mlir.compile` and tests."""
from __future__ import annotations

from relax_mlir.transforms.infer_shapes import InferShapesPass, VerifyPass


def _all():
    passes = [InferShapesPass, VerifyPass]
    for modname in ("relax_mlir.transforms.cleanup", "relax_mlir.transforms.legalize",
                    "relax_mlir.transforms.lower_shapes", "relax_mlir.transforms.to_upstream",
                    "relax_mlir.transforms.canonicalize", "relax_mlir.transforms.fuse_ops",
                    "relax_mlir.transforms.dispatch_library", "relax_mlir.transforms.plan_memory",
                    "relax_mlir.backend.cpu", "relax_mlir.backend.gpu", "relax_mlir.backend.spirv"):
        try:
            mod = __import__(modname, fromlist=["PASSES"])
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue
            raise
        passes.extend(getattr(mod, "PASSES", getattr(mod, "CPU_PASSES", ())))
    return {p.name: p for p in passes}


PASSES = _all()
