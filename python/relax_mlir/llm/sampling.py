"""Choosing the next token from a batch of logits: greedy, or seeded sampling with temperature,
top-k and top-p (nucleus). Host-side numpy, in float64; the same seed gives the same tokens."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampler:
    """`sampling="greedy"` takes the argmax (the first one on ties, as `jnp.argmax`);
    `"sample"` draws from softmax(logits / temperature) restricted to the `top_k` most likely
    tokens and to the smallest set whose probability reaches `top_p`."""

    sampling: str = "greedy"
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    @staticmethod
    def make(sampling: str = "greedy", temperature: float | None = None, top_k: int | None = None,
             top_p: float | None = None, seed: int = 0) -> "Sampler":
        if sampling not in ("greedy", "sample"):
            raise ValueError(f"sampling must be 'greedy' or 'sample', got {sampling!r}")
        if sampling == "greedy":
            given = [n for n, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if v is not None]
            if given:
                raise ValueError(f"{', '.join(given)} given with sampling='greedy'; pass sampling='sample'")
            return Sampler()
        temperature = 1.0 if temperature is None else float(temperature)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if top_k is not None and (int(top_k) != top_k or top_k < 1):
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        return Sampler("sample", temperature, None if top_k is None else int(top_k), top_p, int(seed))

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def __call__(self, logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """logits [b, V] -> tokens [b] (int32)."""
        if self.sampling == "greedy":
            return np.argmax(logits, axis=-1).astype(np.int32)
        z = logits.astype(np.float64) / self.temperature
        order = np.argsort(-z, axis=-1, kind="stable")  # most likely first
        z = np.take_along_axis(z, order, axis=-1)
        if self.top_k is not None:
            z[:, self.top_k:] = -np.inf
        p = np.exp(z - z[:, :1])
        p /= p.sum(axis=-1, keepdims=True)
        if self.top_p is not None:
            before = np.cumsum(p, axis=-1) - p  # probability of the more likely tokens
            p = np.where(before < self.top_p, p, 0.0)  # the first token always stays
            p /= p.sum(axis=-1, keepdims=True)
        u = rng.random(len(p))
        pick = (np.cumsum(p, axis=-1) <= u[:, None]).sum(axis=-1)
        pick = np.minimum(pick, (p > 0).sum(axis=-1) - 1)  # u close to 1 and rounding: the last kept token
        return np.take_along_axis(order, pick[:, None], axis=-1)[:, 0].astype(np.int32)
