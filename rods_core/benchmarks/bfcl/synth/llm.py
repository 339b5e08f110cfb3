"""The LLM side of synthesis: a client for any OpenAI-compatible chat endpoint, the stage prompts, and the
JSON read out of a model's answer (which is hostile input: parsed and checked, never executed).

The client is the `openai` package with a bounded timeout and bounded retries (connection errors,
timeouts, HTTP 408/409/429/5xx; exponential backoff from 0.5 s, at most 8 s, a server's Retry-After
honoured up to 2 minutes). The API key is read at request time from the environment variable whose
*name* is configured; it is never stored on the object, in configs, logs, errors or exports. Without
`api_key_env` no key is sent at all: a local server never receives the OPENAI_API_KEY of the shell.
Prompts are Markdown files, rods_core/benchmarks/bfcl/synth/prompts/<stage>_system.md and <stage>_user.md; the user
ones are filled through `$name` placeholders. A folder given as `prompts_dir` overrides them file by file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache

from rods_core.config.synth import SynthesisConfig


class LlmError(RuntimeError):
    """The endpoint is not configured, unreachable, or answered something unusable."""


# prompt name -> the placeholders its template must use (system prompts are sent as written)


# ----- the endpoint -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatEndpoint:
    """One OpenAI-compatible chat endpoint; `complete` returns the assistant's text or raises LlmError."""

    url: str | None
    model: str | None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    temperature: float = 0.7
    max_tokens: int = 1024

    def check(self) -> None:
        if not self.url or not self.model:
            raise LlmError(
                "the LLM backend needs an endpoint: set endpoint_url (e.g. http://127.0.0.1:8000/v1) and "
                "endpoint_model in the synthesis config, or use backend='template'"
            )
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise LlmError(f"environment variable {self.api_key_env} (named by api_key_env) is not set")

    @property
    def base_url(self) -> str:
        """The URL the client is given: a trailing /chat/completions is accepted and dropped."""
        return re.sub(r"/chat/completions/?$", "", (self.url or "").rstrip("/"))

    def _headers(self) -> dict:
        """Per request: the configured key read now, or no Authorization at all; never the shell's
        OPENAI_API_KEY, organization or project (the client would pick those up by itself)."""
        import openai

        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        return {
            "Authorization": f"Bearer {key}" if key else openai.omit,
            "OpenAI-Organization": openai.omit,
            "OpenAI-Project": openai.omit,
        }

    @property
    def _client(self):
        return _client_for(self.base_url, self.timeout_s, self.max_retries)

    def complete(self, messages: list[dict], seed: int | None = None) -> str:
        """The assistant's text for a chat; raises LlmError on any failure (after the bounded retries)."""
        import openai

        self.check()
        where = f"endpoint {self.base_url}"
        extra = {"seed": seed} if seed is not None else {}
        try:
            resp = self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                extra_headers=self._headers(),
                **extra,
            )
        except openai.APITimeoutError:
            raise LlmError(f"{where} did not answer within {self.timeout_s:g} s ({self.max_retries} retries)") from None
        except openai.APIConnectionError as e:
            cause = type(e.__cause__).__name__ if e.__cause__ else "connection error"
            raise LlmError(f"{where} unreachable: {cause} ({self.max_retries} retries)") from None
        except openai.APIStatusError as e:
            raise LlmError(f"{where} answered HTTP {e.status_code}") from None
        except (openai.OpenAIError, ValueError) as e:  # an unparseable body, say
            raise LlmError(f"{where} answered something that is not a chat completion ({type(e).__name__})") from None
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError, KeyError):
            content = None
        if not isinstance(content, str):
            raise LlmError(f"{where} answer has no choices[0].message.content")
        return content


@lru_cache(maxsize=8)
def _client_for(base_url: str, timeout_s: float, max_retries: int):
    """One client (and connection pool) per endpoint for the process, shared by stages and jobs; the
    openai client is safe to use from several threads."""
    import openai

    # api_key: a callable that holds nothing (the real key goes in `_headers`, read per request).
    return openai.OpenAI(base_url=base_url, api_key=lambda: "", timeout=timeout_s, max_retries=max_retries)


# ----- reading the answer -----------------------------------------------------------------------------
MAX_ANSWER_CHARS = 100_000  # longer answers are cut before parsing; a stage rejects what is left if unusable


def extract_json(text: str) -> object:
    """The first JSON object or list in a model's answer (tolerates ```json fences and chatter)."""
    text = str(text)[:MAX_ANSWER_CHARS]
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidate = m.group(1) if m else text
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise LlmError("the model's answer holds no JSON")
    try:
        obj, _ = json.JSONDecoder().raw_decode(candidate[start:])
    except json.JSONDecodeError as e:
        raise LlmError(f"the model's answer is not valid JSON: {e.msg}") from None
    except RecursionError:
        raise LlmError("the model's answer nests JSON too deeply") from None
    return obj


def endpoint_of(cfg: SynthesisConfig) -> ChatEndpoint:
    """The chat endpoint a synthesis config names (backend 'llm' and the critic)."""
    return ChatEndpoint(
        cfg.endpoint_url,
        cfg.endpoint_model,
        cfg.api_key_env,
        timeout_s=cfg.llm_timeout_s,
        max_retries=cfg.llm_max_retries,
        temperature=cfg.llm_temperature,
        max_tokens=cfg.llm_max_tokens,
    )
