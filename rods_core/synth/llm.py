"""A minimal client for any OpenAI-compatible chat endpoint (a local vLLM server, say), over urllib.

The API key is read at call time from the environment variable whose *name* is configured; the key
itself is never stored on the object, in configs, in logs, in errors or in exports.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass


class LlmError(RuntimeError):
    """The endpoint is not configured, unreachable, or answered something unusable."""


@dataclass(frozen=True)
class ChatEndpoint:
    url: str | None
    model: str | None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    temperature: float = 0.7

    def check(self) -> None:
        if not self.url or not self.model:
            raise LlmError(
                "the LLM backend needs an endpoint: set endpoint_url (e.g. http://127.0.0.1:8000/v1) and "
                "endpoint_model in the synthesis config, or use backend='template'"
            )
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise LlmError(f"environment variable {self.api_key_env} (named by api_key_env) is not set")

    @property
    def chat_url(self) -> str:
        base = (self.url or "").rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def complete(self, messages: list[dict]) -> str:
        """The assistant's text for a chat; raises LlmError on any failure."""
        self.check()
        body = json.dumps({"model": self.model, "messages": messages, "temperature": self.temperature}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ[self.api_key_env]
        req = urllib.request.Request(self.chat_url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raise LlmError(f"endpoint {self.chat_url} answered HTTP {e.code}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise LlmError(f"endpoint {self.chat_url} unreachable: {type(e).__name__}") from None
        except json.JSONDecodeError:
            raise LlmError(f"endpoint {self.chat_url} answered something that is not JSON") from None
        try:
            return str(data["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            raise LlmError("endpoint answer has no choices[0].message.content") from None


def extract_json(text: str) -> object:
    """The first JSON object or list in a model's answer (tolerates ```json fences and chatter)."""
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidate = m.group(1) if m else text
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise LlmError("the model's answer holds no JSON")
    try:
        obj, _ = json.JSONDecoder().raw_decode(candidate[start:])
    except json.JSONDecodeError as e:
        raise LlmError(f"the model's answer is not valid JSON: {e.msg}") from None
    return obj
