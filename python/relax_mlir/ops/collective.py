"""Collectives of an SPMD (per-device) program: all_reduce, all_gather, reduce_scatter, all_to_all,
collective_permute, collective_broadcast.

They appear only in per-device functions imported from a sharded JAX program
(`relax_mlir.spmd`); each names its process groups (`groups`: the ranks of every group, flattened
row-major, `group_size` ranks each, as StableHLO's `replica_groups`). Shapes stay symbolic: an
all_gather multiplies its dim by the group size, a reduce_scatter divides it (the dim must be
provably divisible: `2*k` split 2 ways is `k`; `b` is refused, since jax itself exports sharded
dims as multiples). They have no kernel: `relax_mlir.spmd` cuts the function at each collective
and the host runs it through MPI (runtime/mpi.py), so legalizing one is an error that says so.
"""
from __future__ import annotations

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import TensorType
from relax_mlir.ops.common import fmt_dims, normalize_axis, require_rank
from relax_mlir.ops.kernel import LegalizeError
from relax_mlir.shape import Expr, const, floordiv

REDUCTIONS = ("sum", "prod", "max", "min", "and", "or")
COLLECTIVES = ("relax.all_reduce", "relax.all_gather", "relax.reduce_scatter", "relax.all_to_all",
               "relax.collective_permute", "relax.collective_broadcast")


def group_size(op: OpInfo) -> int:
    n = op.attr("group_size")
    groups = op.attr("groups")
    if not isinstance(n, int) or n < 1:
        raise DeduceError("requires a positive 'group_size'")
    if not isinstance(groups, list) or not groups or len(groups) % n or \
            not all(isinstance(g, int) and g >= 0 for g in groups):
        raise DeduceError(f"'groups' must list the ranks of groups of {n} (flattened), got {groups}")
    if len(set(groups)) != len(groups):
        raise DeduceError(f"'groups' names a rank twice: {groups}")
    return n


def divide_exactly(d: Expr, n: int, what: str) -> Expr:
    """d / n when n provably divides d (every coefficient of the polynomial is a multiple of n)."""
    if d is None:
        raise DeduceError(f"{what}: the dim is unknown")
    if all(c % n == 0 for _, c in d.terms):
        return floordiv(d, const(n))
    raise DeduceError(f"{what}: dim {d} is not provably divisible by the group size {n} "
                      "(export a sharded symbolic dim as a multiple, for example 2*k)")



class _Collective(OpSpec):
    x = operand(TENSOR)
    result = result_(TENSOR)
    groups = attr("array", optional=False, doc="the ranks of every group, flattened row-major")
    group_size = attr("int", optional=False, doc="ranks per group")

    @classmethod
    def legalize(cls, op: OpInfo):
        raise LegalizeError(f"'{cls.name}' has no kernel: an SPMD program runs its collectives on the host "
                            "through MPI (compile it with relax_mlir.spmd.compile_spmd)")


@relax_op
class AllReduceOp(_Collective):
    """Every rank of a group gets the reduction over the group of its operand (same shape).
    Attributes: groups, group_size, reduce (sum, prod, max, min, and, or)."""

    name = "relax.all_reduce"
    reduce = attr("str", optional=False, doc="sum | prod | max | min | and | or")

    @classmethod
    def deduce(cls, op: OpInfo):
        group_size(op)
        if op.attr("reduce") not in REDUCTIONS:
            raise DeduceError(f"unknown reduction '{op.attr('reduce')}' (known: {', '.join(REDUCTIONS)})")
        x = op.tensor(0)
        if op.attr("reduce") in ("and", "or") and x.dtype != "i1":
            raise DeduceError(f"reduction '{op.attr('reduce')}' needs i1 operands, got {x.dtype}")
        return [TensorType(require_rank(x, "operand"), x.dtype)]


