"""Token-exact rendering of growing conversations through any chat template; rollouts and SFT share it.

A multi-turn rollout keeps the tokens the model generated and appends the tokens of what the environment
and the user say next. Those come from the model's own chat template by a prefix diff: render the
conversation before and after the new messages and keep the new suffix, starting right after the stop
token the model generated (templates may add a separator there, e.g. Qwen's newline). A fast path renders
only the appended messages; it is switched on per tokenizer only after a probe conversation showed that it
gives the same text. A template that renders the beginning of a conversation differently once more
messages follow (e.g. one that drops an earlier answer's reasoning) cannot give exact tokens: it raises
TemplateError saying where the renderings part, rather than yield silently wrong tokens.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_lookup",
        "description": "Look a word up.",
        "parameters": {
            "type": "object",
            "properties": {
                "word": {"type": "string", "description": "the word"},
                "limit": {"type": "integer", "description": "most results"},
            },
            "required": ["word"],
        },
    },
}


def _call(word: str, **extra) -> dict:
    return {"type": "function", "function": {"name": "probe_lookup", "arguments": {"word": word, **extra}}}


# Every shape a rollout produces: structured calls (demonstrations), raw generated text (rollouts store what
# the model wrote), several tool results, a user turn right after tool results (a turn cut by the step limit).
_PROBE = [
    {"role": "system", "content": "You look words up."},
    {"role": "user", "content": "Look up 'alpha' and \"beta\"."},
    {"role": "assistant", "content": "", "tool_calls": [_call("alpha"), _call("beta", limit=2)]},
    {"role": "tool", "content": '{"hits": 1}'},
    {"role": "tool", "content": '{"hits": 2}'},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Now gamma."},
    {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "probe_lookup", "arguments": {"word": "gamma"}}\n</tool_call>',
    },
    {"role": "tool", "content": "Error during execution: no gamma"},
    {"role": "user", "content": "Thanks."},
    {"role": "assistant", "content": "Done."},
]


class TemplateError(ValueError):
    """The chat template cannot render conversations token-exactly; the message says why."""


@dataclass
class Encoded:
    """A conversation's tokens and which of them the model writes (assistant text and its stop token)."""

    input_ids: list[int]
    assistant_masks: list[int]


def _assistant_spans(messages: list[dict]) -> list[tuple[int, int]]:
    """(index of each assistant message, index where the messages after it end)."""
    starts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return list(zip(starts, [*starts[1:], len(messages)], strict=True))


def _require_prefix(head: str, whole: str, what: str) -> None:
    if whole.startswith(head):
        return
    i = next((k for k, (a, b) in enumerate(zip(head, whole, strict=False)) if a != b), min(len(head), len(whole)))
    raise TemplateError(
        f"the chat template renders earlier messages differently once {what} follows (at character {i}: "
        f"{head[i : i + 60]!r} became {whole[i : i + 60]!r}); multi-turn rollouts append to tokens the model "
        "already saw, so the template must render a conversation's beginning the same whatever follows. Fix: give "
        "the model folder a chat template that renders each message the same wherever it sits (for a hybrid-"
        "thinking model, one that neither adds an empty <think> block to the last answer nor drops earlier ones)"
    )


