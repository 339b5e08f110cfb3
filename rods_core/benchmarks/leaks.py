"""The leak guard at every door into training, for any benchmark: the door names itself and passes the
benchmark's own `Benchmark.leak_reason`; what belongs to a test split is the benchmark's to say."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.config.inputs import DoorError


class TestSplitRefused(DoorError):
    """Tasks of the held-out test split offered at a door into training; `refused` lists (id, reason)."""

    __test__ = False  # not a pytest test class

    def __init__(self, where: str, refused: list[tuple[str, str]]):
        self.where, self.refused = where, refused
        shown = "\n".join(f"  {tid}: {why}" for tid, why in refused[:20])
        more = f"\n  ... and {len(refused) - 20} more" if len(refused) > 20 else ""
        super().__init__(
            f"{where}: {len(refused)} task(s) refused: they belong to the held-out test split "
            f"and would leak it into training; nothing was taken:\n{shown}{more}"
        )


def refuse_test_tasks(tasks: Iterable[TaskRecord], where: str, leak_reason: Callable[[Any], str | None]) -> None:
    """The leak guard at a door into training (imports, uploads, seed files, edits, reseeds, synthesis
    parents): raises TestSplitRefused naming `where` and every offending id, by id, content or user turns.
    `leak_reason` is the benchmark's guard (`Benchmark.leak_reason`), never a default: each benchmark knows its
    own test split."""
    refused = [(t.id, why) for t in tasks if (why := leak_reason(t))]
    if refused:
        raise TestSplitRefused(where, refused)
