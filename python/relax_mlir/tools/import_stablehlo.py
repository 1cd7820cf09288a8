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
    p.add_argument("--platform-index", type=int, default=None, metavar="K",
                   help="a module jax exported for several platforms: import the lowering of platform K "
                        "(its index in Exported.platforms)")
    args = p.parse_args(argv)
    from relax_mlir.frontend.stablehlo import import_stablehlo, render_error
    from relax_mlir.tools.relax_opt import decode_source

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
    try:
        module = import_stablehlo(text, source_name=name, spmd=args.spmd or args.split_collectives,
                                  platform_index=args.platform_index)
        if args.split_collectives:
            from relax_mlir.spmd import split_collectives

            split_collectives(module)
    except ValueError as e:  # parse errors, unsupported ops and element types, CompileError of the built module
        print(render_error(e, name), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{name}: error: the input nests too deeply", file=sys.stderr)
        return 1
    out = str(module)  # the output boundary: the module is printed once
    try:
        if args.output == "-":
            sys.stdout.write(out)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
    except OSError as e:
        print(f"relax-import-stablehlo: error: cannot write '{args.output}': {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
