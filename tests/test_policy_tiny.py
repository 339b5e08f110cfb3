"""The tiny model builds and loads with its card; SFT lowers the loss and stops on the loss target;
evaluation reports accuracy and progress overall and per category."""

from __future__ import annotations

import json

import pytest

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.toolcalls.chat import CHAT_FORMAT, IM_END
from rods_core.policy.tiny import JSON_PIECES, MODEL_CARD, SPECIAL_TOKENS, load_policy


def test_tiny_model_folder_loads_with_card(tiny_model_dir):
    card = json.loads((tiny_model_dir / MODEL_CARD).read_text())
    model, tok, prompt = load_policy(tiny_model_dir)
    assert card["kind"] == "rods-tiny" and card["params"] == sum(p.numel() for p in model.parameters())
    assert card["chat_format"] == CHAT_FORMAT
    assert type(tok).__name__ in ("PreTrainedTokenizerFast", "TokenizersBackend")
    assert len(tok) == card["tokenizer"]["vocab"] == model.config.vocab_size
    for special in SPECIAL_TOKENS:  # each marker is one token, so masks and stops align with messages
        assert len(tok(special, add_special_tokens=False).input_ids) == 1
    call = '<tool_call>\n{"name": "mv", "arguments": {"source": "a", "destination": "b"}}\n</tool_call>'
    ids = tok(call, add_special_tokens=False).input_ids
    assert tok.decode(ids, skip_special_tokens=False) == call  # the JSON pieces decode back exactly
    piece_ids = [tok(p, add_special_tokens=False).input_ids for p in JSON_PIECES]
    assert all(len(p) == 1 for p in piece_ids)
    assert [i for i in ids if [i] in piece_ids] == [piece_ids[k][0] for k in (0, 1, 5, 6, 5, 3)]  # the call's glue
    assert tok.eos_token == IM_END and model.generation_config.eos_token_id == tok.eos_token_id
    assert prompt.docs_mode == card["prompt"]["docs_mode"]


def test_demo_seeds_are_single_class_base_train_tasks():
    from rods_core.benchmarks.bfcl.seeds import split_of

    seeds = demo_seeds()
    assert len(seeds) >= 30
    assert all(t.category == "base" and len(t.involved_classes) == 1 and split_of(t.id) == "train" for t in seeds)


def test_sft_lowers_the_loss_and_saves_a_loadable_model(tiny_model_dir, tmp_path):
    from rods_core.config import SFTSettings
    from rods_core.policy.sft import run_sft

    out = tmp_path / "sft"
    tasks = demo_seeds()[:2]
    fig = run_sft(
        tiny_model_dir,
        out,
        tasks,
        SFTSettings(max_epochs=4, learning_rate=3e-3, warmup_steps=0, loss_target=1e-6),
        show_progress=False,
    )
    losses = [loss for _, loss in fig["sft/loss_curve"]]
    assert len(losses) == 4 and losses[-1] < losses[0] * 0.9
    assert 0 < fig["sft/assistant_token_share"] < 0.5
    card = json.loads((out / MODEL_CARD).read_text())
    assert card["stages"][-1]["stage"] == "sft" and card["stages"][-1]["task_ids"] == [t.id for t in tasks]
    load_policy(out)


def test_the_scored_positions_loss_is_the_models_own_loss_and_gradient(tiny_model_dir):
    """The warm start's loss computes logits only where it scores; loss and gradients are those of the full
    logits (the model's own shifted cross-entropy over the assistant tokens), padding in a batch included."""
    import torch

    from rods_core.policy.sft import scored_positions_loss, tokenize_demonstrations

    model, tok, prompt = load_policy(tiny_model_dir)
    rows = tokenize_demonstrations(demo_seeds()[:2], tok, make_benchmark("bfcl_multi_turn", prompt=prompt))
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in rows])
    attention = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows])
    masks = [r["assistant_masks"] + [0] * (width - len(r["input_ids"])) for r in rows]
    labels = ids.masked_fill(torch.tensor(masks) == 0, -100)
    batch = {"input_ids": ids, "attention_mask": attention, "labels": labels}

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    ours, _ = scored_positions_loss(model, batch)
    ours_grad = grads(ours)
    full = model(**batch).loss
    assert torch.allclose(ours, full, rtol=1e-5) and torch.allclose(ours_grad, grads(full), rtol=1e-4, atol=1e-7)
    scored = int((labels[:, 1:] != -100).sum())
    sharded, _ = scored_positions_loss(model, batch, num_items_in_batch=2 * scored, processes=2)
    assert torch.allclose(sharded, full, rtol=1e-5)  # half the tokens of two processes, DDP averaging over them


