"""Where eigenvectors and singular vectors may go: uses in which their signs cancel.

An eigenvector (a singular vector pair u_i, v_i) is defined up to its sign, and which sign a
decomposition returns is its algorithm's choice: LAPACK's syevd / gesdd (what jax.jit runs on the
CPU) and relax-mlir's Jacobi kernels (ops/linear_algebra.py) choose differently. A program whose
result depends on those signs has no answer to match, so it is refused; most programs that use the
vectors do not depend on them: V diag(f(w)) V^T (a matrix function through eigh), U diag(1/s) V^T
(jnp.linalg.pinv), V diag(1/s) U^T b (jnp.linalg.lstsq), U diag(s) V^T (a reconstruction).

The check follows the vectors through the jax program as it is imported. A value derived from the
vectors carries `Signs`: which decomposition, and the role of each of its axes: a batch axis of
the decomposition ("b", k), the vector index ("i", whose sign s_i the value is multiplied by), or
none. Each op keeps the factor s_i (a transpose, a broadcast, a product or quotient with a value
that carries no signs, a sum over other axes, a product summing the vector index against an axis
of a matrix that is diagonal over two axes: D[a, a] v[r, a] keeps s_a on D's other axis, as in
jax's gradient of eigvalsh and of the singular values, V diag(g) V^T, whose diagonal is a scatter
at indices [i, i], `Val.diag`), cancels it (a dot_general contracting the two vector indices with
the batch axes paired: also independent of the basis chosen within an eigenspace of repeated
values), or depends on it: every other use's
results are not computed (relax_v.unavailable), and refused, at its source line, where they are
used. A product of the vectors with the vectors that keeps a vector index of each (V^T dA V in
jax's forward-mode derivative of eigh) carries two vector axes, s_a s_b M[a, b]; its diagonal
M[a, a] (a gather at indices [i, i]) carries no signs, and a product contracting one of its
vector axes with the vectors' (V (F * V^T dA V)) keeps the other. The check is of signs: V diag(d) V^T with weights d that differ within an eigenspace of
repeated eigenvalues depends on the basis, in jax as here.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from relax_mlir.core.diagnostics import CompileError
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.frontend.stablehlo.common import _ints, _res


@dataclass(frozen=True)
class Signs:
    """Values multiplied by the signs of decomposition `source`: `roles[axis]` is ("b", k) for its
    k-th batch axis, "i" for the vector index, None for an axis the signs do not vary along."""

    source: int
    roles: tuple
    what: str  # "the eigenvectors of jnp.linalg.eigh"
    where: str  # the decomposition's source position


WHY = ("Each vector's sign is the decomposition algorithm's choice (LAPACK's and relax-mlir's differ), so "
       "relax-mlir lets the vectors reach only uses where the signs cancel: V diag(f(w)) V^T, U diag(s) V^T, "
       "jnp.linalg.pinv, jnp.linalg.lstsq; or use the values alone (jnp.linalg.eigvalsh, svd(compute_uv=False))")


class SignsError(CompileError):
    """Vectors are returned, or reach a use where their signs matter."""


class Refused(Exception):
    """An op whose result would depend on the vectors' signs: its results are not computed
    (relax_v.unavailable, refused with `message` where they are used)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _tagged(s) -> bool:
    return s is not None and any(r is not None for r in s.roles)


def _with(s: Signs, roles) -> Signs | None:
    roles = tuple(roles)
    return Signs(s.source, roles, s.what, s.where) if any(r is not None for r in roles) else None


def splat_through(value):
    """The value of a StableHLO value that is one constant everywhere (through broadcasts,
    converts, reshapes), else None."""
    from jaxlib.mlir import ir as jir

    for _ in range(8):
        owner = value.owner
        if not isinstance(owner, jir.Operation) and not hasattr(owner, "name"):
            return None
        name = owner.name
        if name in ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim", "stablehlo.convert",
                    "stablehlo.reshape", "stablehlo.dynamic_reshape"):
            value = owner.operands[0]
            continue
        if name != "stablehlo.constant":
            return None
        attr = owner.attributes["value"]
        if not isinstance(attr, jir.DenseElementsAttr) or not attr.is_splat:
            return None
        x = attr.get_splat_value()
        try:
            return jir.FloatAttr(x).value
        except ValueError:
            try:
                return jir.IntegerAttr(x).value
            except ValueError:
                return None
    return None


