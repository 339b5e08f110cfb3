"""Batched generation that keeps every episode's KV cache across the messages of a conversation.

`HFGenerator` re-reads each episode's whole context for every assistant message, so a 10-message
episode of 700 tokens costs ~7,000 prefill tokens; on 2 CPU cores that dominates rollouts. Here the
batch keeps one KV cache: each call feeds only the tokens appended since the last call (the environment's
and the user's, left-padded to a common width) and then decodes token by token. Rows that are idle
(finished episodes) or done generating are fed padding with attention mask 0, so the cache holds masked
holes; positions come from each row's count of real tokens, so the model sees exactly the sequence it
would see without the holes. Rows are matched to contexts by prefix and rows no longer asked for
(finished episodes) are dropped; any context that does not extend a cached row starts a fresh batch. Call `reset()` after the weights change.
"""

from __future__ import annotations

import time

from rods_core.policy.generation import Completion, GenerationStats, SamplingConfig


def _sample(logits, sampling: SamplingConfig, torch):
    """Next tokens and their logprobs at the sampling temperature (greedy when temperature is 0)."""
    if sampling.temperature == 0:
        logp = torch.log_softmax(logits.float(), dim=-1)
        tok = logp.argmax(dim=-1)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
    logp = torch.log_softmax(logits.float() / sampling.temperature, dim=-1)
    probs = logp.exp()
    if sampling.top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < sampling.top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p * keep)
    tok = torch.multinomial(probs / probs.sum(-1, keepdim=True), 1).squeeze(-1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


class CachedHFGenerator:
    """Generator (see generation.py) over a causal LM with a persistent batched KV cache."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.stop_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_id
        self.stats = GenerationStats()
        self.reset()

    def reset(self) -> None:
        self.rows: list[list[int]] = []  # per row: the real tokens whose keys/values are in the cache
        self.cache = None
        self.mask = None  # (rows, cache length) attention mask, 0 at holes

    def _match(self, contexts: list[list[int]]) -> list[int] | None:
        """Row index for each context (its cached tokens are a prefix of it), or None."""
        free = list(range(len(self.rows)))
        out = []
        for ctx in contexts:
            hit = next(
                (r for r in free if len(self.rows[r]) < len(ctx) and ctx[: len(self.rows[r])] == self.rows[r]), None
            )
            if hit is None:
                return None
            free.remove(hit)
            out.append(hit)
        return out

    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        import torch

        t0 = time.perf_counter()
        rows = self._match(contexts) if self.cache is not None else None
        if rows is None:
            self.reset()
            self.rows = [[] for _ in contexts]
            rows = list(range(len(contexts)))
        elif len(rows) < len(self.rows):
            rows = self._keep(rows, torch)
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self._generate(contexts, rows, sampling, torch)
        if was_training:
            self.model.train()
        self.stats.tokens += sum(len(c.ids) for c in out)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.sequences += len(out)
        return out

    def _keep(self, rows: list[int], torch) -> list[int]:
        """Drop the rows of finished episodes from the cache, so they cost nothing from now on."""
        keep = sorted(rows)
        self.cache.batch_select_indices(torch.tensor(keep))
        self.mask = self.mask[keep]
        self.rows = [self.rows[r] for r in keep]
        return [keep.index(r) for r in rows]

    def _forward(self, ids, new_mask, torch):
        """Feed (rows, width) tokens; new_mask marks real ones. Returns last-position logits."""
        n_real = torch.tensor([len(r) for r in self.rows])
        pos = (n_real[:, None] + new_mask.cumsum(-1) - 1).clamp(min=0)
        self.mask = new_mask if self.mask is None else torch.cat([self.mask, new_mask], dim=1)
        res = self.model(input_ids=ids, attention_mask=self.mask, position_ids=pos, cache=self.cache, use_cache=True)
        self.cache = res.cache
        return res.logits[:, -1, :]

    def _generate(self, contexts, rows, sampling: SamplingConfig, torch) -> list[Completion]:
        n = len(self.rows)
        chunks: list[list[int]] = [[] for _ in range(n)]
        for ctx, r in zip(contexts, rows, strict=True):
            chunks[r] = ctx[len(self.rows[r]) :]
        width = max(len(c) for c in chunks)
        ids = torch.tensor([[self.pad_id] * (width - len(c)) + c for c in chunks])
        new_mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunks])
        logits = self._forward(ids, new_mask, torch)
        for r in range(n):
            self.rows[r].extend(chunks[r])
        live = torch.zeros(n, dtype=torch.bool)
        live[rows] = True
        gen: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        for step in range(sampling.max_new_tokens):
            tok, lp = _sample(logits, sampling, torch)
            for r in live.nonzero().flatten().tolist():
                gen[r].append(int(tok[r]))
                lps[r].append(float(lp[r]))
                if tok[r] == self.stop_id:
                    live[r] = False
            if not live.any() or step == sampling.max_new_tokens - 1:
                break
            feed = torch.where(live, tok, torch.full_like(tok, self.pad_id))
            logits = self._forward(feed[:, None], live.long()[:, None], torch)
            for r in live.nonzero().flatten().tolist():
                self.rows[r].append(int(tok[r]))
        out = []
        for r in rows:
            finished = bool(gen[r]) and gen[r][-1] == self.stop_id
            out.append(Completion(gen[r], lps[r], finished))
        return out
