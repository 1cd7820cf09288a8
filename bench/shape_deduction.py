"""Time relax-infer-shapes on a 10,000-op module with symbolic dims (issue: deduction < 1 s)."""
from __future__ import annotations

import time


def build(n_ops: int) -> str:
    t = '!relax.tensor<["b", "s", 64], f32>'
    u = '!relax.tensor<["?", "?", "?"], f32>'
    lines = [f"func.func @main(%x: {t}, %y: {t}) -> {u} {{", f'  %v0 = "relax.add"(%x, %y) : ({t}, {t}) -> {u}']
    kinds = ["relax.add", "relax.multiply", "relax.exp", "relax.tanh", "relax.reshape", "relax.concat_pair"]
    for i in range(1, n_ops):
        k = kinds[i % len(kinds)]
        a = f"%v{i - 1}"
        if k in ("relax.exp", "relax.tanh"):
            lines.append(f'  %v{i} = "{k}"({a}) : ({u}) -> {u}')
        elif k == "relax.reshape":
            lines.append(f'  %r{i} = "relax.reshape"({a}) {{shape = ["b*s", 64]}} : ({u}) -> !relax.tensor<["?", "?"], f32>')
            lines.append(f'  %v{i} = "relax.reshape"(%r{i}) {{shape = ["b", "s", 64]}} : (!relax.tensor<["?", "?"], f32>) -> {u}')
        elif k == "relax.concat_pair":
            lines.append(f'  %c{i} = "relax_v.concat"({a}, %x) {{axis = 1}} : ({u}, {t}) -> {u}')
            lines.append(f'  %v{i} = "relax.strided_slice"(%c{i}) {{axes = [1], begin = [0], end = ["s"]}} : ({u}) -> {u}')
        else:
            lines.append(f'  %v{i} = "{k}"({a}, %x) : ({u}, {t}) -> {u}')
    lines.append(f"  return %v{n_ops - 1} : {u}\n}}")
    return "\n".join(lines)


def main() -> None:
    from mlir import ir

    from relax_mlir.core.session import Session, parse_module
    from relax_mlir.transforms.infer_shapes import check_module

    text = build(10_000)
    s = Session("bench")
    t0 = time.perf_counter()
    op = parse_module(s, text)
    t_parse = time.perf_counter() - t0
    n = sum(1 for _ in op.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations)
    with s.ctx, ir.Location.unknown():
        t0 = time.perf_counter()
        check_module(op, infer=True)
        t_infer = time.perf_counter() - t0
        t0 = time.perf_counter()
        check_module(op, infer=False)
        t_verify = time.perf_counter() - t0
        last = op.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations[n - 2]
        print(f"ops: {n}  parse: {t_parse:.3f} s  relax-infer-shapes: {t_infer:.3f} s ({t_infer / n * 1e6:.1f} µs/op)"
              f"  relax-verify (types already inferred): {t_verify:.3f} s")
        print("last result type:", last.results[0].type)


if __name__ == "__main__":
    main()
