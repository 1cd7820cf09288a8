"""relax-import-stablehlo: StableHLO text (a file, or stdin) -> relax IR (verified, shapes deduced) on stdout."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="relax-import-stablehlo", description=__doc__)
    p.add_argument("input", nargs="?", default="-", help="StableHLO file ('-' or none: stdin)")
    p.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    p.add_argument("--spmd", action="store_true",
                   help="import a sharded module as its per-device program (relax_mlir.spmd)")
    p.add_argument("--split-collectives", action="store_true",
                   help="with --spmd: cut @main at its collectives into segment functions")
    p.add_argument("--split-input-file", action="store_true",
                   help="import each '// -----' chunk separately (as mlir-opt); outputs joined by the marker")
    p.add_argument("--platform-index", type=int, default=None, metavar="K",
                   help="a module jax exported for several platforms: import the lowering of platform K "
                        "(its index in Exported.platforms)")
    args = p.parse_args(argv)
    from relax_mlir.frontend.stablehlo import import_stablehlo, render_error
    from relax_mlir.tools.relax_opt import decode_source, split_input

    name = "<stdin>" if args.input == "-" else args.input
    try:
        if args.input == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.input, "rb") as f:
                data = f.read()
    except OSError as e:
        print(f"relax-import-stablehlo: error: cannot read '{args.input}': {e.strerror}", file=sys.stderr)
        return 1
    text, bad = decode_source(data, name)
    if bad is not None:
        print(bad.render(), file=sys.stderr)
        return 1
    chunks = split_input(text) if args.split_input_file else [(text, 0)]
    outs, failed = [], False
    for chunk, line in chunks:
        try:  # blank lines before the chunk: its diagnostics keep the file's line numbers
            module = import_stablehlo("\n" * line + chunk, source_name=name, spmd=args.spmd or args.split_collectives,
                                      platform_index=args.platform_index)
            if args.split_collectives:
                from relax_mlir.spmd import split_collectives

                split_collectives(module)
        except ValueError as e:  # parse errors, unsupported ops and element types, CompileError of the module
            print(render_error(e, name), file=sys.stderr)
            failed = True
            continue
        except RecursionError:
            print(f"{name}: error: the input nests too deeply", file=sys.stderr)
            failed = True
            continue
        outs.append(str(module))  # the output boundary: each module is printed once
    out = "\n// -----\n".join(outs)
    try:
        if args.output == "-":
            sys.stdout.write(out)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
    except OSError as e:
        print(f"relax-import-stablehlo: error: cannot write '{args.output}': {e.strerror}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
