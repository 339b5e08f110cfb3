"""Helpers for the policy tests: tokenizers with the tiny and the Qwen3-style fixture templates, and a
scripted policy that replays a task's demonstration exactly as the tokenizer's template renders it."""

from __future__ import annotations

from pathlib import Path

from rods_core.benchmarks.bfcl.benchmark import BfclMultiTurn
from rods_core.benchmarks.protocols import demonstration
from rods_core.config import PromptConfig
from rods_core.policy.generation import ScriptedGenerator
from rods_core.policy.rendering import renderer_for

FIXTURE_TEMPLATE = (Path(__file__).parent / "fixtures" / "qwen3_style_chat_template.jinja").read_text()


def load_tokenizer(model_dir, template: str | None = None):
    """A fresh tokenizer object from the folder, with `template` as its chat template when given."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    if template is not None:
        tok.chat_template = template
    return tok


def demo_texts(tok, task, prompt: PromptConfig | None = None):
    """(assistant texts as the template renders them, the demonstration's messages, the episode's tools)."""
    bench = BfclMultiTurn(prompt or PromptConfig())
    env = bench.environment(task, Path("."))  # BFCL multi-turn writes nothing
    msgs, tools = demonstration(env, bench.reference_policy(task)), env.tools()
    r = renderer_for(tok)
    return [r.assistant_text(msgs[:i], m, tools) for i, m in enumerate(msgs) if m["role"] == "assistant"], msgs, tools


def replay(tok, texts: list[str]) -> ScriptedGenerator:
    """A scripted policy that writes `texts` in order (one episode at a time)."""
    it = iter(texts)
    return ScriptedGenerator(tok, lambda ctx: next(it))
