"""The KV cache of a generation: per layer one key and one value buffer, preallocated for the
maximum context, seen by the decode step as contiguous `[b, C, H, D]` arrays of the current
capacity `C`.

The decode function's cache length is symbolic (`m <= max_context`), so one compile serves every
capacity: the cache starts at the prompt's length rounded up to `chunk` positions and grows by
`chunk` positions when full, so attention reads about the positions in use, not the whole
maximum context. Growing rewrites each sequence's rows in place inside its preallocated buffer
(once per `chunk` tokens); between growths the decode step writes its new key and value in place
(the runtime's donated arguments) and nothing is copied."""
from __future__ import annotations

import numpy as np


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


class KVCache:
    """Keys and values of `layers` layers for `batch` sequences, up to `max_context` positions."""

    def __init__(self, layers: int, batch: int, kv_heads: int, head_dim: int, max_context: int,
                 dtype=np.float32, chunk: int = 64, value_dtype=None):
        self.batch, self.max_context, self.chunk = batch, max_context, chunk
        self.row = kv_heads * head_dim  # elements per position
        self.tail = (kv_heads, head_dim)
        self.dtype = np.dtype(dtype)  # the keys'; the values' is `value_dtype` (default the same)
        self.value_dtype = self.dtype if value_dtype is None else np.dtype(value_dtype)
        size = batch * max_context * self.row
        self._flat = ([np.zeros(size, self.dtype) for _ in range(layers)]  # k0..kL-1, v0..vL-1
                      + [np.zeros(size, self.value_dtype) for _ in range(layers)])
        self.capacity = 0
        self.arrays: list[np.ndarray] = []

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self._flat)

    def _views(self, capacity: int) -> list[np.ndarray]:
        n = self.batch * capacity * self.row
        return [f[:n].reshape(self.batch, capacity, *self.tail) for f in self._flat]

    def reserve(self, positions: int) -> bool:
        """Make room for `positions` positions; True if the capacity changed."""
        if positions <= self.capacity:
            return False
        if positions > self.max_context:
            raise ValueError(f"KV cache overflow: {positions} positions needed, max_context is {self.max_context}")
        new = min(self.max_context, _round_up(positions, self.chunk))
        old = self.capacity
        for f in self._flat:
            rows_old = f[:self.batch * old * self.row].reshape(self.batch, old * self.row)
            rows_new = f[:self.batch * new * self.row].reshape(self.batch, new * self.row)
            for i in range(self.batch - 1, 0, -1):  # last row first: a row moves only to higher addresses
                rows_new[i, :old * self.row] = rows_old[i]  # numpy buffers overlapping copies
            rows_new[:, old * self.row:] = 0  # unwritten positions are masked, but must be finite
        self.capacity = new
        self.arrays = self._views(new)
        return True

    def load(self, keys: list[np.ndarray], values: list[np.ndarray]) -> None:
        """Store the prefill's caches ([b, s, H, D] each) at positions [0, s)."""
        s = keys[0].shape[1]
        self.reserve(s)
        for dst, src in zip(self.arrays, [*keys, *values]):
            dst[:, :s] = src

    def store(self, outs) -> None:
        """The decode step's updated caches: nothing to do when it wrote in place (the runtime
        returns the very arrays passed), else copied back."""
        for dst, src in zip(self.arrays, outs):
            if src is not dst:
                np.copyto(dst, src)
