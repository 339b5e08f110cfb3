"""The GPU path's silent faults, pinned on CPU: the distributed timeout reaches the process group the run makes,
server-mode weight syncs end in a checked cache reset and a barrier, the importance-sampling correction the paper
config chooses, old log-probs that do not depend on left padding, and LoRA under sharding refused with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from rods_core.config import RunConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "configs" / "paper-qwen3-4b.yaml"
QWEN3_4B = ROOT / "tests" / "fixtures" / "qwen3-4b-config"


# ----- the distributed timeout --------------------------------------------------------------------------------
def test_the_default_timeout_is_transformers_own():
    from trl import GRPOConfig

    from rods_core.ranks import DDP_TIMEOUT_S

    assert {f.name: f.default for f in dataclasses.fields(GRPOConfig)}["ddp_timeout"] == DDP_TIMEOUT_S


def test_the_configured_timeout_is_the_process_groups(tmp_path):
    """One launched process (torchrun's environment) makes its gloo group through Ranks.for_run: the group's timeout
    is grpo.trainer_args.ddp_timeout, not torch's default."""
    script = textwrap.dedent(
        """
        import sys
        import torch
        import torch.distributed as dist
        from rods_core.config import RunConfig
        from rods_core.ranks import Ranks

        cfg = RunConfig.model_validate({"grpo": {"trainer_args": {"ddp_timeout": int(sys.argv[1])}}})
        ranks = Ranks.for_run(cfg.grpo)
        backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        print(ranks.world, int(backend.options._timeout.total_seconds()))
        """
    )
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script, "77"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "77"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- server mode: a checked cache reset and a barrier after every weight sync ---------------------------------
class _Response:
    def __init__(self, status: int, body):
        self.status_code, self._body, self.text = status, body, str(body)

    def json(self):
        if self._body is None:
            raise ValueError("empty body")
        return self._body


class _Server:
    """TRL's VLLMGeneration in server mode (rank 0's vllm_client), recording the order of what happens."""

    def __init__(self, calls: list, answer: _Response):
        self.calls, self.answer = calls, answer
        self.base_url = "http://server"
        self.vllm_client = self
        self.session = self

    def sync_weights(self):
        self.calls.append("weights streamed, TRL's own reset (answer dropped)")

    def post(self, url):
        self.calls.append(f"reset {url}")
        return self.answer


class _Ranks:
    def __init__(self, calls: list, main: bool = True, rank0=None):
        self.calls, self.main, self.rank0 = calls, main, rank0

    def share(self, obj):
        self.calls.append("barrier")
        return obj if self.main else self.rank0


@pytest.mark.parametrize(
    ("answer", "ok"),
    [(_Response(200, {"success": True}), True), (_Response(200, None), True),
     (_Response(200, {"success": False}), False), (_Response(500, "boom"), False)],
)  # fmt: skip
def test_a_server_sync_ends_in_a_checked_reset_then_a_barrier(answer, ok):
    from rods_core.policy.vllm_sync import sync_server_weights

    calls: list = []
    if ok:
        sync_server_weights(_Server(calls, answer), _Ranks(calls))
    else:
        with pytest.raises(RuntimeError, match="prefix-cache reset|refused to reset"):
            sync_server_weights(_Server(calls, answer), _Ranks(calls))
    assert calls == [calls[0], "reset http://server/reset_prefix_cache", "barrier"]


def test_every_rank_waits_for_rank_0_and_fails_with_it():
    from rods_core.policy.vllm_sync import sync_server_weights

    calls: list = []
    sync_server_weights(_Server(calls, None), _Ranks(calls, main=False, rank0=None))  # no request of its own
    assert calls == [calls[0], "barrier"]
    with pytest.raises(RuntimeError, match="refused"):
        sync_server_weights(_Server([], None), _Ranks([], main=False, rank0="the server refused to reset"))


def test_the_trainer_syncs_a_server_itself_before_rollouts_and_evaluation(monkeypatch):
    """RodsGRPOTrainer's sync in server mode is the checked one, made before TRL's generation (which then skips its
    own) and before the evaluation generator; once per step."""
    from trl import GRPOTrainer

    import rods_core.trainer as trainer_mod

    calls: list = []
    monkeypatch.setattr(trainer_mod, "sync_server_weights", lambda gen, ranks: calls.append(("sync", gen, ranks)))
    monkeypatch.setattr(GRPOTrainer, "_generate", lambda self, prompts: calls.append("generate"))
    me = object.__new__(trainer_mod.RodsGRPOTrainer)  # no TRL set-up: only what the sync reads
    me.use_vllm, me.vllm_mode, me.vllm_generation, me.ranks, me._last_loaded_step = True, "server", "gen", "ranks", 2
    me.accelerator = SimpleNamespace(device=SimpleNamespace(type="cuda"))
    me.state = SimpleNamespace(global_step=3)
    me._generate([])
    me._generate([])
    assert calls == [("sync", "gen", "ranks"), "generate", "generate"] and me._last_loaded_step == 3


# ----- importance sampling: the mode, the ratios logged, and log-probs that do not depend on padding ------------
def test_the_paper_config_corrects_vllm_per_token_and_logs_the_ratios():
    from rods_core.loop import TRL_METRICS, step_row
    from storage.schema import EVENT_KINDS, STEP_METRICS, VLLM_STEP_METRICS

    args = load_config(PAPER, {"model.path": str(QWEN3_4B)}).grpo.trainer_args
    assert args["vllm_importance_sampling_mode"] == "token_truncate"  # each token its own ratio, capped
    assert args["vllm_importance_sampling_clip_max"] == 3.0
    # TRL's ratio figures reach the step row under their own names, and the step event kind has a column for each
    assert set(VLLM_STEP_METRICS) <= set(TRL_METRICS.values()) and not set(VLLM_STEP_METRICS) & set(STEP_METRICS)
    assert set(VLLM_STEP_METRICS) <= set(EVENT_KINDS["step"].columns)
    outcome = SimpleNamespace(metrics={"reward/mean": 0.5})
    logs = {"loss": 0.1, **dict.fromkeys(VLLM_STEP_METRICS, 0.9)}
    row = step_row(1, outcome, {"time/step_s": 1.0}, logs)
    assert {k: row[k] for k in VLLM_STEP_METRICS} == dict.fromkeys(VLLM_STEP_METRICS, 0.9)


def _fused(model_dir, dtype):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
    add_fused_lm_head(model)
    return model


def test_old_log_probs_of_an_episode_do_not_depend_on_its_left_padding(tiny_model_dir):
    """The same episode scored alone and left-padded beside a longer one: the positions the model sees follow the
    mask, and the log-probs agree (fp32: to float rounding; bf16: closer than TRL's own scoring, whose positions
    count the padding)."""
    import torch

    from rods_core.trainer import masked_position_logps

    torch.manual_seed(0)
    prompt, completion, pad = 20, 12, 700
    episode = torch.randint(5, 1000, (1, prompt + completion))
    longer = torch.randint(5, 1000, (1, pad + prompt + completion))
    ids = torch.cat([torch.cat([torch.zeros(1, pad, dtype=torch.long), episode], 1), longer])
    mask = torch.ones_like(ids)
    mask[0, :pad] = 0
    gaps, seen = {}, []
    for dtype in (torch.float32, torch.bfloat16):
        model = _fused(tiny_model_dir, dtype)
        seen.clear()
        model.model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw.get("position_ids")), with_kwargs=True)
        with torch.no_grad():
            alone, _ = masked_position_logps(model, episode, torch.ones_like(episode), completion)
            padded, _ = masked_position_logps(model, ids, mask, completion)
            labels = ids.masked_fill(mask == 0, -100)
            labels[:, :-completion] = -100
            trl = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs
        assert seen[1][0, pad:].tolist() == list(range(prompt + completion))  # as vLLM numbered them
        gaps[dtype] = ((padded[0] - alone[0]).abs().max().item(), (trl[0, -completion:] - alone[0]).abs().max().item())
    assert gaps[torch.float32][0] < 1e-6
    assert gaps[torch.bfloat16][0] < gaps[torch.bfloat16][1]