class ChatRenderer:
    """One tokenizer's chat template used incrementally; get it with `renderer_for(tokenizer)`."""

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "chat_template", None):
            raise TemplateError("the tokenizer has no chat template; the model folder needs one")
        if tokenizer.eos_token_id is None:
            raise TemplateError("the tokenizer has no eos token, so nothing marks where an assistant message ends")
        self.tok, self.template = tokenizer, tokenizer.chat_template
        self.stop_id = tokenizer.eos_token_id
        self.stop = tokenizer.decode([self.stop_id], skip_special_tokens=False)
        self.tail, self.fast = self._probe()

    # ----- text ----------------------------------------------------------------------------------
    def render(self, messages: list[dict], tools: list[dict] | None, generation_prompt: bool) -> str:
        try:
            return self.tok.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=generation_prompt
            )
        except Exception as e:  # noqa: BLE001 - a template's own raise_exception or a Jinja error, with its words
            roles = ", ".join(m["role"] for m in messages)
            raise TemplateError(f"the chat template refused a conversation ({roles}): {type(e).__name__}: {e}") from e

    def _tail(self, rendered: str) -> str:
        """What the template writes after the last stop token (after an assistant message: its separator)."""
        end = rendered.rfind(self.stop)
        if end < 0:
            raise TemplateError(
                f"the chat template does not end assistant messages with the tokenizer's eos token {self.stop!r}; "
                "generation stops at that token, so the model could never end a message as the template shows it"
            )
        return rendered[end + len(self.stop) :]

    def assistant_text(self, history: list[dict], message: dict, tools: list[dict] | None) -> str:
        """What the model writes for `message` after `history` as the template renders it, stop token excluded."""
        start = self.render(history, tools, True)
        whole = self.render([*history, message], tools, False)
        _require_prefix(start, whole, "an assistant message")
        body = whole[len(start) :]
        self._tail(body)  # the message must end with the stop token
        return body[: body.rfind(self.stop)]

    def appended_text(self, history: list[dict], new: list[dict], tools: list[dict] | None) -> str:
        """The text after the stop token of `history`'s last (assistant) message: the template's separator,
        the `new` messages and the generation prompt."""
        if self.fast and new:
            return self.tail + self.render(new, None, True)
        return self._diff(history, new, tools)

    def _diff(self, history: list[dict], new: list[dict], tools: list[dict] | None) -> str:
        before = self.render(history, tools, False)
        after = self.render([*history, *new], tools, True)
        _require_prefix(before, after, f"a {new[0]['role']} message" if new else "the generation prompt")
        return self._tail(before) + after[len(before) :]

    # ----- tokens --------------------------------------------------------------------------------
    def ids(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False).input_ids

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        return self.ids(self.render(messages, tools, True))

    def appended_ids(self, history: list[dict], new: list[dict], tools: list[dict] | None) -> list[int]:
        return self.ids(self.appended_text(history, new, tools))

    def encode(self, messages: list[dict], tools: list[dict] | None) -> Encoded:
        """A whole conversation's tokens, built piece by piece exactly as a rollout builds them."""
        spans = _assistant_spans(messages)
        if not spans:
            raise ValueError("the conversation has no assistant message")
        ids = self.prompt_ids(messages[: spans[0][0]], tools)
        mask = [0] * len(ids)
        for i, end in spans:
            gen = self.ids(self.assistant_text(messages[:i], messages[i], tools)) + [self.stop_id]
            follows = messages[i + 1 : end]
            env = self.appended_ids(messages[: i + 1], follows, tools) if follows or end < len(messages) else []
            ids += gen + env
            mask += [1] * len(gen) + [0] * len(env)
        return Encoded(ids, mask)

    # ----- the probe -----------------------------------------------------------------------------
    def _probe(self) -> tuple[str, bool]:
        """Check the template on probe conversations (with and without a system message); returns the
        separator after an assistant message and whether rendering only the new messages is exact."""
        tails, fast = set(), True
        for conv in (_PROBE, _PROBE[1:]):
            for i, end in _assistant_spans(conv):
                self.assistant_text(conv[:i], conv[i], [_PROBE_TOOL])  # raises on a rewriting template
                new = conv[i + 1 : end]
                if not new:
                    continue
                exact = self._diff(conv[: i + 1], new, [_PROBE_TOOL])
                tail = self._tail(self.render(conv[: i + 1], [_PROBE_TOOL], False))
                tails.add(tail)
                try:
                    fast = fast and tail + self.render(new, None, True) == exact
                except TemplateError:  # the template will not render messages without their history
                    fast = False
        return (next(iter(tails)), fast) if len(tails) == 1 else ("", False)


_RENDERERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def renderer_for(tokenizer) -> ChatRenderer:
    """The tokenizer's renderer, probed once (again only if its chat template or eos token changed)."""
    r = _RENDERERS.get(tokenizer)
    if r is None or r.template != tokenizer.chat_template or r.stop_id != tokenizer.eos_token_id:
        r = _RENDERERS[tokenizer] = ChatRenderer(tokenizer)
    return r
