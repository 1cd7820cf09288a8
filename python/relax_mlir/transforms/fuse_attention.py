"""`relax-fuse-attention`: the attention chain as jax exports it becomes one `relax.attention`.

Design: a matcher, not a pattern set. The chain is a tree of ten to twenty ops whose inner values
must have no other uses, rooted at the last product; a greedy per-op pattern would have to fire on
that root anyway, so the pass walks each graph function once, tries every `relax.matmul` as the
root, and rewrites the chains it proves. What it proves, from the root back (after
`relax-canonicalize`, which folds jax's scalar broadcasts into rank-0 operands):

    out = matmul(p, v)
    p   = divide(e, VIEWS(sum(e, axes=[-1])))             e used by exactly these two ops
    e   = exp(subtract(x, VIEWS([maximum(-inf,] max(x, axes=[-1])[)])))   x used by these two
    x   = [where(causal, s, fill)]                        fill a splat constant
    s   = [add(s1, BCAST(bias)) | add(BCAST(bias), s1)]    the bias operand (below)
    s1  = [multiply(s0, c) | multiply(c, s0) | divide(s0, c)]   c a splat constant
    s0  = matmul(q, permute_dims(k, last two axes swapped))

VIEWS are reshapes/broadcast_tos that only add unit or broadcast dims; `causal` is
`greater_equal(rows, cols)` (or `less_equal(cols, rows)`) of two arange-based index tensors
(jax's `arange(n)[:, None] >= arange(n)[None, :]`, including its `0 + 1 * iota` form), rows shaped
[Sq, 1] and columns [1, Sk]. Grouped-query attention as ops/grouped.py leaves it (the products on
[.., G, R*S, D] rows, the softmax on a [.., H, S, K] view: `out = matmul(reshape(p), v)` and
`s0 = reshape(matmul(q, k^T))`, both reshapes keeping the last dim) fuses in the products' layout
when it has no mask (a causal mask indexes the view's S rows). q, k and v must share their batch
dims (no broadcasting), be f32 with static head dims (v's a multiple of
32: the kernel's register tile) and at most one symbolic batch dim. Every inner value must have no
use outside the chain, so a score or probability used twice keeps the chain unfused.

The additive bias is what transformers' Flax Llama and GPT-2 add to the scores (their padding-and-
causal mask as 0 / finfo.min, [b, 1, Sq, Sk], built from the attention mask at run time): BCAST are
same-rank broadcast_tos (over the heads; shared by the layers, erased when dead), and the bias
under them becomes relax.attention's 4th operand when it broadcasts to the scores as the op allows
(ops/attention.py `check_bias`). With grouped-query attention the bias is in the softmax view's
layout [.., H, S, Sk] and the op gets `query_heads = R` (H = G*R from the view's reshape). The side
of the add that reaches the product (through scales and reshapes) is the scores.

The rewritten chain's ops are erased (they are pure and now dead).

Length versioning (`min_keys`, `min_queries`, defaults ops/attention.py's SHORT_KEYS = 256 and
SHORT_QUERIES = 32): below about 256 keys the fused kernel's fixed per-call work (packing k, the
per-tile softmax on mostly padded tiles) makes it slower than the unfused chain (1.47x at 16 keys,
1.0 at 256, 0.85 at 512, one thread), and below about 32 query rows (a decode step) packing all of
k for a few rows costs more than it saves (1.54x at 4 rows over 2048 keys, 0.98 at 32). A static
length below its limit stays unfused; symbolic ones get both versions, chosen at run time in one
compile:

    %n1 = relax.arange {start = Sk, end = Sk + 1, dtype = i64}      [1]
    %n = relax.reshape(%n1) {shape = []};  %lim = relax.constant 256 : i64
    %c = relax.less(%n, %lim)       (and the same for Sq < 32, joined by relax.logical_or; one
                                     test with the larger limit where Sq is Sk)
    %r = relax_v.if(%c, q, k, v) {then_branch = @f_attention0_short, else_branch = @f_attention0_fused}

with two private region functions (ops/control_flow.py) placed before the caller: `_short` holds
the unfused chain that `relax-expand-attention` builds, `_fused` the relax.attention op. The choice
is graph level, not inside one kernel, because the short branch is several kernels (its products
go to BLAS or the generated matmuls through relax-dispatch-library / relax-multiversion, which run
after this pass). `min_keys = 0 min_queries = 0` fuses every length without a branch.

`relax-expand-attention` is the inverse: relax.attention becomes that chain again (built through
the bindings), for the targets whose pipelines have no fused kernel (the GPUs) and `relax-lower`."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.types import TensorType, view
from relax_mlir.dialect.spec import DeduceError
from relax_mlir.ops.attention import SHORT_KEYS, SHORT_QUERIES, bias_shape, check_bias
from relax_mlir.ops.common import splat_source
from relax_mlir.passes import ModulePass, PipelineError
from relax_mlir.shape import sym
from relax_mlir.shape.prover import Facts
from relax_mlir.transforms.infer_shapes import graph_ops_named, param_bindings

_VIEWS = ("relax.reshape", "relax.broadcast_to")
# the v head dim the CPU kernel's register tile needs (2 x 16 lanes)
_DV_MULTIPLE = 32


def _owner(v, name: str | tuple):
    """The op defining `v` if its name is `name` (or one of them), else None."""
    if not isinstance(v, ir.OpResult):
        return None
    o = v.owner
    names = (name,) if isinstance(name, str) else name
    return o if o.name in names else None


def _uses(v) -> int:
    return sum(1 for _ in v.uses)


def _tensor(v) -> TensorType | None:
    t = view(v.type)
    return t if isinstance(t, TensorType) and t.dims is not None else None


def _through_views(v, chain: list):
    """Skip single-use reshape/broadcast_to ops (recording them in `chain`)."""
    while True:
        o = _owner(v, _VIEWS)
        if o is None or _uses(v) != 1:
            return v
        chain.append(o)
        v = o.operands[0]


def _splat_float(v) -> float | None:
    src = splat_source(v)
    if src is None:
        return None
    a = ir.DenseElementsAttr(src.attributes["value"])
    x = a.get_splat_value()
    return x.value if isinstance(x, ir.FloatAttr) else None


def _last_axis_reduce(v, name: str, rank: int):
    o = _owner(v, name)
    if o is None:
        return None
    axes = o.attributes["axes"] if "axes" in o.attributes else None
    if axes is None:
        return None
    axes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(axes)]
    if len(axes) != 1 or axes[0] % rank != rank - 1:
        return None
    return o


def _is_index_iota(v, chain: list) -> bool:
    """v is arange(0, n, 1), possibly as 0 + 1 * arange (jax's iota of a symbolic length)."""
    while True:
        o = _owner(v, ("relax.add", "relax.multiply"))
        if o is None:
            break
        unit = 0.0 if o.name == "relax.add" else 1.0
        a, b = o.operands[0], o.operands[1]
        if _splat_int(a) == unit:
            v = b
        elif _splat_int(b) == unit:
            v = a
        else:
            return False
        chain.append(o)
    o = _owner(v, "relax.arange")
    if o is None:
        return False
    for name, want in (("start", 0), ("step", 1)):
        if name in o.attributes and not (isinstance(o.attributes[name], ir.IntegerAttr)
                                         and ir.IntegerAttr(o.attributes[name]).value == want):
            return False
    chain.append(o)
    return True


def _splat_int(v):
    src = splat_source(v)
    if src is None:
        return None
    x = ir.DenseElementsAttr(src.attributes["value"]).get_splat_value()
    return x.value if isinstance(x, ir.IntegerAttr) else None


def _index_side(v, sq, sk, chain: list) -> str | None:
    """'row' if v is an iota over the query axis shaped [..., Sq, 1] (then broadcast), 'col' for
    one over the key axis shaped [..., 1, Sk]; else None."""
    v = _through_bcast(v, chain)
    r = _owner(v, "relax.reshape")
    if r is None:
        return None
    t = _tensor(r.results[0])
    if t is None or len(t.dims) < 2 or any(not (d is not None and d.is_const and d.value == 1) for d in t.dims[:-2]):
        return None
    inner = []
    if not _is_index_iota(r.operands[0], inner):
        return None
    a, b = t.dims[-2], t.dims[-1]
    one = lambda d: d is not None and d.is_const and d.value == 1  # noqa: E731
    side = "row" if one(b) and a == sq else "col" if one(a) and b == sk else None
    if side is not None:
        chain.append(r)
        chain += inner
    return side


def _row_regroup(v, rows: TensorType):
    """The single-use relax.reshape defining `v` if it only regroups rows (the last dim kept, both
    sides of it shaped like `rows` or the other side's view of the same elements), else None."""
    o = _owner(v, "relax.reshape")
    if o is None or _uses(v) != 1:
        return None
    ti, to = _tensor(o.operands[0]), _tensor(o.results[0])
    if ti is None or to is None or len(ti.dims) < 2 or len(to.dims) < 2 or ti.dims[-1] != to.dims[-1]:
        return None
    if rows not in (ti, to) or not all(d is not None for d in ti.dims + to.dims):
        return None
    return o


def _mask_views(v, sq, sk, chain: list):
    """Skip single-use reshape/broadcast_to ops that only add leading dims to an [Sq, Sk] mask."""
    while True:
        o = _owner(v, _VIEWS)
        if o is None or _uses(v) != 1:
            return v
        ti, to = _tensor(o.operands[0]), _tensor(o.results[0])
        if ti is None or to is None or len(ti.dims) < 2 or tuple(ti.dims[-2:]) != (sq, sk) or \
                tuple(to.dims[-2:]) != (sq, sk):
            return v
        chain.append(o)
        v = o.operands[0]


def _through_bcast(v, chain: list):
    o = _owner(v, "relax.broadcast_to")
    if o is not None:
        chain.append(o)
        return o.operands[0]
    return v


@dataclass
class Match:
    q: ir.Value
    k: ir.Value
    v: ir.Value
    attrs: dict
    chain: list  # ops made dead by the rewrite (erased when unused)
    bias: ir.Value | None = None

    @property
    def operands(self) -> list:
        return [self.q, self.k, self.v] + ([self.bias] if self.bias is not None else [])


def _bias_source(v, chain: list):
    """The additive bias under its same-rank broadcast_tos (HF's [b, 1, Sq, Sk] mask broadcast over
    the heads; the broadcasts may be shared by several layers: erased only when dead)."""
    while True:
        o = _owner(v, "relax.broadcast_to")
        if o is None or _tensor(o.operands[0]) is None or len(_tensor(o.operands[0]).dims) != len(_tensor(v).dims):
            return v
        chain.append(o)
        v = o.operands[0]


def _query_heads(back: ir.Operation) -> int | None:
    """R for a regroup reshape `back` from the products' [..., G, R*S, Sk] to the heads' [..., G*R,
    S, Sk] (leading dims kept, G and H static), else None."""
    ti, to = _tensor(back.operands[0]), _tensor(back.results[0])
    if len(ti.dims) != len(to.dims) or len(ti.dims) < 3 or ti.dims[:-3] != to.dims[:-3]:
        return None
    g, h = ti.dims[-3], to.dims[-3]
    if not (g.is_const and h.is_const and g.value > 0 and h.value % g.value == 0):
        return None
    r = h.value // g.value
    return r if to.dims[-2] * r == ti.dims[-2] else None


def match_attention(root: ir.Operation) -> Match | None:
    """The attention chain ending at the matmul `root`, or None."""
    if root.name != "relax.matmul":
        return None
    p, vv = root.operands[0], root.operands[1]
    tp, tv, tr = _tensor(p), _tensor(vv), _tensor(root.results[0])
    if tp is None or tv is None or tr is None or tp.dtype != "f32" or len(tp.dims) < 2 or len(tv.dims) != len(tp.dims):
        return None
    rank = len(tp.dims)
    chain = []
    # grouped-query attention after relax-canonicalize (ops/grouped.py): the products run on
    # [.., G, R*S, K] rows, the softmax on a [.., H, S, K] view of them; rows are rows in either
    # layout (the last dim is kept), so the fused op computes in the products' layout
    regroup = _row_regroup(p, tp)
    if regroup is not None:
        chain.append(regroup)
        p = regroup.operands[0]
    srank = len(_tensor(p).dims)
    div = _owner(p, "relax.divide")
    if div is None or _uses(p) != 1:
        return None
    e = div.operands[0]
    den = _through_views(div.operands[1], chain)
    sm = _last_axis_reduce(den, "relax.sum", srank)
    if sm is None or sm.operands[0] != e or _uses(den) != 1:
        return None
    ex = _owner(e, "relax.exp")
    if ex is None or _uses(e) != 2:
        return None
    sub = _owner(ex.operands[0], "relax.subtract")
    if sub is None or _uses(ex.operands[0]) != 1:
        return None
    x = sub.operands[0]
    mv = _through_views(sub.operands[1], chain)
    mx_op = _owner(mv, "relax.maximum")
    if mx_op is not None and _uses(mv) == 1:
        a, b = mx_op.operands[0], mx_op.operands[1]
        if _splat_float(a) == -math.inf:
            mv = b
        elif _splat_float(b) == -math.inf:
            mv = a
        else:
            return None
        chain.append(mx_op)
    mx = _last_axis_reduce(mv, "relax.max", srank)
    if mx is None or mx.operands[0] != x or _uses(mv) != 1 or _uses(x) != 2:
        return None
    chain += [root, div, sm, ex, sub, mx]
    attrs = {}
    s = x
    w = _owner(s, "relax.where")
    ts = _tensor(s)
    if ts is None:
        return None
    sq, sk = ts.dims[-2], ts.dims[-1]
    if w is not None:
        fill = _splat_float(w.operands[2])
        mask_chain = []
        cond = _mask_views(w.operands[0], sq, sk, mask_chain)
        cmp = _owner(cond, ("relax.greater_equal", "relax.less_equal"))
        if fill is None or cmp is None or _uses(cond) != 1:
            return None
        mask_chain.append(cmp)
        sides = [_index_side(cmp.operands[i], sq, sk, mask_chain) for i in (0, 1)]
        want = ["row", "col"] if cmp.name == "relax.greater_equal" else ["col", "row"]
        if sides != want:
            return None
        attrs["mask"] = ir.StringAttr.get("causal")
        attrs["fill"] = ir.FloatAttr.get(ir.F32Type.get(), fill)
        chain += [w] + mask_chain
        s = w.operands[1]
        if _uses(s) != 1:
            return None
    bias = None
    add = _owner(s, "relax.add")
    if add is not None:
        # scores + bias (or bias + scores): the scores are the side that reaches the product
        for i in (0, 1):
            if _scores_side(add.operands[i]) and _uses(add.operands[i]) == 1:
                s, bias = add.operands[i], _bias_source(add.operands[1 - i], chain)
                chain.append(add)
                break
        else:
            return None
    sc = _owner(s, ("relax.multiply", "relax.divide"))
    if sc is not None:
        a, b = sc.operands[0], sc.operands[1]
        if sc.name == "relax.multiply" and _splat_float(b) is not None:
            attrs["scale"], s = _splat_float(b), a
        elif sc.name == "relax.multiply" and _splat_float(a) is not None:
            attrs["scale"], s = _splat_float(a), b
        elif sc.name == "relax.divide" and _splat_float(b) is not None:
            attrs["divisor"], s = _splat_float(b), a
        else:
            return None
        for key in ("scale", "divisor"):
            if key in attrs:
                attrs[key] = ir.FloatAttr.get(ir.F32Type.get(), attrs[key])
        if _uses(s) != 1:
            return None
        chain.append(sc)
    heads = 1
    if regroup is not None:
        # the scores' view must be the inverse one, from the products' exact shape; no mask (its
        # rows index S, not R*S); a bias is in the view's layout (query_heads = R)
        back = _row_regroup(s, tp)
        if back is None or "mask" in attrs or _tensor(back.operands[0]) != tp:
            return None
        if bias is not None:
            heads = _query_heads(back)
            if heads is None:
                return None
        chain.append(back)
        s = back.operands[0]
    qk = _owner(s, "relax.matmul")
    if qk is None:
        return None
    q, kt = qk.operands[0], qk.operands[1]
    perm = _owner(kt, "relax.permute_dims")
    if perm is None:
        return None
    axes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(perm.attributes["axes"])]
    if axes != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return None
    k = perm.operands[0]
    tq, tk = _tensor(q), _tensor(k)
    if tq is None or tk is None or len(tq.dims) != rank or len(tk.dims) != rank:
        return None
    if not (tq.dtype == tk.dtype == tv.dtype == "f32"):
        return None
    if tq.dims[:-2] != tk.dims[:-2] or tq.dims[:-2] != tv.dims[:-2] or tk.dims[-2] != tv.dims[-2]:
        return None
    d, dv = tq.dims[-1], tv.dims[-1]
    if not (d is not None and d.is_const and dv is not None and dv.is_const and dv.value % _DV_MULTIPLE == 0
            and d.value > 0):
        return None
    if sum(1 for x in tq.dims[:-2] if not (x is not None and x.is_const)) > 1:
        return None
    if bias is not None:
        tb = _tensor(bias)
        if tb is None:
            return None
        try:
            check_bias(tb, tq.dims, tk.dims[-2], heads, "f32", Facts())
        except DeduceError:
            return None
        if heads > 1:
            attrs["query_heads"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), heads)
    chain += [qk, perm]
    return Match(q, k, vv, attrs, chain, bias)