def test_with_vllm_the_trainer_scores_with_masked_positions(monkeypatch):
    from contextlib import nullcontext

    import rods_core.trainer as trainer_mod

    calls = []
    monkeypatch.setattr(trainer_mod, "masked_position_logps", lambda *a: calls.append(a[3:]) or ("lp", None))
    me = object.__new__(trainer_mod.RodsGRPOTrainer)
    me.cfg = SimpleNamespace(grpo=SimpleNamespace(shared_prompt=False))
    me.use_vllm, me.accelerator = True, SimpleNamespace(autocast=nullcontext)
    assert me._get_per_token_logps_and_entropies("model", "ids", "mask", 7, 2, True) == ("lp", None, None)
    assert calls == [(7, 2, True)]


# ----- FSDP2: gradients accumulated in fp32 ---------------------------------------------------------------------
def test_under_fsdp_each_micro_batch_is_reduce_scattered_into_the_fp32_shards(tmp_path, monkeypatch):
    """The run's GRPOConfig under an FSDP launch asks transformers' Trainer to sync every micro-batch (the
    accumulation dtype this gives is tests/test_scale.py's FSDP2 worker); elsewhere it changes nothing, and a lab's
    own accelerator_config is kept."""
    from rods_core.trainer import accelerator_config, grpo_args
    from tests.conftest import smoke_config

    cfg = RunConfig.model_validate(smoke_config(tmp_path, tmp_path / "model"))
    assert grpo_args(cfg, str(tmp_path)).accelerator_config.gradient_accumulation_kwargs is None
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    args = grpo_args(cfg, str(tmp_path))
    assert args.accelerator_config.gradient_accumulation_kwargs == {"sync_each_batch": True}
    own = {"accelerator_config": {"gradient_accumulation_kwargs": {"sync_each_batch": False}, "even_batches": False}}
    assert accelerator_config(own, {"ACCELERATE_USE_FSDP": "true"}) == own["accelerator_config"]
    assert accelerator_config({}, {}) == {}