def _splat_zero_or_nan(value) -> bool:
    """Whether a StableHLO value is a constant 0 or NaN everywhere: the other branch of jax's
    select(info == 0, vectors, NaN)."""
    v = splat_through(value)
    return v is not None and (v == 0 or v != v)


def propagate(im, op, ins) -> list:
    """The Signs of each result of StableHLO `op` whose operands `ins` carry some; `Refused` where
    the op depends on them."""
    tags = [getattr(v, "signs", None) for v in ins]
    name = op.name
    srcs = {t.source for t in tags if _tagged(t)}
    first = next(t for t in tags if _tagged(t))

    def refuse(why: str = ""):
        raise Refused(
            f"{first.what} (computed at {first.where}) reach '{name}' here, which depends on "
            f"their signs{': ' + why if why else ''}. {WHY}")

    if len(srcs) > 1:
        refuse("it combines the vectors of two decompositions")
    n_out = len(op.results)

    def same(a, b) -> bool:
        return _tagged(a) and _tagged(b) and a.roles == b.roles

    if name in ("stablehlo.transpose",):
        perm = _ints(op.attributes["permutation"])
        return [_with(first, [first.roles[p] for p in perm])]
    if name in ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim"):
        if not _tagged(tags[0]):
            refuse()
        bdims = _ints(op.attributes["broadcast_dimensions"])
        out_dims, _ = _res(op)
        roles = [None] * len(out_dims)
        for i, d in enumerate(bdims):
            r = first.roles[i]
            src = ins[0].dims[i]
            if r is not None and src is not None and src.is_const and src.value == 1 and \
                    not (out_dims[d] is not None and out_dims[d].is_const and out_dims[d].value == 1):
                refuse("it repeats one vector along the vector index")
            roles[d] = r
        return [_with(first, roles)]
    if name in ("stablehlo.reshape", "stablehlo.dynamic_reshape"):
        out_dims, _ = _res(op)
        src = [(d, r) for d, r in zip(ins[0].dims, first.roles)
               if r is not None or not (d is not None and d.is_const and d.value == 1)]
        dst = [i for i, d in enumerate(out_dims) if not (d is not None and d.is_const and d.value == 1)]
        if len(src) != len(dst) or any(d is None or out_dims[j] is None or d != out_dims[j]
                                       for (d, _), j in zip(src, dst)):
            refuse("it regroups the vector axes")
        roles = [None] * len(out_dims)
        for (_, r), j in zip(src, dst):
            roles[j] = r
        return [_with(first, roles)]
    if name == "stablehlo.convert":
        _, dt = _res(op)
        if not dt.startswith(("f", "bf")):
            refuse()
        return [first]
    if name == "stablehlo.negate":
        return [first]
    if name in ("stablehlo.multiply", "stablehlo.divide"):
        # x * (s y) = s (x y), x / (s y) = s (x / y). A product of two such values elementwise
        # (v * v, abs(v)) is refused too: where eigenvalues repeat, the vectors are any basis of
        # their eigenspace, and only sums over the vector index are independent of that choice.
        if _tagged(tags[0]) and _tagged(tags[1]):
            refuse("it multiplies the vectors elementwise (independent of their signs, but not of "
                   "the basis chosen where values repeat)")
        return [first]
    if name in ("stablehlo.add", "stablehlo.subtract"):
        if same(tags[0], tags[1]):
            return [first]
        refuse()
    if name == "stablehlo.select":
        if _tagged(tags[0]):
            refuse()
        a, b = tags[1], tags[2]
        if same(a, b):
            return [a]
        vec = [k for k, r in enumerate(a.roles) if r == "i"] if _tagged(a) else []
        if len(vec) == 2 and not _tagged(b) and getattr(ins[0], "value", None) is not None \
                and sorted(_diagonal_mask(ins[0].value) or ()) == vec \
                and (_splat_zero_or_nan(op.operands[2]) or _relax_splat(getattr(ins[2], "value", None)) == 0):
            return [None]  # a two-index value's diagonal, zeros elsewhere (jnp.trace): s_a s_a = 1
        if _tagged(a) and not _tagged(b) and _splat_zero_or_nan(op.operands[2]):
            return [a]
        if _tagged(b) and not _tagged(a) and _splat_zero_or_nan(op.operands[1]):
            return [b]
        refuse()
    if name == "stablehlo.slice":
        start, limit, stride = (_ints(op.attributes[k]) for k in ("start_indices", "limit_indices", "strides"))
        for ax, r in enumerate(first.roles):
            d = ins[0].dims[ax]
            if r is not None and not (start[ax] == 0 and stride[ax] == 1 and d is not None and d.is_const
                                      and limit[ax] == d.value):
                refuse("it takes part of a vector axis")
        return [first]
    if name == "stablehlo.reduce" and len(ins) == 2 and not _tagged(tags[1]):
        body = list(op.regions[0].blocks[0].operations)
        if len(body) != 2 or body[0].name != "stablehlo.add" or not _splat_zero_or_nan(op.operands[1]):
            refuse("a reduction other than a sum")
        axes = set(_ints(op.attributes["dimensions"]))
        if any(first.roles[a] is not None for a in axes):
            refuse("it sums over a vector axis")
        return [_with(first, [r for a, r in enumerate(first.roles) if a not in axes])]
    if name in ("stablehlo.gather", "stablehlo.dynamic_gather") and _tagged(tags[0]) \
            and not any(_tagged(t) for t in tags[1:]):
        return [_gather_diagonal(op, first, ins, refuse)]
    if name == "stablehlo.dot_general":
        diags = [None if _tagged(t) else (getattr(v, "diag", None) or relax_diagonal(getattr(v, "value", None)))
                 for v, t in zip(ins, tags)]
        return [_dot_general(op, tags, refuse, diags)]
    refuse()
    return [None] * n_out