def _scores_side(v) -> bool:
    """v may be the scores (a product, maybe scaled or regrouped), not a bias."""
    while True:
        o = _owner(v, ("relax.multiply", "relax.divide", "relax.reshape"))
        if o is None:
            return _owner(v, "relax.matmul") is not None
        v = o.operands[0]


@dataclass(frozen=True)
class FuseAttentionPass(ModulePass):
    """Rewrite softmax(q k^T [scale] [causal mask]) v chains into relax.attention, versioned on the
    key length where it is symbolic (the unfused chain below `min_keys`)."""

    name: ClassVar[str] = "relax-fuse-attention"
    min_keys: int = SHORT_KEYS  # key lengths below this run the unfused chain (0: always fused)
    min_queries: int = SHORT_QUERIES  # query rows below this run the unfused chain (0: no limit)
    # 0: leave chains with a bias operand on a symbolic length unfused (no relax_v.if for them).
    # Versioning them used to cost the LLM's prefill compile 2x (CPU s, one-thread build, 6 layers:
    # 12.4 versioned against 4.7 unfused): the unfused branch's keepdims reductions wrote their
    # output through a reshape, so the CPU backend inlined them into every layer's branch; since
    # it calls them (backend/cpu.py, _written_in_place), versioning adds about a tenth.
    fuse_bias: int = 1

    def validate(self) -> None:
        for name in ("min_keys", "min_queries"):
            v = getattr(self, name)
            if v < 0:
                raise PipelineError(f"option {name} of {self.name} must be >= 0 (0: no limit), got {v}")
        if self.fuse_bias not in (0, 1):
            raise PipelineError(f"option fuse_bias of {self.name} must be 0 or 1, got {self.fuse_bias}")

    def run(self, module: ir.Operation) -> None:
        self.validate()  # a pass built in Python, not parsed from a pipeline
        taken = _symbols(module)
        pairs: dict = {}  # one pair of branch functions per distinct (operand types, attributes)
        for root in graph_ops_named(module, ("relax.matmul",)):
            m = match_attention(root)
            if m is None:
                continue
            # (length, limit) pairs that send a call to the unfused chain when length < limit
            limits = [(_tensor(m.k).dims[-2], self.min_keys), (_tensor(m.q).dims[-2], self.min_queries)]
            if any(d is not None and d.is_const and d.value < lim for d, lim in limits):
                continue
            tests: dict = {}  # symbolic length -> the largest limit (self-attention: Sq is Sk)
            for d, lim in limits:
                if lim > 0 and d is not None and not d.is_const:
                    tests[d] = max(lim, tests.get(d, 0))
            if tests and m.bias is not None and not self.fuse_bias:
                continue
            with ir.InsertionPoint(root), root.location:
                if not tests or not all(_tensor(x).known for x in m.operands):
                    new = ir.Operation.create("relax.attention", results=[root.results[0].type],
                                              operands=m.operands, attributes=m.attrs)
                else:
                    new = _versioned(root, m, list(tests.items()), taken, pairs)
            root.results[0].replace_all_uses_with(new.results[0])
            _erase_dead(m.chain)