# ----- checkpoints a lab can keep -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fsdp.yaml", "fsdp-2x8.yaml"])
def test_fsdp_checkpoints_are_sharded_once_and_the_final_model_is_gathered_whole(name, tmp_path):
    """The FSDP launch configs save checkpoints as each rank's shard (no second, gathered copy of the weights); then
    save_model writes no weights, so the final model is the full state dict, written by rank 0 only."""
    from accelerate.commands.config.config_args import load_config_from_file

    from rods_core.loop import Policy, sharded_checkpoints

    fsdp = load_config_from_file(str(ROOT / "configs" / "accelerate" / name)).fsdp_config
    assert fsdp["fsdp_state_dict_type"] == "SHARDED_STATE_DICT" and fsdp["fsdp_version"] == 2

    calls = []

    def trainer(state_dict_type: str, rank0: bool):
        plugin = SimpleNamespace(state_dict_type=f"StateDictType.{state_dict_type}")
        return SimpleNamespace(
            is_fsdp_enabled=True,
            accelerator=SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin),
                                        get_state_dict=lambda m: calls.append("gather") or {"w": 1}),
            model="model", args=SimpleNamespace(should_save=rank0),
            _save=lambda out, state_dict: calls.append(("write", state_dict)),
            save_model=lambda out: calls.append("save_model"),
        )  # fmt: skip

    policy = Policy.__new__(Policy)
    policy.tokenizer, policy.model_dir = SimpleNamespace(save_pretrained=lambda out: None), tmp_path
    ranks = SimpleNamespace(main=False)
    assert sharded_checkpoints(trainer("SHARDED_STATE_DICT", True))
    policy.save_final(trainer("SHARDED_STATE_DICT", False), tmp_path / "final", "r", ranks)
    assert calls == ["gather"]  # every rank takes part in the gather; only rank 0 writes
    calls.clear()
    policy.save_final(trainer("SHARDED_STATE_DICT", True), tmp_path / "final", "r", ranks)
    assert calls == ["gather", ("write", {"w": 1})]
    calls.clear()
    policy.save_final(trainer("FULL_STATE_DICT", True), tmp_path / "final", "r", ranks)
    assert calls == ["save_model"] and not sharded_checkpoints(trainer("FULL_STATE_DICT", True))


