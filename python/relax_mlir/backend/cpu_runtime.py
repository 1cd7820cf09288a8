"""Glue from an upstream-level module to a CPU `Executable` (lower, JIT, signatures)."""
from __future__ import annotations

from mlir import ir

from relax_mlir.runtime.executable import Executable, Function, Signature, TensorSig


def entry_signatures(module_op: ir.Operation) -> list[Signature]:
    sigs = []
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func" or "relax.signature" not in op.attributes:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        ins, outs = [list(a) for a in op.attributes["relax.signature"]]
        params = [TensorSig.parse(ir.StringAttr(t).value) for t in ins]
        results = [TensorSig.parse(ir.StringAttr(t).value) for t in outs]
        names = [f"argument #{i}" for i in range(len(params))]
        if "relax.arg_attrs" in op.attributes:
            for i, d in enumerate(op.attributes["relax.arg_attrs"]):
                if "relax.name" in d:
                    names[i] = f"argument '{ir.StringAttr(d['relax.name']).value}'"
        msgs = [ir.StringAttr(m).value for m in op.attributes["relax.check_messages"]] \
            if "relax.check_messages" in op.attributes else []
        derived = {}
        if "relax.derived_symbols" in op.attributes:
            d = op.attributes["relax.derived_symbols"]
            derived = {d[i].name: ir.StringAttr(d[i].attr).value for i in range(len(d))}
        bounds = {}
        if "relax.symbol_bounds" in op.attributes:
            d = op.attributes["relax.symbol_bounds"]
            bounds = {d[i].name: ir.IntegerAttr(d[i].attr).value for i in range(len(d))}
        sigs.append(Signature.make(name, params, results, names, msgs, derived, bounds))
    return sigs


def build_cpu_executable(module, options=None) -> Executable:
    from relax_mlir.backend.cpu import CPUOptions, JitModule, lower

    with module.context:
        sigs = entry_signatures(module.op)
        if not sigs:
            raise ValueError("the module has no public graph function to call")
        from relax_mlir.ops.kernel import expand_math
        from relax_mlir.tools.relax_opt import parse_module

        # CPU only: f32 exp/tanh/erf become vectorizable arith (LLVM would call scalar libm).
        upstream_text = expand_math(module.op.get_asm())
        op = parse_module(module.session, upstream_text)
        if op is None:
            raise ValueError("\n".join(d.render() for d in module.session.diags))
        module.op = op
        lower(module.op, options or CPUOptions())
        # ExecutionEngine takes an ir.Module; ours came from Operation.parse (for file locations).
        llvm_module = ir.Module.parse(module.op.get_asm(enable_debug_info=False))
        jit = JitModule(llvm_module)
    funcs = {s.name: Function(s, (lambda n: lambda *a: jit.invoke(n, *a))(s.name)) for s in sigs}
    main = "main" if "main" in funcs else sigs[0].name
    exe = Executable(funcs, main, keepalive=(module, jit), artifacts={"upstream": upstream_text})
    return exe
