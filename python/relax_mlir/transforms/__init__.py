"""`PASSES`: the graph-level relax passes (one a file), by CLI name. The targets add their backend
stage passes and the named pipelines (`relax_mlir.targets.registry()`), which `relax-opt` and
`relax_mlir.compile` read."""
from __future__ import annotations

from relax_mlir.transforms import (canonicalize, cleanup, conv_to_matmul, dispatch_library, fuse_attention, fuse_ops, legalize,
                                   lower_shapes, multiversion, plan_memory, to_upstream)
from relax_mlir.transforms.infer_shapes import InferShapesPass, VerifyPass

PASSES = {p.name: p for p in (InferShapesPass, VerifyPass)}
PASSES.update({p.name: p for m in (cleanup, canonicalize, conv_to_matmul, fuse_attention, dispatch_library, multiversion, legalize, fuse_ops, plan_memory,
                                   lower_shapes, to_upstream)
               for p in m.PASSES})
