"""A tiny local policy: a byte-level BPE tokenizer trained on the tool docs and train-seed
demonstrations, a Qwen-architecture causal LM built from a config, saved to a folder with rods_model.json.

It exists so that GRPO runs on a laptop or in CI, where no model hub can be reached; it is useless
before an SFT warm start (see policy/sft.py). Departure from the paper: the paper fine-tunes
Qwen3-4B-Instruct; this model only shares the architecture family.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from rods_core.benchmarks.protocols import demonstration
from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.toolcalls.chat import (
    CHAT_FORMAT,
    CHAT_TEMPLATE,
    IM_END,
    IM_START,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    compact_tools,
    json_tools,
)
from rods_core.config import PromptConfig, TinyModelConfig
from rods_core.config.inputs import DoorError
from rods_core.policy.lora import is_adapter_folder, load_merged
from rods_core.policy.rendering import TemplateError, renderer_for

MODEL_CARD = "rods_model.json"
# The benchmark every tiny model's tokenizer learns from (its `tool_catalog` and train demonstrations), whatever
# the model then trains on: the demo model is built on it.
TOKENIZER_BENCHMARK = "bfcl_multi_turn"
PAD, EOS = "<|endoftext|>", IM_END
SPECIAL_TOKENS = [PAD, IM_START, IM_END, TOOL_CALL_OPEN, TOOL_CALL_CLOSE]
# The fixed text of a Qwen3 tool call and the JSON glue between keys and values, one (non-special) token
# each: the byte-level pre-tokenizer cuts at every quote and space, so JSON calls made the generated
# messages 60% longer than Python-list calls; with these, 5% longer and whole conversations 5%
# shorter (tool results are JSON too). Measured on the demo seeds' demonstrations, default sizes.
JSON_PIECES = ['\n{"name": "', '", "arguments": {"', '", "arguments": {}}\n', '"}}\n', "}}\n", '": "', '", "']


def tokenizer_corpus(prompt: PromptConfig) -> list[str]:
    """Texts the tokenizer learns from: all tool docs of TOKENIZER_BENCHMARK (both listing modes) and its train
    seeds' demonstrations rendered by CHAT_TEMPLATE, cut at the special tokens (which are never merged into others).

    Train split only: the tokenizer must not learn merges from held-out test conversations.
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    bench = make_benchmark(TOKENIZER_BENCHMARK, prompt=prompt)
    catalog = bench.tool_catalog()
    texts = [compact_tools(catalog), json_tools(catalog)]
    special = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))
    for task in bench.seeds("train"):
        env = bench.environment(task, Path("."))  # BFCL multi-turn writes nothing
        tools = env.tools()
        (rendered,), _ = render_jinja_template(
            [demonstration(env, bench.reference_policy(task))], tools=tools, chat_template=CHAT_TEMPLATE
        )
        texts.extend(special.split(rendered))
    return [t for t in texts if t]


def train_tokenizer(cfg: TinyModelConfig):
    """Byte-level BPE over the corpus, wrapped as a PreTrainedTokenizerFast with the chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab - len(JSON_PIECES),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tokenizer_corpus(cfg.prompt), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        bos_token=None,
        additional_special_tokens=[IM_START, TOOL_CALL_OPEN, TOOL_CALL_CLOSE],
        model_max_length=cfg.max_positions,
        padding_side="left",
    )
    fast.add_tokens([AddedToken(t, normalized=False, special=False) for t in JSON_PIECES])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(cfg: TinyModelConfig, tokenizer):
    """A freshly initialised causal LM of the configured size (tied embeddings)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

    torch.manual_seed(cfg.seed)
    config_cls = Qwen3Config if cfg.arch == "qwen3" else Qwen2Config
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        intermediate_size=cfg.ffn,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        head_dim=cfg.hidden // cfg.heads,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def write_card(out: str | Path, card: dict[str, Any]) -> None:
    (Path(out) / MODEL_CARD).write_text(json.dumps(card, indent=2, default=str) + "\n")


def read_card(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / MODEL_CARD
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def init_tiny(cfg: TinyModelConfig, out: str | Path, progress=None) -> dict[str, Any]:
    """Train the tokenizer, build the model, save both and the card to `out`; returns the card.

    `progress(step_name)` is called before each stage (model build progress for the CLI).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    step = progress or (lambda _name: None)
    step("tokenizer")
    tokenizer = train_tokenizer(cfg)
    step("model")
    model = build_model(cfg, tokenizer)
    step("save")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    card = {
        "kind": "rods-tiny",
        "chat_format": CHAT_FORMAT,
        "arch": cfg.arch,
        "params": n_params,
        "size": cfg.model_dump(exclude={"prompt"}),
        "prompt": cfg.prompt.model_dump(),
        "tokenizer": {"type": "byte-level BPE", "vocab": len(tokenizer), "trained_on": "tool docs + train seeds"},
        "stages": [{"stage": "init", "seconds": round(time.perf_counter() - t0, 1)}],
    }
    write_card(out, card)
    return card


class ModelFolderError(DoorError):
    """A model folder that cannot be used as a policy; the message names the folder and the fix."""


def load_tokenizer(model_dir: str | Path):
    """(tokenizer, PromptConfig) of a model folder (or of a LoRA adapter folder, which holds its tokenizer and
    card); the tokenizer loads as PreTrainedTokenizerFast for a tiny model.

    AutoTokenizer may rebuild a `tokenizers`-trained tokenizer differently (docs/ARCHITECTURE.md), so it is only
    used for folders without a rods_model.json (hub checkpoints). The chat template is probed here
    (rendering.renderer_for), so a template that cannot drive multi-turn rollouts fails before any work.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    card = read_card(model_dir)
    if card.get("kind") == "rods-tiny" and card.get("chat_format") != CHAT_FORMAT:
        raise ModelFolderError(
            f"{model_dir}: this tiny model was trained on an older chat format "
            f"({card.get('chat_format', 'Python-list tool calls')}, not {CHAT_FORMAT}); rebuild it "
            "(`rods model init-tiny` + `rods sft`, or delete the folder and let `rods model demo` build it)"
        )
    if card.get("kind") == "rods-tiny":
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.padding_side = "left"
    try:
        renderer_for(tokenizer)
    except TemplateError as e:
        raise ModelFolderError(f"{model_dir}: {e}") from e
    prompt = PromptConfig.model_validate(card["prompt"]) if "prompt" in card else PromptConfig(docs_mode="json")
    return tokenizer, prompt


def load_policy(model_dir: str | Path, init_kwargs: dict[str, Any] | None = None):
    """(model, tokenizer, PromptConfig) from a folder (load_tokenizer says how the tokenizer loads).

    `init_kwargs` go to `from_pretrained` (a training load passes policy/precision.model_init_kwargs: dtype,
    attention kernel); without them transformers loads the checkpoint's own dtype. A LoRA adapter folder (what a
    `model.lora` run saves as final/) loads its base model with the adapter merged in (policy/lora.py).
    """
    from transformers import AutoModelForCausalLM

    tokenizer, prompt = load_tokenizer(model_dir)
    if is_adapter_folder(model_dir):
        model = load_merged(model_dir, init_kwargs or {})
    else:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), **(init_kwargs or {}))
    return model, tokenizer, prompt