def _symbols(module: ir.Operation) -> set:
    return {ir.StringAttr(op.attributes["sym_name"]).value for op in module.regions[0].blocks[0].operations
            if "sym_name" in op.attributes}


def _enclosing_function(op: ir.Operation) -> ir.Operation:
    while op.name != "func.func":
        op = op.parent
    return op


def _region_types(name: str, types: list[TensorType]) -> list[TensorType]:
    """`types` as region function @name sees them (relax-infer-shapes' rule): a dim whose symbols
    are not all whole dims of some parameter becomes the fresh symbol `name_s<i>`."""
    binds = set(param_bindings(types))
    fresh: dict = {}
    out = []
    for t in types:
        dims = [d if d.is_const or d.symbols() <= binds else fresh.setdefault(d, sym(f"{name}_s{len(fresh)}"))
                for d in t.dims]
        out.append(TensorType(tuple(dims), t.dtype))
    return out


def _branch_function(before: ir.Operation, name: str, m: Match, fused: bool) -> None:
    """A private region function @name(q, k, v[, bias]) placed before `before`: relax.attention
    (`fused`) or the unfused chain it stands for."""
    rtypes = _region_types(name, [_tensor(x) for x in m.operands])
    tq, tv = rtypes[0], rtypes[2]
    types = [t.to_mlir() for t in rtypes]
    rtype = TensorType(tuple(tq.dims[:-1]) + (tv.dims[-1],), tq.dtype).to_mlir()
    loc = before.location
    with ir.InsertionPoint(before):
        f = ir.Operation.create("func.func", regions=1, loc=loc, attributes={
            "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
            "relax.region": ir.UnitAttr.get(),
            "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, [rtype]))})
    blk = f.regions[0].blocks.append(*types, arg_locs=[loc] * len(types))
    with ir.InsertionPoint(blk), loc:
        att = ir.Operation.create("relax.attention", results=[rtype], operands=list(blk.arguments),
                                  attributes=m.attrs)
        out = att.results[0]
        if not fused:
            out = expand_attention(att)
            att.erase()
        ir.Operation.create("func.return", operands=[out])


def _less_than(d, limit: int) -> ir.Value:
    """The i1 scalar `d < limit` for a symbolic dim d, at the insertion point."""
    i64 = ir.IntegerType.get_signless(64)
    n1 = ir.Operation.create("relax.arange", results=[TensorType.of([1], "i64").to_mlir()], attributes={
        "start": _dim_attr(d), "end": _dim_attr(d + 1), "dtype": ir.TypeAttr.get(i64)}).results[0]
    n = ir.Operation.create("relax.reshape", results=[TensorType.of([], "i64").to_mlir()], operands=[n1],
                            attributes={"shape": ir.ArrayAttr.get([])}).results[0]
    dense = ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([], i64), ir.IntegerAttr.get(i64, limit))
    lim = ir.Operation.create("relax.constant", results=[TensorType.of([], "i64").to_mlir()],
                              attributes={"value": dense}).results[0]
    return ir.Operation.create("relax.less", results=[TensorType.of([], "i1").to_mlir()],
                               operands=[n, lim]).results[0]


def _versioned(root: ir.Operation, m: Match, tests: list, taken: set, pairs: dict) -> ir.Operation:
    """At the insertion point: `relax_v.if(d0 < limit0 or d1 < limit1, q, k, v[, bias])` for `tests` =
    [(dim, limit)], over two region functions, the unfused chain (then) and relax.attention (else);
    returns the if op. Sites with the same operand types and attributes (every layer of a model)
    share one pair (`pairs`): each region function is host code that LLVM compiles, twice with a
    threaded build (a 12-layer Llama prefill: 86 functions and 19.1 s of CPU to compile with a pair
    per layer, against 8.8 s unversioned)."""
    key = (tuple(str(t) for t in _region_types("", [_tensor(x) for x in m.operands])),
           tuple(sorted(m.attrs.items(), key=lambda kv: kv[0])))
    if key not in pairs:
        f = _enclosing_function(root)
        base = ir.StringAttr(f.attributes["sym_name"]).value + "_attention"
        i = 0
        while f"{base}{i}_short" in taken or f"{base}{i}_fused" in taken:
            i += 1
        short, fused = f"{base}{i}_short", f"{base}{i}_fused"
        taken.update((short, fused))
        _branch_function(f, short, m, fused=False)
        _branch_function(f, fused, m, fused=True)
        pairs[key] = (short, fused)
    short, fused = pairs[key]
    pred = None
    for d, limit in tests:
        c = _less_than(d, limit)
        pred = c if pred is None else ir.Operation.create(
            "relax.logical_or", results=[TensorType.of([], "i1").to_mlir()], operands=[pred, c]).results[0]
    return ir.Operation.create("relax_v.if", results=[root.results[0].type], operands=[pred, *m.operands], attributes={
        "then_branch": ir.FlatSymbolRefAttr.get(short), "else_branch": ir.FlatSymbolRefAttr.get(fused)})


def _erase_dead(ops: list) -> None:
    """Erase the ops of `ops` that are (or become) unused; the rest stay."""
    live = list(dict.fromkeys(ops))
    changed = True
    while changed:
        changed = False
        for op in list(live):
            if all(_uses(r) == 0 for r in op.results):
                live.remove(op)
                op.erase()
                changed = True



def _dim_attr(d):
    """A dim as an attribute value: an integer, or the expression's text."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d.value) if d.is_const else ir.StringAttr.get(str(d))


def expand_attention(op: ir.Operation) -> ir.Value:
    """Build, before `op`, the unfused chain that `relax.attention` stands for; returns its result."""
    q, k, v = op.operands[0], op.operands[1], op.operands[2]
    tq, tk = _tensor(q), _tensor(k)
    r = len(tq.dims)
    batch, sq, sk, d = tq.dims[:-2], tq.dims[-2], tk.dims[-2], tq.dims[-1]
    f32 = ir.F32Type.get()
    i64 = ir.IntegerType.get_signless(64)

    def make(name, operands, dims, elem="f32", **attrs):
        t = TensorType.of(list(dims), elem).to_mlir()
        return ir.Operation.create(name, results=[t], operands=list(operands), attributes=attrs).results[0]

    def scalar(value: float):
        dense = ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([], f32), ir.FloatAttr.get(f32, value))
        return make("relax.constant", [], [], value=dense)

    axes = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, a) for a in list(range(r - 2)) + [r - 1, r - 2]])
    kt = make("relax.permute_dims", [k], [*batch, d, sk], axes=axes)
    s = make("relax.matmul", [q, kt], [*batch, sq, sk])
    attrs = {name: op.attributes[name] for name in op.attributes}
    if "scale" in attrs:
        s = make("relax.multiply", [s, scalar(ir.FloatAttr(attrs["scale"]).value)], [*batch, sq, sk])
    elif "divisor" in attrs:
        s = make("relax.divide", [s, scalar(ir.FloatAttr(attrs["divisor"]).value)], [*batch, sq, sk])
    if len(op.operands) > 3:
        heads = ir.IntegerAttr(attrs["query_heads"]).value if "query_heads" in attrs else 1
        scores = bias_shape(tq.dims, sk, heads)  # the heads' layout where query_heads > 1

        def shaped(x, dims, name):
            if tuple(_tensor(x).dims) == tuple(dims):
                return x
            return make(name, [x], dims, shape=ir.ArrayAttr.get([_dim_attr(e) for e in dims]))

        b = shaped(op.operands[3], scores, "relax.broadcast_to")
        s = shaped(make("relax.add", [shaped(s, scores, "relax.reshape"), b], scores), [*batch, sq, sk], "relax.reshape")
    if "mask" in attrs and ir.StringAttr(attrs["mask"]).value == "causal":
        fill = ir.FloatAttr(attrs["fill"]).value if "fill" in attrs else -math.inf
        rows = make("relax.arange", [], [sq], "i64", end=_dim_attr(sq), dtype=ir.TypeAttr.get(i64))
        rows = make("relax.reshape", [rows], [sq, 1], "i64",
                    shape=ir.ArrayAttr.get([_dim_attr(sq), ir.IntegerAttr.get(i64, 1)]))
        cols = make("relax.arange", [], [sk], "i64", end=_dim_attr(sk), dtype=ir.TypeAttr.get(i64))
        mask = make("relax.greater_equal", [rows, cols], [sq, sk], "i1")
        s = make("relax.where", [mask, s, scalar(fill)], [*batch, sq, sk])
    last = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, r - 1)])
    keep = ir.BoolAttr.get(True)
    mx = make("relax.max", [s], [*batch, sq, 1], axes=last, keepdims=keep)
    e = make("relax.exp", [make("relax.subtract", [s, mx], [*batch, sq, sk])], [*batch, sq, sk])
    sm = make("relax.sum", [e], [*batch, sq, 1], axes=last, keepdims=keep)
    p = make("relax.divide", [e, sm], [*batch, sq, sk])
    return make("relax.matmul", [p, v], _tensor(op.results[0]).dims)


@dataclass(frozen=True)
class ExpandAttentionPass(ModulePass):
    """Replace relax.attention by its unfused chain (targets without the fused kernel: GPUs)."""

    name: ClassVar[str] = "relax-expand-attention"

    def run(self, module: ir.Operation) -> None:
        for op in graph_ops_named(module, ("relax.attention",)):
            with ir.InsertionPoint(op), op.location:
                out = expand_attention(op)
            op.results[0].replace_all_uses_with(out)
            op.erase()


PASSES = (FuseAttentionPass, ExpandAttentionPass)
