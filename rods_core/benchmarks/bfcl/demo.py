"""The demo seed subset: the train tasks a 3.9M-parameter model can be warm-started on well enough.

`demo_seeds()` = base-category train seeds that involve a single API class (32 tasks under the
rods-split-v1 split). docs/ARCHITECTURE.md records that ~37 SFT epochs over such a subset (34 tasks under an
earlier split) give greedy 34/34 and sampled rewards that differ within 94% of the groups, while 9
epochs over 100 mixed tasks left the model no better than doing nothing. Departure from the paper:
the paper trains a 4B model on all 400 train seeds; this subset exists only for CPU demos and CI.
The variance it yields comes from memorisation, not generalisation (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.bfcl.tasks import Task


def demo_seeds() -> list[Task]:
    """Single-class base train seeds, in seed order."""
    return [t for t in load_seeds("train", ("base",)) if len(t.involved_classes) == 1]
