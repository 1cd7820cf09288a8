"""Sharding annotations: sdy/GSPMD constraints pass their operands through (relax compiles for
one device); shard_map's manual computations are refused.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.checks import _REFUSED_OPS
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls


def _identity(im, op, ins):
    """An annotation that passes its operands through (sharding constraints, placement)."""
    return list(ins)


def _refuse_manual(im, op, ins):
    raise UnsupportedOpError(op.operation.name, str(op.location), _REFUSED_OPS[op.operation.name])


_SHARD_MAP_WHY = ("shard_map's manual sharding (per-device shapes) is not supported: relax compiles for one "
                  "device; call the function without shard_map")


CONVERTERS = register_converters({
    "sdy.sharding_constraint": _identity,
    "sdy.reshard": _identity,
    "sdy.manual_computation": _refuse_manual,
})

CUSTOM_CALLS = register_custom_calls({
    "Sharding": _identity,  # with_sharding_constraint (GSPMD): mhlo.sharding on an identity
    "annotate_device_placement": _identity,  # memory kind / device placement of a value
    "SPMDFullToShardShape": _SHARD_MAP_WHY,
    "SPMDShardToFullShape": _SHARD_MAP_WHY,
})
