"""StableHLO -> relax importer.

The StableHLO text (as `jax.export` prints it) is parsed with jax's bundled MLIR (the MLIR 22
bindings have no stablehlo dialect): that parse is the one place text crosses between the two
libraries.  The ops are walked with their real operands, attributes and types, and the relax
function is built through our MLIR bindings, in a `Session`'s context, each op located at the
Python line (or input position) of the StableHLO op it comes from.  jax is imported lazily, inside
the functions.

Symbolic shapes: the dynamic dims of @main's arguments become symbols (named from jax's
`jax.global_constant` argument attributes of the private functions, or from names passed in).
Integer scalar / 1-D shape computations (get_dimension_size, arithmetic, convert, reshape,
concatenate of scalars) are evaluated symbolically, so dynamic_broadcast_in_dim, dynamic_reshape,
dynamic_iota, ... get symbolic shapes.  func.call of private functions is inlined.
`stablehlo.custom_call @shape_assertion` is dropped (the relax signature's symbols are checked at
run time by the executable instead).  The symbols of jax dimension variables are >= 1
(`relax.symbol_lower`), as jax.export assumes.

Layout: the infrastructure (`importer` the walk and entry points, `checks` the whole-module checks,
`shape_arith` the traced shape computations, `symbols` argument dims given as expressions,
`common` values and attribute readers, `errors`, `registry` the tables) and one module per op
family, mirroring `relax_mlir/ops/` (`elementwise`, `create`, `manipulate`, `slicing`, `reduce`,
`indexing`, `window`, `conv`, `bits`, `control_flow`, `structural`, `sharding`, `linalg`, `random`
(rng_bit_generator), and `complex`: complex values as pairs of real parts); each family
registers its converters in `registry.CONVERTERS` when imported here.
"""
from relax_mlir.frontend.stablehlo import (bits, complex, control_flow, conv, create, elementwise, indexing,  # noqa: F401
                                           linalg, manipulate, random, reduce, sharding, slicing, structural, window)
from relax_mlir.frontend.stablehlo.checks import check_supported_ops
from relax_mlir.frontend.stablehlo.errors import (StableHLOParseError, UnsupportedOpError, UnsupportedOpsError,
                                                  UnsupportedTypesError, render_error)
from relax_mlir.frontend.stablehlo.importer import import_module, import_stablehlo
from relax_mlir.frontend.stablehlo.registry import CONVERTERS, CUSTOM_CALL_TARGETS

__all__ = ["import_stablehlo", "import_module", "render_error", "UnsupportedOpError", "UnsupportedTypesError",
           "UnsupportedOpsError", "check_supported_ops", "CUSTOM_CALL_TARGETS",
           "StableHLOParseError", "CONVERTERS"]
