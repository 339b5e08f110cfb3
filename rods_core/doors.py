"""Alias of rods_core.inputs while files owned by other branches still import this name; delete it when none does
(`grep -rn rods_core.doors`)."""

from rods_core.inputs import *  # noqa: F403