def _gather_diagonal(op, tag, ins, refuse):
    """The diagonal M[a, a] of a value carrying two vector axes (s_a s_b M[a, b]; jnp.diagonal of
    V^T dA V in jax's derivative of eigh's values): a gather (or dynamic_gather) collapsing exactly
    those two axes at indices [i, i] (both columns computed alike) is free of their signs,
    s_a s_a = 1, whatever it takes of the other axes."""
    from jaxlib.mlir.dialects import stablehlo as hlo

    dn = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
    vec = [a for a, r in enumerate(tag.roles) if r == "i"]
    if len(vec) != 2 or sorted(dn.start_index_map) != vec or sorted(dn.collapsed_slice_dims) != vec \
            or list(dn.operand_batching_dims) or not index_columns_alike(ins[1], int(dn.index_vector_dim)):
        refuse("it gathers from a vector axis")
    return None


def _dot_general(op, tags, refuse, diags=(None, None)):
    from jaxlib.mlir.dialects import stablehlo as hlo

    dn = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
    lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    ranks = [len(o.type.shape) for o in op.operands]
    lfree = [a for a in range(ranks[0]) if a not in lb and a not in lc]
    rfree = [a for a in range(ranks[1]) if a not in rb and a not in rc]
    lt, rt = tags
    if _tagged(lt) and _tagged(rt):
        # contracted vector indices cancel (s_a s_a); each batch axis of the decomposition must be a
        # batch axis of the product, paired with the same one; a vector index left free on either
        # side stays, at most two in all (s_a s_b M[a, b], whose diagonal carries no signs)
        roles = []
        for a, b in zip(lb, rb):
            if lt.roles[a] != rt.roles[b] or lt.roles[a] == "i":
                refuse("it pairs a vector axis with a different axis")
            roles.append(lt.roles[a])
        for a, b in zip(lc, rc):
            if lt.roles[a] != rt.roles[b] or lt.roles[a] not in (None, "i"):
                refuse("it pairs a vector axis with a different axis")
        roles += [lt.roles[a] for a in lfree] + [rt.roles[b] for b in rfree]
        if any(r not in (None, "i") for r in [lt.roles[a] for a in lfree] + [rt.roles[b] for b in rfree]):
            refuse("it keeps the vector axes of its two operands apart")
        if roles.count("i") > 2:
            refuse("it keeps more than two vector axes")
        return _with(lt, roles) if "i" in roles else None  # (batch roles alone: no signs left)
    if _tagged(lt):
        out = [lt.roles[a] for a in lb] + [lt.roles[a] for a in lfree] + [None] * len(rfree)
        return _with(lt, _through_diagonal(lt, lc, rc, diags[1], rfree, len(lb) + len(lfree), out, refuse))
    out = [rt.roles[a] for a in rb] + [None] * len(lfree) + [rt.roles[a] for a in rfree]
    return _with(rt, _through_diagonal(rt, rc, lc, diags[0], lfree, len(rb), out, refuse))


