"""Neural-network ops: softmax, log_softmax, layer_norm, rms_norm."""
from __future__ import annotations

from relax_mlir.dialect.spec import (DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_,
                                     short_name)
from relax_mlir.dialect.types import TensorType
from relax_mlir.ops.common import dims_equal, normalize_axes, normalize_axis, require_float, require_rank, symbols_note
from relax_mlir.ops.kernel import Kernel, Legalized, affine_map, identity_map
from relax_mlir.ops.reduce import count_as, reduce_into


# --- kernel helpers ----------------------------------------------------------------------------

def _reduced(k: Kernel, x: TensorType, axes: list[int]) -> tuple[str, TensorType]:
    """An empty tensor of x's shape without `axes`."""
    t = TensorType(tuple(d for i, d in enumerate(x.dims) if i not in axes), x.dtype)
    dyn = [k.dim(k.inp(0), x, i) for i, d in enumerate(x.dims) if i not in axes and not (d is not None and d.is_const)]
    return k.empty(t, dyn=dyn), t


def _red_map(rank: int, axes: list[int]) -> str:
    return affine_map(rank, [f"d{i}" for i in range(rank) if i not in axes])


def _eps(op: OpInfo, dtype: str) -> str:
    return f"{float(op.attr('epsilon', 1e-5)):.9e}"


