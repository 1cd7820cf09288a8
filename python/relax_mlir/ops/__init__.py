"""One module per op family; importing this registers every op in `dialect.spec.OPS`."""
from relax_mlir.ops import control_flow  # noqa: F401
from relax_mlir.ops import create, cross_level, elementwise, manipulate, nn, reduce, structural  # noqa: F401
