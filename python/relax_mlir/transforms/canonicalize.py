"""`relax-canonicalize`: graph-level rewrite patterns, applied by upstream's greedy driver, then DCE.

The patterns are this file's (view and cast chains) and those each op class lists in its
`canonicalization_patterns` (ops/<family>.py: scalar-constant reshape/broadcast chains fold into
one splat constant, or into the 0-d constant that an elementwise consumer broadcasts itself).

Patterns are xDSL-shaped (`match_and_rewrite` returns True iff it rewrote); `add_patterns` inverts
the return for upstream's `RewritePatternSet.add`, whose callback returns a falsy value on success.
A value is replaced only by one of the identical type (func.return and the callers verify types),
and an "identity" needs fully known types: `["?", "?"]` to `["?", "?"]` may still move data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir
from mlir.rewrite import (GreedyRewriteConfig, GreedySimplifyRegionLevel, RewritePatternSet,
                          apply_patterns_and_fold_greedily)

from relax_mlir.dialect.spec import OPS, attr_dict, py_attr
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.passes import ModulePass
from relax_mlir.patterns import RewritePattern, add_patterns  # noqa: F401 (re-exported)
from relax_mlir.transforms.cleanup import DcePass
from relax_mlir.transforms.infer_shapes import graph_functions


# --- helpers -----------------------------------------------------------------------------------

def producer(v: ir.Value, name: str):
    """The op named `name` that defines `v`, or None (block argument or another op)."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != name:
        return None
    return owner


def known_tensor(t: ir.Type) -> TensorType | None:
    v = view(t)
    return v if isinstance(v, TensorType) and v.known else None


def is_identity(op) -> bool:
    """The op's single result has exactly the fully known type of its first operand."""
    a, r = op.operands[0].type, op.results[0].type
    return a == r and known_tensor(a) is not None


def permutation(op) -> list[int] | None:
    """permute_dims's axes, normalized (absent: reversed); None when the rank is unknown."""
    x = view(op.operands[0].type)
    if not isinstance(x, TensorType) or x.dims is None:
        return None
    rank = len(x.dims)
    attrs = attr_dict(op)
    if "axes" not in attrs:
        return list(range(rank))[::-1]
    axes = py_attr(attrs["axes"])
    if not isinstance(axes, list) or len(axes) != rank:
        return None
    return [a % rank for a in axes] if rank else []


def create(name: str, result: ir.Type, operands, attrs: dict, loc) -> ir.Operation:
    return ir.Operation.create(name, results=[result], operands=list(operands), attributes=attrs, loc=loc)


# --- patterns ----------------------------------------------------------------------------------

class FoldReshapeOfReshape(RewritePattern):
    """reshape(reshape(x, s1), s2) -> reshape(x, s2)."""

    root = "relax.reshape"

    def match_and_rewrite(self, op, rewriter) -> bool:
        inner = producer(op.operands[0], "relax.reshape")
        if inner is None:
            return False
        # Keep the outer op's dynamic-dim operands (present after relax-lower-shapes).
        operands = [inner.operands[0]] + list(op.operands)[1:]
        with rewriter.ip:
            new = create("relax.reshape", op.results[0].type, operands, attr_dict(op), op.location)
        rewriter.replace_op(op, new)
        return True


class DropIdentityReshape(RewritePattern):
    """reshape(x) whose result type is x's type -> x."""

    root = "relax.reshape"
    benefit = 2

    def match_and_rewrite(self, op, rewriter) -> bool:
        if not is_identity(op):
            return False
        rewriter.replace_op(op, [op.operands[0]])
        return True


class DropIdentityBroadcast(RewritePattern):
    """broadcast_to(x) whose result type is x's type -> x."""

    root = "relax.broadcast_to"

    def match_and_rewrite(self, op, rewriter) -> bool:
        if not is_identity(op):
            return False
        rewriter.replace_op(op, [op.operands[0]])
        return True


