"""Batched multi-turn generation with a preallocated KV cache per episode and a lean decode step.

Why not `model.generate`: it re-reads each episode's whole context for every assistant message (a
10-message episode of 700 tokens costs ~7,000 prefill tokens), and on a 3.9M-parameter model on CPU
each decode step's time is per-operation overhead (mask building, cache concatenation, generation
bookkeeping), not arithmetic (profiled in bench/generation_bench.py --profile). Here:
- every episode keeps one row of a preallocated cache (layers x [rows, kv heads, capacity, head dim]);
  a row's real tokens sit contiguously at positions 0..len-1, so attention needs only `key <= query
  position` (no holes, no per-step mask concatenation) and writes go in place (no `torch.cat`);
- rows that start from the same prompt (a GRPO group) prefill it once and copy its keys/values;
- when a message ends, only the tokens appended since (environment and user messages) are fed, in the
  same forward as the other rows' next tokens;
- the decode step runs the model's own submodules (norms, projections, MLP, rotary embedding and
  `apply_rotary_pos_emb` from its modeling file), so the numbers are the model's; only the cache and the
  attention call (grouped-query heads attend without copying K/V) are this module's;
- tokens, logprobs and stop flags stay in tensors until the message is done (no per-token Python loop
  over rows);
- `stream` batches continuously: a row whose message ends hands it to the episode at once and starts its
  next message at the next decode step, instead of waiting for the longest message of a round (each
  decode step costs the same per-operation overhead whatever the number of rows; figures in
  docs/measurements.md). `generate` is `stream` with episodes of one message.
Supported: decoder-only models of the Llama/Qwen2/Qwen3 layout (`model.model.layers[i].self_attn.{q,k,v,o}_proj`,
optional `q_norm`/`k_norm`, `mlp`, rotary embedding), no sliding window. `supports(model)` says whether a
model fits; `backends.choose_generator` falls back to HFGenerator (plain `generate`) when it does not.
The cache lives for one `stream` call, so it never outlives the weights it was computed with.
"""

from __future__ import annotations

import sys
import time

from rods_core.config import SamplingConfig
from rods_core.policy.generation import Completion, GenerationStats, OnMessage