@relax_op
class AllGatherOp(_Collective):
    """The group's operands concatenated along `dim` in group order. Attributes: groups, group_size, dim."""

    name = "relax.all_gather"
    dim = attr("int", optional=False, doc="the dim the operands are concatenated along")

    @classmethod
    def deduce(cls, op: OpInfo):
        n = group_size(op)
        x = op.tensor(0)
        d = list(require_rank(x, "operand"))
        a = normalize_axis(op.attr("dim"), len(d), "dim")
        if d[a] is None:
            raise DeduceError("the gathered dim is unknown")
        d[a] = d[a] * n
        return [TensorType(tuple(d), x.dtype)]


@relax_op
class ReduceScatterOp(_Collective):
    """The group's reduction split along `dim`: rank i of the group keeps block i.
    Attributes: groups, group_size, dim, reduce."""

    name = "relax.reduce_scatter"
    dim = attr("int", optional=False, doc="the dim the reduction is split along")
    reduce = attr("str", optional=False, doc="sum | prod | max | min | and | or")

    @classmethod
    def deduce(cls, op: OpInfo):
        n = group_size(op)
        if op.attr("reduce") not in REDUCTIONS:
            raise DeduceError(f"unknown reduction '{op.attr('reduce')}'")
        x = op.tensor(0)
        d = list(require_rank(x, "operand"))
        a = normalize_axis(op.attr("dim"), len(d), "dim")
        d[a] = divide_exactly(d[a], n, f"operand {fmt_dims(x.dims)}")
        return [TensorType(tuple(d), x.dtype)]


@relax_op
class AllToAllOp(_Collective):
    """Split along `split_dim` into group_size blocks, block j to rank j, received blocks
    concatenated along `concat_dim` in rank order. Attributes: groups, group_size, split_dim, concat_dim."""

    name = "relax.all_to_all"
    split_dim = attr("int", optional=False, doc="the dim split into blocks")
    concat_dim = attr("int", optional=False, doc="the dim the received blocks are concatenated along")

    @classmethod
    def deduce(cls, op: OpInfo):
        n = group_size(op)
        x = op.tensor(0)
        d = list(require_rank(x, "operand"))
        s = normalize_axis(op.attr("split_dim"), len(d), "split_dim")
        c = normalize_axis(op.attr("concat_dim"), len(d), "concat_dim")
        d[s] = divide_exactly(d[s], n, f"operand {fmt_dims(x.dims)}")
        if d[c] is None:
            raise DeduceError("the concatenated dim is unknown")
        d[c] = d[c] * n
        return [TensorType(tuple(d), x.dtype)]


@relax_op
class CollectivePermuteOp(_Collective):
    """Rank `pairs[2i]` sends its operand to rank `pairs[2i+1]`; a rank that receives nothing gets
    zeros. Attributes: pairs (flattened source, target pairs), groups (all ranks), group_size."""

    name = "relax.collective_permute"
    pairs = attr("array", optional=False, doc="source, target, source, target, ...")

    @classmethod
    def deduce(cls, op: OpInfo):
        group_size(op)
        p = op.attr("pairs")
        if not isinstance(p, list) or len(p) % 2 or not all(isinstance(v, int) and v >= 0 for v in p):
            raise DeduceError(f"'pairs' must be flattened (source, target) rank pairs, got {p}")
        if len(set(p[0::2])) != len(p) // 2 or len(set(p[1::2])) != len(p) // 2:
            raise DeduceError(f"'pairs' sends from or to a rank twice: {p}")
        x = op.tensor(0)
        return [TensorType(require_rank(x, "operand"), x.dtype)]


@relax_op
class CollectiveBroadcastOp(_Collective):
    """Every rank of a group gets the operand of the group's first rank."""

    name = "relax.collective_broadcast"

    @classmethod
    def deduce(cls, op: OpInfo):
        group_size(op)
        x = op.tensor(0)
        return [TensorType(require_rank(x, "operand"), x.dtype)]
