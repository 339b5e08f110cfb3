"""Seeded sampling helpers: the one rule that derives every seed of a run, weighted draws without
replacement, and an RNG state that survives JSON (checkpoints are JSON, `random.Random.getstate()` is a tuple)."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence


def derive_seed(base: int, purpose: str, *parts: int | str) -> int:
    """The seed of one purpose ("synth", "rollout", "eval-variants", ...) of a run seeded `base`.

    Every seed a run uses comes from here, so two purposes never share a stream by accident (offsets such
    as base + 1 collide across runs seeded base and base + 1) and a step's seed is reproducible on resume.
    """
    key = ":".join(str(x) for x in (base, purpose, *parts))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")


def weighted_pick(ids: list[str], weights: list[float], n: int, rng: random.Random) -> list[str]:
    """n distinct ids, drawn with probability proportional to weight (Efraimidis-Spirakis keys)."""
    keyed = [(math.log(1.0 - rng.random()) / w, tid) for tid, w in zip(ids, weights, strict=True) if w > 0]
    keyed.sort(reverse=True)
    return [tid for _, tid in keyed[:n]]


def rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: Sequence) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))