_CAPACITY_QUANTUM = 256  # cache capacity grows in multiples of this many positions
# Prefill runs in groups of rows of about this many packed tokens: the elementwise ops (norms, SiLU,
# rotary) are memory-bound, so a block whose activations leave the CPU cache runs slower per token
# (docs/measurements.md, "Choices inside the decoder").
_PREFILL_TOKENS = 2048


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
    # inverse-CDF sampling: one uniform number per row and a binary search in the cumulative sum; the
    # alternatives cost more than a decode step on CPU (docs/measurements.md, "Choices inside the decoder")
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[0], 1, dtype=cdf.dtype, device=cdf.device) * cdf[:, -1:]
    tok = torch.searchsorted(cdf, u).squeeze(-1).clamp(max=probs.shape[-1] - 1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


_MODEL_TYPES = ("llama", "qwen2", "qwen3")  # layouts whose forward the decode step reproduces exactly


def _decoder_parts(model):
    """(embed, layers, final norm, lm_head, rotary) of a Llama/Qwen-layout causal LM, or None."""
    if getattr(model.config, "model_type", None) not in _MODEL_TYPES:
        return None
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    needed = ("embed_tokens", "norm", "rotary_emb")
    if layers is None or not all(hasattr(inner, n) for n in needed) or not hasattr(model, "lm_head"):
        return None
    cfg = model.config
    if getattr(cfg, "use_sliding_window", False) or any(
        t != "full_attention" for t in (getattr(cfg, "layer_types", None) or [])
    ):
        return None
    for layer in layers:
        attn = getattr(layer, "self_attn", None)
        if attn is None or not all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim")):
            return None
        if not all(hasattr(layer, n) for n in ("input_layernorm", "post_attention_layernorm", "mlp")):
            return None
    return inner.embed_tokens, layers, inner.norm, model.lm_head, inner.rotary_emb


def _groups(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive row ranges [first, stop) of at most `budget` tokens each (a larger row stands alone)."""
    out, first, total = [], 0, 0
    for r, n in enumerate(sizes):
        if total and total + n > budget:
            out.append((first, r))
            first, total = r, 0
        total += n
    out.append((first, len(sizes)))
    return out


def _pack(chunks: list[list[int]], device, torch):
    """Rows' new tokens packed in row order: (token ids, row of each token, its slot within its row)."""
    ids = torch.tensor([t for c in chunks for t in c], device=device)
    rows = torch.tensor([r for r, c in enumerate(chunks) for _ in c], device=device)
    slot = torch.tensor([j for c in chunks for j in range(len(c))], device=device)
    return ids, rows, slot


def _first_copies(chunks: list[list[int]]) -> list[int]:
    """For each chunk, the index of the first chunk equal to it."""
    seen: dict[tuple[int, ...], int] = {}
    return [seen.setdefault(tuple(c), i) for i, c in enumerate(chunks)]


def supports(model) -> bool:
    """Whether the lean decode step knows this model's layout."""
    return _decoder_parts(model) is not None


class CachedHFGenerator:
    """Generator (see generation.py) over a Llama/Qwen-layout causal LM with a persistent batched KV cache."""

    def __init__(self, model, tokenizer):
        parts = _decoder_parts(model)
        if parts is None:
            raise ValueError(
                f"{type(model).__name__}: not a Llama/Qwen-layout decoder without sliding window; "
                "use HFGenerator (plain generate) for this model"
            )
        self.model, self.tokenizer = model, tokenizer
        self.embed, self.layers, self.norm, self.lm_head, self.rotary = parts
        attn = self.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.n_kv = model.config.num_key_value_heads
        self.n_heads = model.config.num_attention_heads
        self.scaling = attn.scaling
        # the modeling file's own rotary application (numerics identical to the model's forward)
        self.apply_rope = sys.modules[type(attn).__module__].apply_rotary_pos_emb
        self.fp32 = str(next(model.parameters()).dtype) == "torch.float32"
        self.stop_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_id
        self.stats = GenerationStats()
        self.reset()

    def reset(self) -> None:
        self.rows: list[list[int]] = []  # per row: the real tokens whose keys/values are in the cache
        self.k: list = []  # per layer: (rows, kv heads, capacity, head dim)
        self.v: list = []
        self.lens = None  # (rows,) real tokens per row

    # ----- bookkeeping (once per call, not per token) ----------------------------------------------
    def _start(self, n_rows: int, torch) -> None:
        self.rows = [[] for _ in range(n_rows)]
        self.lens = torch.zeros(n_rows, dtype=torch.long, device=self.model.device)
        self.k, self.v = [], []

    def _select(self, rows: list[int], torch) -> None:
        """Keep only `rows`, in that order (finished episodes cost nothing from now on)."""
        if rows == list(range(len(self.rows))):
            return
        idx = torch.tensor(rows, device=self.model.device)
        self.k = [k.index_select(0, idx) for k in self.k]
        self.v = [v.index_select(0, idx) for v in self.v]
        self.lens = self.lens.index_select(0, idx)
        self.rows = [list(self.rows[r]) for r in rows]  # a row may be picked twice (a shared prefill)

    def _reserve(self, need: int, torch) -> None:
        """Make every layer's cache hold at least `need` positions."""
        cap = self.k[0].shape[2] if self.k else 0
        if need <= cap:
            return
        new_cap = -(-max(need, int(cap * 1.5)) // _CAPACITY_QUANTUM) * _CAPACITY_QUANTUM
        p = next(self.model.parameters())
        shape = (len(self.rows), self.n_kv, new_cap, self.head_dim)
        for store in (self.k, self.v):
            for i in range(len(self.layers)):
                fresh = torch.zeros(shape, dtype=p.dtype, device=p.device)
                if i < len(store):
                    fresh[:, :, :cap] = store[i]
                    store[i] = fresh
                else:
                    store.append(fresh)

    # ----- the model, one forward over a (rows, width) block ------------------------------------------
    def _forward(self, ids, rows, slot, pos, ks: list, vs: list, torch):
        """Hidden states after the final norm of T packed tokens: token t is `ids[t]` at position `pos[t]`,
        the `slot[t]`-th new token of working row `rows[t]`; `ks`/`vs` are the per-layer caches of the working
        rows (views or copies of the main cache).

        Norms, projections and the MLP run on the packed tokens (no padding); only attention lays them out
        by row, (rows, kv heads, group x width, head dim), where a query at position p reads keys 0..p of
        its row (its own key is written first)."""
        n_rows, width = ks[0].shape[0], int(slot.max()) + 1
        g, d = self.n_heads // self.n_kv, self.head_dim
        visible = int(pos.max()) + 1
        x = self.embed(ids)
        cos, sin = self.rotary(x[None], pos[None])
        keys = torch.arange(visible, device=pos.device)
        one_per_row = width == 1 and len(ids) == n_rows  # a decode step: token t is row t's next token
        counts = torch.bincount(rows, minlength=n_rows)
        multi = (counts > 1).nonzero().flatten()
        # A continuous-batching step: every row feeds a token and a few feed several (a message's tool results
        # and next user turn). Every row's last token attends as in a decode step; only the few rows lay out
        # their tokens in a grid, so the grid is (few rows x their width), not (all rows x the widest).
        split = not one_per_row and bool((counts > 0).all()) and 4 * len(multi) <= n_rows
        if split:
            last = torch.cumsum(counts, 0) - 1  # packed index of each row's last token (rows are in order)
            sub = torch.full((n_rows,), -1, dtype=torch.long, device=pos.device)
            sub[multi] = torch.arange(len(multi), device=pos.device)
            in_multi = (sub[rows] >= 0).nonzero().flatten()  # the packed tokens of the several-token rows
            m_rows, m_slot = sub[rows[in_multi]], slot[in_multi]
            last_mask = (keys[None, :] <= pos[last][:, None])[:, None, None, :].expand(n_rows, 1, g, visible)
            m_grid = torch.zeros(len(multi), width, dtype=pos.dtype, device=pos.device)
            m_grid[m_rows, m_slot] = pos[in_multi]
            m_mask = (keys[None, None, :] <= m_grid[:, :, None]).unsqueeze(1).expand(len(multi), g, width, visible)
            m_mask = m_mask.reshape(len(multi), 1, g * width, visible)
        else:
            pos_grid = torch.zeros(n_rows, width, dtype=pos.dtype, device=pos.device)  # padding slots see key 0
            pos_grid[rows, slot] = pos
            mask = (keys[None, None, :] <= pos_grid[:, :, None]).unsqueeze(1).expand(n_rows, g, width, visible)
            mask = mask.reshape(n_rows, 1, g * width, visible)
        norm = self._norm
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = norm(layer.input_layernorm, x)
            q = attn.q_proj(h).view(-1, self.n_heads, d)
            k = attn.k_proj(h).view(-1, self.n_kv, d)
            if hasattr(attn, "q_norm"):
                q, k = norm(attn.q_norm, q), norm(attn.k_norm, k)
            v = attn.v_proj(h).view(-1, self.n_kv, d)
            q, k = self.apply_rope(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
            ks[i][rows, :, pos] = k[0].transpose(0, 1)  # in place, at each token's row and position
            vs[i][rows, :, pos] = v
            # grouped-query attention without repeating K/V: head h = kv * g + j attends with kv head kv
            if split:
                out = self._split_attention(q[0].transpose(0, 1), ks[i], vs[i], visible, last, last_mask,
                                            multi, in_multi, m_rows, m_slot, m_mask, width, torch)  # fmt: skip
            elif one_per_row:
                qg = q[0].transpose(0, 1).reshape(n_rows, self.n_kv, g, d)
                out = torch.nn.functional.scaled_dot_product_attention(
                    qg, ks[i][:, :, :visible], vs[i][:, :, :visible], attn_mask=mask, scale=self.scaling
                ).reshape(n_rows, self.n_heads * d)
            else:
                q_grid = q.new_zeros(n_rows, width, self.n_heads, d)
                q_grid[rows, slot] = q[0].transpose(0, 1)
                qg = q_grid.permute(0, 2, 1, 3).reshape(n_rows, self.n_kv, g * width, d)
                out = torch.nn.functional.scaled_dot_product_attention(
                    qg, ks[i][:, :, :visible], vs[i][:, :, :visible], attn_mask=mask, scale=self.scaling
                )
                out = out.view(n_rows, self.n_kv, g, width, d).permute(0, 3, 1, 2, 4)[rows, slot]
                out = out.reshape(-1, self.n_heads * d)
            x = x + attn.o_proj(out)
            x = x + layer.mlp(norm(layer.post_attention_layernorm, x))
        return norm(self.norm, x)

    def _split_attention(
        self, q, k, v, visible, last, last_mask, multi, in_multi, m_rows, m_slot, m_mask, width, torch
    ):
        """Attention output (tokens, heads x head dim) of a continuous-batching step: each row's last token
        against its row's keys (one query a row, as in decode), then the several-token rows' tokens in a
        grid over a copy of just their keys; a several-token row's last token takes the grid's value."""
        n_rows, g, d = k.shape[0], self.n_heads // self.n_kv, self.head_dim
        sdpa = torch.nn.functional.scaled_dot_product_attention
        out = q.new_empty(q.shape[0], self.n_heads * d)
        q_last = q[last].reshape(n_rows, self.n_kv, g, d)
        kv = k[:, :, :visible], v[:, :, :visible]
        out[last] = sdpa(q_last, *kv, attn_mask=last_mask, scale=self.scaling).reshape(n_rows, self.n_heads * d)
        q_grid = q.new_zeros(len(multi), width, self.n_heads, d)
        q_grid[m_rows, m_slot] = q[in_multi]
        q_grid = q_grid.permute(0, 2, 1, 3).reshape(len(multi), self.n_kv, g * width, d)
        m_k, m_v = k[multi, :, :visible], v[multi, :, :visible]
        m_out = sdpa(q_grid, m_k, m_v, attn_mask=m_mask, scale=self.scaling)
        m_out = m_out.view(len(multi), self.n_kv, g, width, d).permute(0, 3, 1, 2, 4)[m_rows, m_slot]
        out[in_multi] = m_out.reshape(-1, self.n_heads * d)
        return out

    def _norm(self, module, x):
        """RMSNorm: fp32 through torch's fused rms_norm (the same products as the module's, one op instead
        of eight; a decode step runs 17 of them), other dtypes through the module's own upcasting."""
        if self.fp32:
            import torch

            return torch.nn.functional.rms_norm(x, (x.shape[-1],), module.weight, module.variance_epsilon)
        return module(x)

    # ----- the Generator interface ----------------------------------------------------------------
    def generate(self, contexts: list[list[int]], sampling: SamplingConfig) -> list[Completion]:
        """One message per context: `stream` with episodes of one message."""
        out: list[Completion | None] = [None] * len(contexts)

        def keep(i: int, comp: Completion) -> None:
            out[i] = comp

        self.stream(contexts, keep, sampling)
        return out

    def stream(self, contexts: list[list[int]], on_message: OnMessage, sampling: SamplingConfig) -> None:
        """Generate every row's messages back to back (continuous batching) until each row's episode ends
        (`Generator.stream`); the time spent in `on_message` is not counted in `stats.seconds`."""
        import torch

        t0, handled = time.perf_counter(), [0.0]

        def timed(i: int, comp: Completion) -> list[int] | None:
            t = time.perf_counter()
            try:
                return on_message(i, comp)
            finally:
                handled[0] += time.perf_counter() - t

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                tokens = self._stream(contexts, timed, sampling, torch)
        finally:
            self.model.train(was_training)
            self.reset()  # every episode is over: nothing in the cache can be reused
        self.stats.tokens += tokens
        self.stats.seconds += time.perf_counter() - t0 - handled[0]
        self.stats.calls += 1
        self.stats.sequences += len(contexts)

    def _stream(self, contexts, on_message, sampling: SamplingConfig, torch) -> int:
        dev, m = self.model.device, sampling.max_new_tokens
        episode = list(range(len(contexts)))  # working row -> index into `contexts`
        logits = self.lm_head(self._prefill_fresh(contexts, sampling, torch))
        n = len(episode)
        gen = torch.full((n, m), self.pad_id, dtype=torch.long, device=dev)  # each row's current message
        lps = torch.zeros((n, m), dtype=torch.float32, device=dev)
        n_gen = torch.zeros(n, dtype=torch.long, device=dev)
        over = torch.zeros(n, dtype=torch.bool, device=dev)  # the row's episode has ended
        tokens = 0
        while True:
            tok, lp = _sample(logits, sampling, torch)
            live = ~over
            at = torch.arange(n, device=dev)
            gen[at, n_gen], lps[at, n_gen] = tok, lp  # an ended row writes at column 0, never read again
            n_gen += live
            ended = live & ((tok == self.stop_id) | (n_gen >= m))
            chunks: dict[int, list[int]] = {}
            for r in ended.nonzero().flatten().tolist():  # the step's one host sync
                k = int(n_gen[r])
                ids = gen[r, :k].tolist()
                self.rows[r].extend(ids[:-1])  # the cache holds every token but the final one, never fed back
                tokens += k
                context = on_message(episode[r], Completion(ids, lps[r, :k].tolist(), ids[-1] == self.stop_id))
                n_gen[r] = 0
                if context is None:
                    over[r] = True
                    continue
                if context[: len(self.rows[r])] != self.rows[r]:
                    # a fresh context (a new session evaluated as BFCL does): the row starts over at position
                    # 0; its old keys are overwritten as the new ones are written, and masked until then
                    self.rows[r] = []
                    self.lens[r] = 0
                chunks[r] = context[len(self.rows[r]) :]
            if bool(over.all()):
                self._check_lengths()
                return tokens
            if 4 * int(over.sum()) >= n and n >= 4:  # rows whose episode ended stop costing compute and reads
                keep = (~over).nonzero().flatten()
                kept = keep.tolist()
                self._select(kept, torch)
                episode = [episode[r] for r in kept]
                chunks = {new: chunks[old] for new, old in enumerate(kept) if old in chunks}
                gen, lps, n_gen, over, tok = gen[keep], lps[keep], n_gen[keep], over[keep], tok[keep]
                ended, n = ended[keep], len(episode)
            # every row feeds: its next token, its new chunk, or (episode over) a pad that lands past its
            # length and never advances it
            going = ~over & ~ended
            fed = torch.where(going, tok, torch.full_like(tok, self.pad_id))
            if not chunks:
                one = torch.arange(n, device=dev)
                hidden = self._forward(fed, one, torch.zeros_like(one), self.lens, self.k, self.v, torch)
                self.lens = self.lens + going
            else:
                lens = self.lens.tolist()
                self._reserve(max(lens[r] + len(c) for r, c in chunks.items()) + m + 1, torch)
                fed_list = fed.tolist()
                ids, rows, slot = _pack([chunks.get(r, [fed_list[r]]) for r in range(n)], dev, torch)
                hidden = self._forward(ids, rows, slot, self.lens[rows] + slot, self.k, self.v, torch)
                hidden = hidden[torch.cumsum(torch.bincount(rows, minlength=n), 0) - 1]
                for r, c in chunks.items():
                    self.rows[r].extend(c)
                grow = going.long()
                grow[list(chunks)] = torch.tensor([len(c) for c in chunks.values()], device=dev)
                self.lens = self.lens + grow
            logits = self.lm_head(hidden)

    def _prefill(self, chunks: list[list[int]], sampling: SamplingConfig, torch):
        """Feed each row its new tokens (packed, in groups of about _PREFILL_TOKENS) and return the final
        hidden state of each row's last token; the rows' lengths and token lists advance."""
        dev = self.model.device
        lens = self.lens
        self._reserve(int(lens.max()) + max(len(c) for c in chunks) + sampling.max_new_tokens + 1, torch)
        n_new = torch.tensor([len(c) for c in chunks], device=dev)
        last = []
        for first, stop in _groups([len(c) for c in chunks], _PREFILL_TOKENS):
            ids, rows, slot = _pack(chunks[first:stop], dev, torch)
            pos = lens[first:stop][rows] + slot
            ks, vs = [k[first:stop] for k in self.k], [v[first:stop] for v in self.v]  # views of the cache
            hidden = self._forward(ids, rows, slot, pos, ks, vs, torch)
            ends = torch.cumsum(n_new[first:stop], 0) - 1  # each row's last token in the packed block
            last.append(hidden[ends])
        self.lens = lens + n_new
        for row, chunk in zip(self.rows, chunks, strict=True):
            row.extend(chunk)
        return torch.cat(last)

    def _prefill_fresh(self, contexts: list[list[int]], sampling: SamplingConfig, torch):
        """`_prefill` of whole contexts into a fresh cache of one row each.

        A GRPO group's G rollouts start from one prompt (~180 of a demo episode's ~450 tokens): each distinct
        context is prefilled once and its keys/values copied to every row that starts from it (the saving:
        docs/measurements.md)."""
        first = _first_copies(contexts)
        distinct = sorted(set(first))
        self._start(len(distinct), torch)
        hidden = self._prefill([contexts[r] for r in distinct], sampling, torch)
        if len(distinct) == len(contexts):
            return hidden
        where = {r: i for i, r in enumerate(distinct)}
        pick = [where[f] for f in first]
        self._select(pick, torch)
        return hidden[torch.tensor(pick, device=self.model.device)]

    def _check_lengths(self) -> None:
        got = self.lens.tolist()
        want = [len(r) for r in self.rows]
        if got != want:  # an internal invariant: a mismatch would silently corrupt every later message
            raise RuntimeError(f"KV cache bookkeeping broke: lengths {got[:4]} vs rows {want[:4]}")
