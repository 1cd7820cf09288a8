"""One module per op family; importing this registers every op in `dialect.spec.OPS`."""
from relax_mlir.ops import bits, create, cross_level, elementwise, manipulate, nn, reduce, structural  # noqa: F401
