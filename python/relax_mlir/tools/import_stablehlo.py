"""relax-import-stablehlo: StableHLO text (a file, or stdin) -> relax IR text on stdout."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="relax-import-stablehlo", description=__doc__)
    p.add_argument("input", nargs="?", default="-", help="StableHLO file ('-' or none: stdin)")
    p.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    args = p.parse_args(argv)
    from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo

    text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    try:
        out = import_stablehlo(text)
    except UnsupportedOpError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # parse errors from the MLIR parser, etc.
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(out)
    else:
        with open(args.output, "w") as f:
            f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