def _through_diagonal(tag, own_c, other_c, diag, other_free, offset, out, refuse):
    """The result roles of a product of the vectors with weights that carry no signs: none of the
    vector axes may be summed over, except the vector index against an axis of weights that are
    diagonal over two axes (p, q) (jax's gradient of eigvalsh / svd values: V diag(g) V^T, the
    diagonal written by a scatter): sum_j D[a, j] v[r, j] = D[a, a] v[r, a], so the sign moves to
    the diagonal's other axis, a free axis of the result at `offset` + its place in `other_free`."""
    summed = [(a, other_c[k]) for k, a in enumerate(own_c) if tag.roles[a] is not None]
    if not summed:
        return out
    if diag is None or len(summed) != 1 or tag.roles[summed[0][0]] != "i" or summed[0][1] not in diag:
        refuse("it sums the vectors with weights that do not carry their signs")
    p, q = diag
    keep = q if summed[0][1] == p else p
    if keep not in other_free:
        refuse("it sums the vectors with weights that do not carry their signs")
    out = list(out)
    out[offset + other_free.index(keep)] = "i"
    return out


def same_computation(a, b, depth: int = 24, seen: set | None = None) -> bool:
    """Whether two relax values are computed alike: the same value, or results of ops of one name,
    result number and attributes whose operands are computed alike (jax computes both columns of
    a diagonal's indices, [i, i], with separate but equal ops). Each pair is compared once."""
    if a == b:
        return True
    seen = set() if seen is None else seen
    if (a, b) in seen:
        return True  # (compared before, or being compared: a cycle is impossible in SSA)
    seen.add((a, b))
    if depth == 0 or not isinstance(a, ir.OpResult) or not isinstance(b, ir.OpResult) \
            or a.result_number != b.result_number:
        return False
    oa, ob = a.owner, b.owner
    if oa.name != ob.name or len(oa.operands) != len(ob.operands) or str(a.type) != str(b.type):
        return False
    aa, ab = oa.attributes, ob.attributes
    if len(aa) != len(ab) or any(str(aa[i].attr) != str(ab[i].attr) or aa[i].name != ab[i].name
                                 for i in range(len(aa))):
        return False
    return all(same_computation(x, y, depth - 1, seen) for x, y in zip(oa.operands, ob.operands))


def index_columns_alike(idx, ivd: int) -> bool:
    """Whether a gather's or scatter's index Val is [i, i]: two columns along its last axis `ivd`,
    concatenated, computed alike (jax writes a diagonal's indices so)."""
    src = idx.value
    if ivd != len(idx.dims) - 1 or not isinstance(src, ir.OpResult):
        return False
    cat = src.owner
    if cat.name != "relax_v.concat" or len(cat.operands) != 2 or "axis" not in cat.attributes:
        return False
    axis = cat.attributes["axis"]
    return isinstance(axis, ir.IntegerAttr) and axis.value == ivd and same_computation(cat.operands[0],
                                                                                       cat.operands[1])


# --- diagonal matrices in the imported relax program -------------------------------------------
# jnp.diag(w), w[:, None] * jnp.eye(n) and jnp.eye itself arrive as relax ops: a where() of w on a
# mask `iota along p == iota along q` and zeros, or the mask converted. A product V D V^T with such
# a D keeps each vector's sign on D's other axis (_through_diagonal), as the scatter's diagonal does.

def _owner_op(value):
    return value.owner if isinstance(value, ir.OpResult) else None


def _relax_splat(value, depth: int = 8):
    """The value of a relax value that is one constant everywhere (through reshape, broadcast_to,
    astype), else None."""
    if value is None:
        return None
    for _ in range(depth):
        o = _owner_op(value)
        if o is None:
            return None
        if o.name in ("relax.reshape", "relax.broadcast_to", "relax.astype") and len(o.operands) >= 1:
            value = o.operands[0]
            continue
        if o.name != "relax.constant":
            return None
        attr = o.attributes["value"]
        if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
            return None
        x = attr.get_splat_value()
        if isinstance(x, (ir.FloatAttr, ir.IntegerAttr)):
            return x.value
        if isinstance(x, ir.BoolAttr):
            return int(x.value)
        return None
    return None