@relax_op
class SoftmaxOp(OpSpec):
    """exp(x - max) / sum(exp(x - max)) along an axis. Attribute: axis (int, default -1)."""

    name = "relax.softmax"
    x = operand(TENSOR)
    result = result_(TENSOR)
    axis = attr("int", default=-1)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        require_float(x, "operand")
        normalize_axis(op.attr("axis", -1), len(require_rank(x, "operand")))
        return [x]

    @classmethod
    def output_body(cls, t: str) -> list[str]:
        """The last kernel's scalar body: %a0 = x, %a1 = max, %a2 = sum(exp(x - max)) -> %v."""
        return [f"%d = arith.subf %a0, %a1 : {t}", f"%e = math.exp %d : {t}", f"%v = arith.divf %e, %a2 : {t}"]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        rank = len(x.dims)
        axis = normalize_axis(op.attr("axis", -1), rank)
        k = Kernel(short_name(cls.name), [x], [r])
        t = x.dtype
        e1, rt = _reduced(k, x, [axis])
        mx = reduce_into(k, "max", k.inp(0), x, [axis], False, e1, rt)
        e2, _ = _reduced(k, x, [axis])
        sm = reduce_into(k, "sum", k.inp(0), x, [axis], False, e2, rt,
                         prologue=[f"%d = arith.subf %a0, %a1 : {t}", f"%x = math.exp %d : {t}"],
                         extra_ins=[(mx, rt, _red_map(rank, [axis]))])
        g = k.generic([(k.inp(0), x, identity_map(rank)), (mx, rt, _red_map(rank, [axis])),
                       (sm, rt, _red_map(rank, [axis]))],
                      [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, cls.output_body(t), ["%v"])
        return Legalized(k, g)


@relax_op
class LogSoftmaxOp(SoftmaxOp):
    """x - max - log(sum(exp(x - max))) along an axis. Attribute: axis (int, default -1)."""

    name = "relax.log_softmax"

    @classmethod
    def output_body(cls, t: str) -> list[str]:
        return [f"%d = arith.subf %a0, %a1 : {t}", f"%l = math.log %a2 : {t}", f"%v = arith.subf %d, %l : {t}"]


class _NormOp(OpSpec):
    """Base of the normalizations over `axes`; `normalize` builds each op's statistics and scalar body."""

    x = operand(TENSOR)
    result = result_(TENSOR)
    axes = attr("array", doc="normalized axes (default [-1])")
    epsilon = attr("float", doc="added to the variance (default 1e-5)")

    @classmethod
    def norm_axes(cls, op: OpInfo, rank: int) -> list[int]:
        return sorted(normalize_axes(op.attr("axes", [-1]), rank))

    @classmethod
    def check_param(cls, op: OpInfo, x: TensorType, i: int, what: str):
        p = op.tensor(i)
        if p.dtype != x.dtype:
            raise DeduceError(f"{what} element type {p.dtype} differs from the operand's {x.dtype}")
        axes = cls.norm_axes(op, len(x.dims))
        pd = require_rank(p, what)
        want = tuple(x.dims[a] for a in axes)
        if len(pd) != len(want) or any(
                a is not None and b is not None and not dims_equal(a, b, op.facts) for a, b in zip(pd, want)):
            raise DeduceError(f"{what} has shape {list(map(str, pd))}, expected the normalized dims "
                              f"{list(map(str, want))}" + symbols_note(*pd, *want))

    @classmethod
    def normalize(cls, k: Kernel, op: OpInfo, x: TensorType, axes: list[int], params: list[TensorType],
                  cnt: str) -> tuple[list[str], list]:
        """The final generic's scalar body (assigning %y) and its inputs."""
        raise NotImplementedError

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        rank = len(x.dims)
        axes = cls.norm_axes(op, rank)
        params = [op.tensor(i) for i in range(1, len(op.operand_types))]
        k = Kernel(short_name(cls.name), [x] + params, [r])
        cnt = count_as(k, k.inp(0), x, axes, x.dtype)
        body, ins = cls.normalize(k, op, x, axes, params, cnt)
        g = k.generic(ins, [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, body, ["%y"])
        return Legalized(k, g)


@relax_op
class LayerNormOp(_NormOp):
    """(x - mean) / sqrt(var + eps) * gamma + beta over axes. Attributes: axes, epsilon."""

    name = "relax.layer_norm"
    gamma = operand(TENSOR)
    beta = operand(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        require_float(x, "operand")
        require_rank(x, "operand")
        cls.check_param(op, x, 1, "gamma")
        cls.check_param(op, x, 2, "beta")
        return [x]

    @classmethod
    def normalize(cls, k, op, x, axes, params, cnt):
        rank, t = len(x.dims), x.dtype
        pmap, rmap = affine_map(rank, [f"d{a}" for a in axes]), _red_map(rank, axes)
        e1, rt = _reduced(k, x, axes)
        s = reduce_into(k, "sum", k.inp(0), x, axes, False, e1, rt)
        e2, _ = _reduced(k, x, axes)
        v = reduce_into(k, "sum", k.inp(0), x, axes, False, e2, rt,
                        prologue=[f"%mu = arith.divf %a1, {cnt} : {t}", f"%d = arith.subf %a0, %mu : {t}",
                                  f"%x = arith.mulf %d, %d : {t}"], extra_ins=[(s, rt, rmap)])
        body = [f"%eps = arith.constant {_eps(op, t)} : {t}", f"%mu = arith.divf %a1, {cnt} : {t}",
                f"%var = arith.divf %a2, {cnt} : {t}", f"%ve = arith.addf %var, %eps : {t}",
                f"%rs = math.rsqrt %ve : {t}", f"%d = arith.subf %a0, %mu : {t}", f"%n = arith.mulf %d, %rs : {t}",
                f"%g = arith.mulf %n, %a3 : {t}", f"%y = arith.addf %g, %a4 : {t}"]
        ins = [(k.inp(0), x, identity_map(rank)), (s, rt, rmap), (v, rt, rmap),
               (k.inp(1), params[0], pmap), (k.inp(2), params[1], pmap)]
        return body, ins


@relax_op
class RmsNormOp(_NormOp):
    """x / sqrt(mean(x*x) + eps) * weight over axes. Attributes: axes, epsilon."""

    name = "relax.rms_norm"
    weight = operand(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        require_float(x, "operand")
        require_rank(x, "operand")
        cls.check_param(op, x, 1, "weight")
        return [x]

    @classmethod
    def normalize(cls, k, op, x, axes, params, cnt):
        rank, t = len(x.dims), x.dtype
        pmap, rmap = affine_map(rank, [f"d{a}" for a in axes]), _red_map(rank, axes)
        e1, rt = _reduced(k, x, axes)
        ss = reduce_into(k, "sum", k.inp(0), x, axes, False, e1, rt, prologue=[f"%x = arith.mulf %a0, %a0 : {t}"])
        body = [f"%eps = arith.constant {_eps(op, t)} : {t}", f"%ms = arith.divf %a1, {cnt} : {t}",
                f"%ve = arith.addf %ms, %eps : {t}", f"%rs = math.rsqrt %ve : {t}", f"%n = arith.mulf %a0, %rs : {t}",
                f"%y = arith.mulf %n, %a2 : {t}"]
        ins = [(k.inp(0), x, identity_map(rank)), (ss, rt, rmap), (k.inp(1), params[0], pmap)]
        return body, ins