# ----- a first step within minutes ------------------------------------------------------------------------------
def test_the_paper_runs_first_evaluation_is_bounded_and_vllm_gets_each_ranks_episodes_at_once(monkeypatch):
    """The paper config scores its whole test split from step 20 on, but only its first 80 tasks before step 1; with
    the run's vLLM engine, a rank's evaluation episodes go to vLLM in one chunk (not eval.max_batch at a time)."""
    from contextlib import nullcontext

    import rods_core.evaluation as evaluation
    import rods_core.loop as loop
    from rods_core.evaluation import EvalConfig
    from rods_core.loop import HeldOutEval

    cfg = load_config(PAPER, {"model.path": str(QWEN3_4B)})
    assert (cfg.eval.limit, cfg.eval.start_limit, cfg.eval.max_batch) == (None, 80, 16)

    class Played(Exception):
        """Raised by the fake episodes: what they were handed is all this test reads."""

    def play(mine, gen, episode, bench, c, progress, scratch):
        raise Played(len(mine), c.max_batch)

    monkeypatch.setattr(evaluation, "_play", play)
    monkeypatch.setattr(evaluation, "_generator", lambda policy, c, bench, gen: (gen, None, None))
    ranks = SimpleNamespace(rank=0, world=8)
    model = SimpleNamespace(training=False, eval=lambda: None, train=lambda mode: None)
    greedy = EvalConfig(max_batch=16)
    for generator, chunk in (("vllm", 50), (None, 16)):  # vLLM: the rank's 50 at once; else eval.max_batch
        with pytest.raises(Played) as e:
            evaluation.evaluate_sharded((model, None), list(range(400)), greedy, ranks, None, generator=generator)
        assert e.value.args == (50, chunk)

    def sharded(policy, tasks, c, r, bench, generator, scratch=None):
        raise Played(len(tasks))

    monkeypatch.setattr(loop, "evaluate_sharded", sharded)  # where HeldOutEval looks it up
    run = HeldOutEval.__new__(HeldOutEval)
    run.tasks, run.start_limit, run.greedy, run.ranks = list(range(400)), 80, greedy, ranks
    run.benchmark, run.scratch, run.policy = None, None, SimpleNamespace(tokenizer=None)
    run.generation, run.recorder = nullcontext, SimpleNamespace(working=nullcontext)
    for step, n in ((0, 80), (20, 400)):
        with pytest.raises(Played) as e:
            run(model, step)
        assert e.value.args == (n,)


# ----- LoRA under sharding: merge and unmerge at the weights' dtype ---------------------------------------------
def test_lora_merge_and_unmerge_move_bf16_base_weights_so_sharded_lora_with_vllm_is_refused():
    """TRL's vLLM sync merges the adapter into the base weights and unmerges it every step (peft's merge_adapter /
    unmerge_adapter). In fp32 the base weights come back to within float rounding; in bf16 (ZeRO-3's module dtype)
    they do not: after 20 syncs they have moved. So a LoRA run with vLLM under FSDP or DeepSpeed is refused."""
    import torch
    from peft import LoraConfig, get_peft_model

    from rods_core.ranks import launch_refusal

    moved = {}
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        base = torch.nn.Sequential(torch.nn.Linear(64, 64)).to(dtype)
        model = get_peft_model(base, LoraConfig(r=8, target_modules=["0"], init_lora_weights=False))
        layer = model.base_model.model[0]
        before = layer.base_layer.weight.detach().clone()
        for _ in range(20):
            model.merge_adapter()
            model.unmerge_adapter()
        moved[dtype] = (layer.base_layer.weight.detach() - before).abs().max().item()
    assert moved[torch.float32] < 1e-5 < 1e-3 < moved[torch.bfloat16], moved

    for env in (
        {"ACCELERATE_USE_FSDP": "true"},
        {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_MIXED_PRECISION": "bf16"},
    ):
        assert "model.lora with grpo.use_vllm" in launch_refusal(env, False, True, lora_with_vllm=True)
        assert launch_refusal(env, False, True, lora_with_vllm=False) is None
    assert launch_refusal({}, False, True, lora_with_vllm=True) is None  # DDP, one GPU: model.dtype (fp32 default)
