"""Choosing the next token from a batch of logits: greedy, or seeded sampling with temperature,
top-k and top-p (nucleus). Host-side numpy, in float64; the same seed gives the same tokens."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def whole_number(name: str, v, lo: int) -> int:
    """`v` (an int, or a float or numpy number with an integer value) as an int >= lo, else a
    ValueError naming `name` (None, NaN, inf, 1.5, a bool and a string are refused)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or (not isinstance(v, int) and not np.isfinite(v)) or int(v) != v or v < lo:  # (an int may pass int64)
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


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
        if temperature is not None and (isinstance(temperature, bool)
                                        or not isinstance(temperature, (int, float, np.integer, np.floating))):
            raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
        temperature = 1.0 if temperature is None else float(temperature)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        top_k = None if top_k is None else whole_number("top_k", top_k, 1)
        if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float, np.integer, np.floating))
                                  or not 0 < top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        return Sampler("sample", temperature, top_k, top_p, whole_number("seed", seed, 0))

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def __call__(self, logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """logits [b, V] -> tokens [b] (int32)."""
        if self.sampling == "greedy":
            return np.argmax(logits, axis=-1).astype(np.int32)
        with np.errstate(over="ignore"):  # (a tiny temperature: +-inf, the limit of the distribution)
            z = logits.astype(np.float64) / self.temperature
        bad = np.isnan(z).any(axis=-1) | np.isneginf(z).all(axis=-1)
        if bad.any():
            i = int(np.argmax(bad))
            what = "hold NaN" if np.isnan(z[i]).any() else "are all -inf"
            raise ValueError(f"sampling: the logits of sequence {i} {what}: no distribution to sample from")
        order = np.argsort(-z, axis=-1, kind="stable")  # most likely first
        z = np.take_along_axis(z, order, axis=-1)
        if self.top_k is not None:
            z[:, self.top_k:] = -np.inf
        top = z[:, :1]
        with np.errstate(invalid="ignore"):
            p = np.exp(z - top)
        # a row whose largest logit is +inf: its +inf tokens, equally likely (the limit)
        p = np.where(np.isposinf(top), (z == np.inf).astype(np.float64), p)
        p /= p.sum(axis=-1, keepdims=True)
        if self.top_p is not None:
            before = np.cumsum(p, axis=-1) - p  # probability of the more likely tokens
            p = np.where(before < self.top_p, p, 0.0)  # the first token always stays
            p /= p.sum(axis=-1, keepdims=True)
        u = rng.random(len(p))
        pick = (np.cumsum(p, axis=-1) <= u[:, None]).sum(axis=-1)
        pick = np.minimum(pick, (p > 0).sum(axis=-1) - 1)  # u close to 1 and rounding: the last kept token
        return np.take_along_axis(order, pick[:, None], axis=-1)[:, 0].astype(np.int32)