def _rank(value):
    t = view(value.type)
    return len(t.dims) if isinstance(t, TensorType) and t.dims is not None else None


def _tokens(attr) -> list | None:
    """A shape attribute's dims as ints and strings (the importer's result types are not inferred
    yet: its ops' attributes are what says the shapes)."""
    if not isinstance(attr, ir.ArrayAttr):
        return None
    out = []
    for a in attr:
        if isinstance(a, ir.IntegerAttr):
            out.append(a.value)
        elif isinstance(a, ir.StringAttr):
            out.append(a.value)
        else:
            return None
    return out


def _iota(value, depth: int = 8):
    """(axis, dims) of a relax integer value that counts 0, 1, 2, ... along `axis` and is constant
    along the others (an arange from 0 by 1, reshaped by unit dims, broadcast, plus zeros; `dims`
    as its shape attributes spell them), else None."""
    o = _owner_op(value)
    if o is None or depth == 0:
        return None
    if o.name == "relax.arange":
        if "start" in o.attributes and _tokens_one(o.attributes["start"]) not in (0, "0"):
            return None
        if "step" in o.attributes and _tokens_one(o.attributes["step"]) not in (1, "1"):
            return None
        end = _tokens_one(o.attributes["end"]) if "end" in o.attributes else None
        return None if end is None else (0, [end])
    if o.name == "relax.add" and len(o.operands) == 2:
        for a, b in ((0, 1), (1, 0)):
            if _relax_splat(o.operands[b]) == 0 and _rank(o.operands[a]) == _rank(value):
                return _iota(o.operands[a], depth - 1)
        return None
    if o.name == "relax.astype":
        return _iota(o.operands[0], depth - 1)
    if o.name not in ("relax.reshape", "relax.broadcast_to") or len(o.operands) != 1 or "shape" not in o.attributes:
        return None
    inner = _iota(o.operands[0], depth - 1)
    out = _tokens(o.attributes["shape"])
    if inner is None or out is None:
        return None
    a, src = inner
    if o.name == "relax.reshape":  # unit dims in or out only
        big_in = [i for i, d in enumerate(src) if d != 1]
        big_out = [i for i, d in enumerate(out) if d != 1]
        if len(big_in) != len(big_out) or a not in big_in or any(src[i] != out[j] for i, j in zip(big_in, big_out)):
            return None
        return big_out[big_in.index(a)], out
    lead = len(out) - len(src)  # broadcast_to: numpy's alignment; the counting axis is not stretched
    if lead < 0 or src[a] != out[a + lead]:
        return None
    return a + lead, out


def _tokens_one(attr):
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    return None


def _diagonal_mask(value):
    """(p, q) where a relax i1 value is `iota along p == iota along q` (one shape), else None."""
    o = _owner_op(value)
    if o is None or o.name != "relax.equal" or len(o.operands) != 2:
        return None
    a, b = _iota(o.operands[0]), _iota(o.operands[1])
    if a is None or b is None or a[1] != b[1] or a[0] == b[0]:
        return None
    return a[0], b[0]


def relax_diagonal(value, depth: int = 6):
    """(p, q) where a relax value is zero wherever its indices along p and q differ: a where() on a
    diagonal mask with zeros as its other branch (jnp.diag, w[:, None] * jnp.eye(n)), the mask
    converted (jnp.eye), a product with such a value; else None."""
    o = _owner_op(value) if value is not None else None
    if o is None or depth == 0:
        return None
    if o.name == "relax.where" and len(o.operands) == 3:
        m = _diagonal_mask(o.operands[0])
        if m is not None and _relax_splat(o.operands[2]) == 0 and _rank(o.operands[1]) in (None, _rank(value)):
            return m
        return None
    if o.name == "relax.astype":
        return _diagonal_mask(o.operands[0]) or relax_diagonal(o.operands[0], depth - 1)
    if o.name == "relax.multiply" and len(o.operands) == 2 and _rank(o.operands[0]) == _rank(o.operands[1]) \
            == _rank(value):
        return relax_diagonal(o.operands[0], depth - 1) or relax_diagonal(o.operands[1], depth - 1)
    return None
