"""Alias of rods_core.rng while files owned by other branches still import this name; delete it when none does
(`grep -rn rods_core.sampling`)."""

from rods_core.rng import *  # noqa: F403