def test_sft_stops_at_the_loss_target(tiny_model_dir, tmp_path):
    from rods_core.config import SFTSettings
    from rods_core.policy.sft import run_sft

    fig = run_sft(
        tiny_model_dir,
        tmp_path / "sft",
        demo_seeds()[:1],
        SFTSettings(max_epochs=5, loss_target=100.0),
        show_progress=False,
    )
    assert fig["sft/epochs"] == 1.0 and fig["sft/reached_target"]


@pytest.mark.parametrize("schedule", ["constant_with_warmup", "cosine", "linear"])
def test_a_decaying_schedule_reaches_zero_at_the_end_of_the_token_budget(tiny_model_dir, tmp_path, schedule):
    """The demo's warm start decays its learning rate over its token budget: the last step's rate is 0 (the
    budget, not max_epochs, sets the horizon); a constant one keeps the configured rate."""
    from transformers import TrainerCallback

    from rods_core.config import SFTSettings
    from rods_core.policy.sft import run_sft

    rates = []

    class Rates(TrainerCallback):
        def on_step_end(self, args, state, control, lr_scheduler=None, **kw):
            rates.append(lr_scheduler.get_last_lr()[0])

    tasks = demo_seeds()[:2]
    settings = SFTSettings(
        max_epochs=50, learning_rate=2e-3, warmup_steps=1, loss_target=1e-9, lr_schedule=schedule, token_budget=3000
    )
    fig = run_sft(tiny_model_dir, tmp_path / "sft", tasks, settings, show_progress=False, callbacks=[Rates()])
    assert fig["sft/steps"] == len(rates) >= 4
    assert rates[-1] == (2e-3 if schedule == "constant_with_warmup" else 0.0)
    assert max(rates) == pytest.approx(2e-3, rel=0.2)


def test_evaluate_reports_per_category(tiny_model_dir, train_seeds):
    from rods_core.config import EpisodeConfig, SamplingConfig
    from rods_core.evaluation import EvalConfig, evaluate

    model, tok, prompt = load_policy(tiny_model_dir)
    tasks = [next(t for t in train_seeds if t.category == c) for c in ("base", "miss_param")]
    cfg = EvalConfig(
        episode=EpisodeConfig(
            prompt=prompt, max_steps_per_turn=1, sampling=SamplingConfig(temperature=0.0, max_new_tokens=4)
        )
    )
    out = evaluate((model, tok), tasks, cfg)
    for key in (
        "eval/accuracy",
        "eval/progress",
        "eval/accuracy/base",
        "eval/progress/miss_param",
        "eval/format_valid",
    ):
        assert 0.0 <= out[key] <= 1.0
    assert set(out["per_task"]) == {t.id for t in tasks}