class DropIdentityPermute(RewritePattern):
    """permute_dims(x, [0, 1, ..]) of x's type -> x."""

    root = "relax.permute_dims"
    benefit = 2

    def match_and_rewrite(self, op, rewriter) -> bool:
        axes = permutation(op)
        if axes is None or axes != list(range(len(axes))) or op.operands[0].type != op.results[0].type:
            return False
        rewriter.replace_op(op, [op.operands[0]])
        return True


def _rows_then_matrix_swap(op, a1, a2) -> bool:
    """The pair ops/grouped.py's ContiguousOperandTranspose builds for a matmul operand: a1 keeps
    the innermost axis innermost (whole rows move), a2 only swaps the last two axes of a matmul's
    B (library dispatch folds it into the BLAS call). Composed, the transpose would write with a
    stride."""
    n = len(a1)
    return (n >= 3 and a1[-1] == n - 1 and a2 == [*range(n - 2), n - 1, n - 2]
            and all(u.owner.name == "relax.matmul" and u.operand_number == 1 for u in op.results[0].uses))


class FoldPermuteOfPermute(RewritePattern):
    """permute_dims(permute_dims(x, a1), a2) -> permute_dims(x, [a1[i] for i in a2])."""

    root = "relax.permute_dims"

    def match_and_rewrite(self, op, rewriter) -> bool:
        inner = producer(op.operands[0], "relax.permute_dims")
        if inner is None:
            return False
        a1, a2 = permutation(inner), permutation(op)
        if a1 is None or a2 is None or len(a1) != len(a2):
            return False
        if _rows_then_matrix_swap(op, a1, a2):
            return False
        axes = ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), a1[i]) for i in a2])
        with rewriter.ip:
            new = create("relax.permute_dims", op.results[0].type, [inner.operands[0]], {"axes": axes}, op.location)
        rewriter.replace_op(op, new)
        return True


class DropAstypeToSameDtype(RewritePattern):
    """astype(x, dtype of x) of x's type -> x."""

    root = "relax.astype"

    def match_and_rewrite(self, op, rewriter) -> bool:
        a, r = op.operands[0].type, op.results[0].type
        x = view(a)
        if a != r or not isinstance(x, TensorType):
            return False
        dtype = attr_dict(op).get("dtype")
        if dtype is not None and str(py_attr(dtype)) != x.dtype:
            return False
        rewriter.replace_op(op, [op.operands[0]])
        return True


CANONICALIZATION_PATTERNS = (FoldReshapeOfReshape, DropIdentityReshape, DropIdentityBroadcast,
                             DropIdentityPermute, FoldPermuteOfPermute, DropAstypeToSameDtype)


def op_patterns() -> list:
    """(root, pattern) for the patterns the op classes hold."""
    import relax_mlir.ops  # noqa: F401

    return [(name, p()) for name, spec in OPS.items() for p in spec.canonicalization_patterns]


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Fold view/cast chains and drop identity reshape/broadcast/permute/astype; then relax-dce."""

    name: ClassVar[str] = "relax-canonicalize"

    def run(self, module: ir.Operation) -> None:
        patterns = RewritePatternSet(module.context)
        add_patterns(patterns, [p() for p in CANONICALIZATION_PATTERNS] + op_patterns())
        frozen = patterns.freeze()
        config = GreedyRewriteConfig()
        config.enable_folding = False            # only these patterns; kernels stay untouched
        config.region_simplification_level = GreedySimplifyRegionLevel.DISABLED
        for f in graph_functions(module):
            try:
                apply_patterns_and_fold_greedily(f, frozen, config)
            except RuntimeError as e:
                # Ops a Python pattern creates reach the driver's worklist only in its next sweep,
                # so a slice sunk through a chain deeper than the sweep limit (relax.dynamic_slice's
                # SliceBeforeCompute) stops part way (seed 2430542: a slice of a complex expm1's
                # angle). Every rewrite leaves a valid program, so the partial result stands, as
                # upstream's canonicalizer keeps it without test-convergence.
                if "failed to converge" not in str(e):
                    raise
        DcePass().run(module)


PASSES = (CanonicalizePass,)
