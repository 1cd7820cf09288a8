"""One module per op family; importing this registers every op in `dialect.spec.OPS`."""
from relax_mlir.ops import control_flow  # noqa: F401
from relax_mlir.ops import bits, create, cross_level, elementwise, indexing, manipulate, nn, reduce, slicing, structural  # noqa: F401
from relax_mlir.ops import window, conv  # noqa: F401
from relax_mlir.ops import collective  # noqa: F401
from relax_mlir.ops import attention  # noqa: F401
from relax_mlir.ops import linear_algebra  # noqa: F401