def test_cli_rejects_bad_input_clearly(tmp_path, tiny_model_dir):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["eval", "--model", str(tmp_path), "--split", "train"])
    assert r.exit_code == 2 and "holds no config.json" in r.output
    r = runner.invoke(app, ["eval", "--model", str(tiny_model_dir), "--split", "dev"])
    assert r.exit_code == 2 and "--split" in r.output and "is not one of" in r.output
    r = runner.invoke(app, ["model", "init-tiny", "--out", str(tmp_path / "m"), "--hidden", "100", "--heads", "3"])
    assert r.exit_code != 0 and "multiple of --heads" in r.output
    r = runner.invoke(app, ["sft", "--model", str(tiny_model_dir), "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "--tasks FILE or --demo" in r.output


def test_sft_cli_adds_verified_variants_and_reports_on_the_given_tasks(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from rods_core.benchmarks.task_files import write_tasks
    from rods_lab.cli import app

    seeds = demo_seeds()[:1]
    write_tasks(tmp_path / "one.jsonl", seeds)
    out = tmp_path / "o"
    r = CliRunner().invoke(
        app,
        [
            "sft",
            "--model",
            str(tiny_model_dir),
            "--out",
            str(out),
            "--tasks",
            str(tmp_path / "one.jsonl"),
            "--variants",
            "2",
            "--max-epochs",
            "1",
            "--samples",
            "0",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout[r.stdout.index("{") :])
    stage = json.loads((out / MODEL_CARD).read_text())["stages"][-1]
    assert report["sft/variants"] == 2 and report["eval/tasks"] == 1  # trained on 3, evaluated on the seed
    assert stage["task_ids"][0] == seeds[0].id and len(set(stage["task_ids"])) == 3


def test_model_demo_refuses_a_missing_model_it_may_not_build(tmp_path):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"model:\n  path: {tmp_path / 'none'}\n  build_if_missing: false\n")
    r = CliRunner().invoke(app, ["model", "demo", "--config", str(cfg)])
    assert r.exit_code != 0 and "holds no model" in r.output


def test_model_demo_warm_starts_on_a_memory_benchmarks_seeds_through_its_protocol(tmp_path):
    """`rods model demo --benchmark bfcl_memory_kv` builds a tiny model (a few SFT steps) on the memory
    config's seeds, played by the memory benchmark's reference policy; a config of another benchmark is
    refused before anything is built."""
    import yaml
    from typer.testing import CliRunner

    from rods_lab.cli import app

    ids = ["memory_145_notetaker_15", "memory_142_notetaker_12"]
    tiny = {"hidden": 64, "layers": 2, "heads": 2, "kv_heads": 1, "ffn": 128, "vocab": 1000}
    base = {
        "model": {"path": str(tmp_path / "unused"), "build_if_missing": True, "tiny": tiny, "sft": {"max_epochs": 2}},
        "compute": {"processes": 1},
    }
    memory = {**base, "benchmark": "bfcl_memory_kv", "prereq": "fact", "seeds": {"subset": "all", "ids": ids}}
    (tmp_path / "memory.yaml").write_text(yaml.safe_dump(memory))
    (tmp_path / "bfcl.yaml").write_text(yaml.safe_dump(base))
    out = tmp_path / "models" / "tiny-memory"
    demo = ["model", "demo", "--benchmark", "bfcl_memory_kv", "--out", str(out), "--config"]

    r = CliRunner().invoke(app, [*demo, str(tmp_path / "bfcl.yaml")])
    assert r.exit_code == 2 and "give a config with benchmark: bfcl_memory_kv" in r.output
    assert not out.exists() and not out.with_name(out.name + "-init").exists()

    r = CliRunner().invoke(app, [*demo, str(tmp_path / "memory.yaml")])
    assert r.exit_code == 0, r.output
    stage = json.loads((out / MODEL_CARD).read_text())["stages"][-1]
    assert stage["stage"] == "sft" and stage["task_ids"] == ids and stage["sft/steps"] >= 1
    assert not (tmp_path / "unused").exists()  # --out, not the config's model.path


def test_rods_sft_takes_the_schedule_and_refuses_an_unknown_one(tiny_model_dir, tmp_path):
    """`rods sft --lr-schedule` reaches the warm start (the model card records it); a typo exits 2."""
    from typer.testing import CliRunner

    from rods_lab.cli import app

    base = ["sft", "--model", str(tiny_model_dir), "--demo", "--samples", "0", "--max-epochs", "1", "--json"]
    ok = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a"), "--lr-schedule", "cosine"])
    assert ok.exit_code == 0, ok.output
    card = json.loads((tmp_path / "a" / MODEL_CARD).read_text())
    assert card["stages"][-1]["settings"]["lr_schedule"] == "cosine"
    bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "b"), "--lr-schedule", "cosin"])
    assert bad.exit_code == 2 and not (tmp_path / "b").exists()


def test_the_sft_seed_orders_the_data_of_a_several_process_build(tiny_model_dir, tmp_path):
    """A build with several processes samples with transformers' BatchRebalanceSampler, which its Trainer
    makes without a seed (always 42): the warm start's trainer hands it `args.seed`, so seeds differ."""
    from datasets import Dataset
    from trl import SFTConfig

    from rods_core.policy.sft import _trainer_class, tokenize_demonstrations

    model, tok, prompt = load_policy(tiny_model_dir)
    rows = tokenize_demonstrations(demo_seeds()[:6], tok, make_benchmark("bfcl_multi_turn", prompt=prompt))
    orders = {}
    for seed in (7, 8):
        args = SFTConfig(output_dir=str(tmp_path / str(seed)), train_sampling_strategy="batch_rebalance", seed=seed,
                         use_cpu=True, report_to="none", max_length=None, per_device_train_batch_size=1)  # fmt: skip
        trainer = _trainer_class()(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
        sampler = trainer._get_train_sampler()
        assert type(sampler).__name__ == "BatchRebalanceSampler" and sampler.seed == seed
        orders[seed] = [i for batch in sampler for i in batch]  # it yields each step's indices
    assert orders[7] != orders[8] and sorted(orders[7]) == sorted(orders[8]) == list(range(6))
