"""report.batch_record: a step's rows as each process saw them, read back as one batch for the replay."""

from __future__ import annotations

import pytest
import torch

from rods_core.batch_record import read_batch, write_batch


def _output(rows: int, prompt: int, completion: int, base: int) -> dict:
    return {
        "prompt_ids": torch.full((rows, prompt), base),
        "prompt_mask": torch.ones(rows, prompt, dtype=torch.long),
        "completion_ids": torch.full((rows, completion), base + 1),
        "completion_mask": torch.ones(rows, completion, dtype=torch.long),
        "tool_mask": torch.ones(rows, completion, dtype=torch.long),
        "advantages": torch.arange(rows, dtype=torch.float) + base,
        "num_items_in_batch": torch.tensor(99.0),
    }


def test_two_processes_rows_read_back_in_rank_order_with_prompts_left_and_completions_right_padded(tmp_path):
    write_batch(tmp_path, 3, 1, _output(2, 5, 4, 10), [("b", 0.5), ("b", 1.0)])
    write_batch(tmp_path, 3, 0, _output(2, 3, 6, 20), [("a", 0.0), ("a", 0.25)])
    batch = read_batch(tmp_path, 3)
    assert batch.ranks == 2 and batch.task_ids == ["a", "a", "b", "b"] and batch.rewards == [0.0, 0.25, 0.5, 1.0]
    assert batch.num_items_in_batch == 99.0
    t = batch.tensors
    assert t["prompt_ids"].shape == (4, 5) and t["completion_ids"].shape == (4, 6)
    assert t["prompt_mask"][0].tolist() == [0, 0, 1, 1, 1]  # rank 0's shorter prompts padded on the left
    assert t["completion_mask"][2].tolist() == [1, 1, 1, 1, 0, 0]  # rank 1's shorter completions on the right
    assert t["advantages"].tolist() == [20.0, 21.0, 10.0, 11.0]
    assert not list(tmp_path.glob("batches/*.tmp"))


def test_a_step_without_a_record_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="step-7-rank0.pt"):
        read_batch(tmp_path, 7)
