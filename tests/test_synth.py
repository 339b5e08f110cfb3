"""Synthesis pipeline: yield over train seeds, structure / replay / leak invariants, no dependency leaks,
BFCL-faithful augmentation, the LLM backend against a local fake endpoint, refusal of test-split parents."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import typer
from typer.testing import CliRunner

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.seeds import leak_guard, load_seeds
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.synth import synthesize, synthesize_many
from rods_core.benchmarks.bfcl.synth.augment import apply_category
from rods_core.benchmarks.bfcl.synth.critique import replays_clean
from rods_core.benchmarks.bfcl.synth.execute import execute
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, LlmError, endpoint_of
from rods_core.benchmarks.bfcl.synth.plan import Planner, base_form
from rods_core.benchmarks.bfcl.synth.rewrite import LlmRewriter, TemplateRewriter, call_views, check_no_leak
from rods_core.benchmarks.bfcl.synth.values import substitute
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.synth_worker import SynthWorker
from rods_core.benchmarks.synthesis import StageError
from rods_core.benchmarks.task_files import read_tasks
from rods_core.benchmarks.toolcalls.parsing import parse_calls
from rods_core.config import SynthesisConfig

SEEDS = {t.id: t for t in load_seeds("train")}
FIFTY = list(SEEDS.values())[::8][:50]  # spread over the four categories
CFG = SynthesisConfig(n_per_parent=2, max_attempts=16, seed=3)


@pytest.fixture(scope="module")
def fifty():
    return [(p, synthesize(p, CFG.n_per_parent, set(), CFG)) for p in FIFTY]


def test_fifty_parents_are_mixed(fifty):
    assert len(fifty) == 50
    assert {p.category for p, _ in fifty} == {"base", "miss_func", "miss_param", "long_context"}


def test_most_train_seeds_yield_a_variant(fifty):
    yielded = sum(bool(r.accepted) for _, r in fifty)
    assert yielded / 50 >= 0.7, f"only {yielded}/50 parents yielded a variant"


def test_every_variant_keeps_signature_replays_and_is_not_test(fifty):
    n = 0
    for parent, res in fifty:
        psig = signature(parent)
        for v in res.accepted:
            n += 1
            vsig = signature(v)
            assert vsig.topology_hash == psig.topology_hash and vsig.depth == psig.depth, v.id
            assert score_calls(v, v.ground_truth).accuracy == 1.0, v.id
            replays_clean(v)  # raises on any failing call
            assert not leak_guard().is_test(v), v.id
            assert v.category == parent.category
            assert v.provenance.source == "synth" and v.provenance.parent_id == parent.id
            assert v.content_key() != parent.content_key()
    assert n >= 50


def test_variants_change_values_and_differ_from_each_other(fifty):
    keys, changed = set(), 0
    for parent, res in fifty:
        for v in res.accepted:
            assert v.content_key() not in keys
            keys.add(v.content_key())
            changed += v.ground_truth != parent.ground_truth
    assert changed / len(keys) >= 0.8


def test_rewrite_never_leaks_dependency_values(fifty):
    """Where the parent's call read a value from an earlier result, the variant's user text never states it."""
    checked = 0
    for parent, res in fifty:
        if not res.accepted:
            continue
        dep = [(i.index, p.param, p.index) for i in Planner(parent).infos for p in i.pieces if p.kind == "dep"]
        for v in res.accepted:
            calls = [(t, c) for t, turn in enumerate(v.ground_truth) for text in turn for c in parse_calls(text)]
            for idx, param, elem in dep:
                turn, call = calls[idx]
                value = call.kwargs[param] if elem is None else call.kwargs[param][elem]
                said = " ".join(v.user_texts[: turn + 1]).lower()
                assert str(value).lower() not in said, (v.id, param, value)
                checked += 1
    assert checked > 20


def test_per_stage_counts_chain(fifty):
    for _, res in fifty:
        c = res.counts()
        order = ["plan", "execute", "rewrite", "critique", "augment"]
        for a, b in zip(order, order[1:], strict=False):
            assert c[a]["accepted"] == c[b]["accepted"] + c[b]["rejected"]
        assert c["augment"]["accepted"] == len(res.accepted)
        assert c["plan"]["accepted"] + c["plan"]["rejected"] == len(res.attempts)


def test_same_seed_same_variants():
    p = SEEDS["multi_turn_base_10"] if "multi_turn_base_10" in SEEDS else FIFTY[0]
    a = synthesize(p, 2, set(), CFG)
    b = synthesize(p, 2, set(), CFG)
    assert [t.content_key() for t in a.accepted] == [t.content_key() for t in b.accepted]


def test_synthesize_many_refuses_test_parents_and_dedupes():
    variants, results = synthesize_many(FIFTY[:4], 2, None, CFG)
    keys = [v.content_key() for v in variants]
    assert len(keys) == len(set(keys)) == sum(len(r.accepted) for r in results) > 0
    with pytest.raises(ValueError, match="test"):
        synthesize_many([load_seeds("test")[0]], 1, None, CFG)


def test_pool_keys_exclude_duplicates():
    p = FIFTY[1]
    first = synthesize(p, 2, set(), CFG)
    assert first.accepted
    again = synthesize(p, 2, {t.content_key() for t in first.accepted}, CFG)
    assert not {t.content_key() for t in again.accepted} & {t.content_key() for t in first.accepted}


# ----- augmentation mirrors BFCL ----------------------------------------------------------------------
@pytest.mark.parametrize("category", ["miss_param", "miss_func"])
def test_augment_rebuilds_bfcl_category_from_base_form(category):
    """base_form undoes BFCL's edit and apply_category redoes it exactly, on every train scenario."""
    rebuilt = 0
    for t in load_seeds("train", (category,)):
        try:
            bf = base_form(t)
        except StageError:
            continue
        again = apply_category(bf.task, bf.segments, bf.spec)
        assert again.ground_truth == t.ground_truth
        assert again.user_texts == t.user_texts
        assert again.missed_function == t.missed_function
        base = SEEDS[t.id.replace(category, "base")]
        rebuilt += bf.task.ground_truth == base.ground_truth
    assert rebuilt >= 90


def test_miss_param_variant_withholds_then_supplies(fifty):
    seen = 0
    for parent, res in fifty:
        if parent.category != "miss_param":
            continue
        t = next(i for i, g in enumerate(parent.ground_truth) if not g)
        for v in res.accepted:
            assert v.ground_truth[t] == [] and v.ground_truth[t + 1] and v.user_texts[t + 1]
            seen += 1
    assert seen


# ----- rewrite ----------------------------------------------------------------------------------------
def test_substitute_whole_words_numbers_and_longest_match():
    assert substitute("the latest 'test' files", [("test", "draft")])[0] == "the latest 'draft' files"
    assert substitute("budget of $20,000 now", [(20000.0, 35000.0)])[0] == "budget of $35,000 now"
    assert substitute("copy report.txt, not report", [("report", "memo"), ("report.txt", "a.txt")])[0] == (
        "copy a.txt, not memo"
    )
    assert substitute("START the engine", [("START", "START")]) == ("START the engine", 0)


def _plan_with_dependency():
    parent = SEEDS.get("multi_turn_base_3") or FIFTY[0]
    planner = Planner(parent)
    assert any(p.kind == "dep" for i in planner.infos for p in i.pieces)
    import random

    for s in range(50):
        try:
            plan = planner.plan(random.Random(s), compose=True)
            return plan, execute(plan)
        except StageError:
            continue
    pytest.fail("no plan for the dependency parent")


def test_check_no_leak_rejects_a_stated_dependency_value():
    plan, ex = _plan_with_dependency()
    views = call_views(plan, ex)
    dep = next(v for turn in views for view in turn for v in view.dep_values)
    segments = [list(s) for s in TemplateRewriter().rewrite(plan, ex, __import__("random").Random(0)).segments]
    segments[0][0] += f" Use {dep}."
    with pytest.raises(StageError, match="leaks dependency value"):
        check_no_leak(plan, segments, views)


class _FakeChat(BaseHTTPRequestHandler):
    answer: str = ""
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.seen.append({"auth": self.headers.get("Authorization"), "body": body, "path": self.path})
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": _FakeChat.answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_endpoint():
    server = HTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeChat.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_llm_backend_uses_endpoint_and_keeps_key_secret(fake_endpoint, monkeypatch):
    import random

    plan, ex = _plan_with_dependency()
    turns = TemplateRewriter().rewrite(plan, ex, random.Random(1)).segments
    _FakeChat.answer = "Sure!\n```json\n" + json.dumps({"turns": [s[0] if len(s) == 1 else s for s in turns]}) + "\n```"
    monkeypatch.setenv("RODS_TEST_KEY", "sk-secret-123")
    cfg = SynthesisConfig(backend="llm", endpoint_url=fake_endpoint, endpoint_model="tiny", api_key_env="RODS_TEST_KEY")
    out = LlmRewriter(endpoint_of(cfg)).rewrite(plan, ex, random.Random(0))
    assert out.segments == turns and out.modes == ["llm"] * plan.n_turns
    req = _FakeChat.seen[-1]
    assert req["path"] == "/v1/chat/completions" and req["body"]["model"] == "tiny"
    assert req["auth"] == "Bearer sk-secret-123"
    assert "sk-secret" not in cfg.model_dump_json() and "sk-secret" not in repr(endpoint_of(cfg))
    # A leaking answer is rejected at the rewrite stage.
    dep = next(v for turn in call_views(plan, ex) for view in turn for v in view.dep_values)
    leaky = [list(s) for s in turns]
    leaky[0][0] += f" The value is {dep}."
    _FakeChat.answer = json.dumps({"turns": [s[0] if len(s) == 1 else s for s in leaky]})
    with pytest.raises(StageError, match="leaks"):
        LlmRewriter(endpoint_of(cfg)).rewrite(plan, ex, random.Random(0))


def test_llm_backend_pipeline_is_still_critiqued(fake_endpoint):
    """An endpoint that echoes the parent's words (old values) gets every candidate rejected, not accepted."""
    parent = SEEDS.get("multi_turn_base_6") or FIFTY[2]
    bf = base_form(parent)
    _FakeChat.answer = json.dumps({"turns": [s if len(s) > 1 else s[0] for s in bf.segments]})
    cfg = SynthesisConfig(
        backend="llm", endpoint_url=fake_endpoint, endpoint_model="m", max_attempts=6, perturb_config=False
    )
    res = synthesize(parent, 1, set(), cfg)
    c = res.counts()
    assert len(_FakeChat.seen) == c["execute"]["accepted"] > 0  # one request per candidate reaching Rewrite
    assert res.accepted == [] and c["critique"]["rejected"] + c["rewrite"]["rejected"] == c["execute"]["accepted"]


def test_llm_backend_refuses_without_endpoint(monkeypatch):
    with pytest.raises(LlmError, match="endpoint"):
        ChatEndpoint(None, None).check()
    monkeypatch.delenv("RODS_MISSING_KEY", raising=False)
    with pytest.raises(LlmError, match="RODS_MISSING_KEY"):
        ChatEndpoint("http://127.0.0.1:9/v1", "m", "RODS_MISSING_KEY").check()


# ----- refusal and CLI ---------------------------------------------------------------------------------
def test_refuses_test_split_parent():
    test_task = load_seeds("test")[0]
    with pytest.raises(ValueError, match="test"):
        synthesize(test_task, 1, set(), CFG)


def _cli():
    from rods_lab.cli.synth_cmd import synth

    app = typer.Typer()
    app.command()(synth)
    return app


def test_cli_refuses_test_split_id(tmp_path):
    tid = load_seeds("test")[0].id
    r = CliRunner().invoke(_cli(), ["--from", tid, "--n", "1", "--out", str(tmp_path / "v.jsonl")])
    assert r.exit_code == 2 and "test split" in r.output
    assert not (tmp_path / "v.jsonl").exists()


def test_cli_writes_variants_and_stage_counts(tmp_path):
    parent = FIFTY[4]
    out = tmp_path / "v.jsonl"
    r = CliRunner().invoke(_cli(), ["--from", parent.id, "--n", "2", "--out", str(out), "--json", "--seed", "1"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert set(report["stages"]) == {"plan", "execute", "rewrite", "critique", "augment"}
    variants = read_tasks(out, Task)
    assert len(variants) == report["accepted"] == report["stages"]["augment"]["accepted"]
    assert all(v.provenance.parent_id == parent.id for v in variants)


def test_rods_synth_over_fifty_train_seeds(tmp_path):
    """The Must-show through the command itself: >= 70% of 50 mixed train seeds yield a variant, and every
    variant read back from its --out file keeps the signature, replays to accuracy 1, and is not test data."""
    app, yielded, checked = _cli(), 0, 0
    for parent in FIFTY:
        out = tmp_path / f"{parent.id}.jsonl"
        r = CliRunner().invoke(app, ["--from", parent.id, "--n", "1", "--out", str(out), "--json", "--seed", "7"])
        assert r.exit_code == 0, r.output
        variants = read_tasks(out, Task)
        yielded += bool(variants)
        psig = signature(parent)
        for v in variants:
            assert (signature(v).topology_hash, signature(v).depth) == (psig.topology_hash, psig.depth)
            assert score_calls(v, v.ground_truth).accuracy == 1.0
            assert not leak_guard().is_test(v)
            checked += 1
    assert yielded >= 35 and checked == yielded


def test_cli_help():
    r = CliRunner().invoke(_cli(), ["--help"])
    assert r.exit_code == 0 and "--from" in r.output


# ----- worker ------------------------------------------------------------------------------------------
def test_worker_bounded_queue_and_nonblocking_drain():
    gate = threading.Event()

    def gated(parent, n, pool_keys, cfg):
        gate.wait(30)
        return synthesize(parent, n, pool_keys, cfg)

    worker = SynthWorker(SynthesisConfig(queue_size=1, n_per_parent=1, max_attempts=16), job=gated)
    try:
        assert worker.submit(FIFTY[0])
        assert not worker.submit(FIFTY[1])  # queue full: refused, not blocked
        assert worker.drain() == []  # nothing ready: returns at once
        gate.set()
        deadline = time.monotonic() + 60
        while worker.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        results = worker.drain()
        assert len(results) == 1 and results[0].accepted
        # The same parent again: what was handed out is in the worker's pool, so it is not handed out twice.
        first = {t.content_key() for t in results[0].accepted}
        assert first <= worker.pool_keys
        assert worker.submit(FIFTY[0])
        deadline = time.monotonic() + 60
        while worker.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        again = worker.drain()[0]
        assert not {t.content_key() for t in again.accepted} & first
        c = again.counts()
        assert c["augment"]["accepted"] == len(again.accepted)
    finally:
        worker.close()


def test_phrasings_name_real_functions_and_parameters():
    import re

    from rods_core.benchmarks.bfcl.environment import function_docs
    from rods_core.benchmarks.bfcl.synth.phrases import PHRASES, phrasings

    docs = function_docs()
    for key, templates in PHRASES.items():
        name, *conds = key.split(":")
        assert name in docs, key
        for cond in conds:
            assert cond.partition("=")[0] in docs[name].params, key
        for t in templates:
            assert set(re.findall(r"\{(\w+)\}", t)) <= set(docs[name].params), (key, t)
    assert phrasings("ls", {"a": True}) and not phrasings("ls", {"a": "x"})
    assert phrasings("lockDoors", {"unlock": True, "door": ["a"]}) == ["unlock the {door} doors"]
    assert "unlock the {door} doors" not in phrasings("lockDoors", {"unlock": False, "door": ["a"]})


def test_worker_drops_duplicates_across_concurrent_jobs_and_keeps_counts_consistent():
    worker = SynthWorker(SynthesisConfig(queue_size=4, n_per_parent=2, max_attempts=16), job=synthesize)
    try:
        assert worker.submit(FIFTY[0]) and worker.submit(FIFTY[0])  # same parent, same seed, same pool snapshot
        deadline = time.monotonic() + 60
        while worker.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        first, second = worker.drain()
        assert first.accepted and second.accepted == []
        c = second.counts()
        assert c["augment"]["accepted"] == 0 and c["augment"]["reasons"] == {
            "duplicates a variant handed out earlier": len(first.accepted)
        }
    finally:
        worker.close()


def test_long_context_variants_can_carry_distractor_files():
    def files(t):
        return json.dumps(t.initial_config).count('"type": "file"')

    parent = SEEDS["multi_turn_long_context_1"] if "multi_turn_long_context_1" in SEEDS else None
    parent = parent or next(
        t for t in SEEDS.values() if t.category == "long_context" and "GorillaFileSystem" in t.involved_classes
    )
    res = synthesize(
        parent, 2, set(), SynthesisConfig(long_context_distractors=8, perturb_config=False, max_attempts=16)
    )
    assert res.accepted
    for v in res.accepted:
        assert v.category == "long_context" and files(v) >= files(parent) + 8
        assert signature(v).topology_hash == signature(parent).topology_hash


def test_check_no_stale_rejects_words_that_keep_a_replaced_value():
    from rods_core.benchmarks.bfcl.synth.rewrite import check_no_stale

    plan, _ = _plan_with_dependency()
    old, new = next((o, n) for o, n in plan.value_map if o != n)
    check_no_stale(plan, [[f"please use {new}"]])
    with pytest.raises(StageError, match="replaced value"):
        check_no_stale(plan, [[f"please use {new}, not {old}"]])


def test_llm_critic_can_veto(fake_endpoint):
    parent = FIFTY[4]
    cfg = SynthesisConfig(llm_critic=True, endpoint_url=fake_endpoint, endpoint_model="judge", max_attempts=8)
    _FakeChat.answer = '{"accept": false, "reason": "turn 2 asks for something else"}'
    vetoed = synthesize(parent, 1, set(), cfg)
    assert vetoed.accepted == [] and "llm critic rejects" in str(vetoed.counts()["critique"]["reasons"])
    _FakeChat.answer = 'Looks fine. {"accept": true, "reason": "consistent"}'
    assert synthesize(parent, 1, set(), cfg).accepted
    assert _FakeChat.seen[-1]["body"]["model"] == "judge"


def test_cli_parent_from_a_task_file_and_content_leak_refusal(tmp_path):
    from rods_core.benchmarks.task_files import write_tasks

    variants, _ = synthesize_many([FIFTY[5]], 1, None, CFG)
    disguised = load_seeds("test")[3].model_copy(update={"id": "my_task_1"})
    tasks = tmp_path / "pool.jsonl"
    write_tasks(tasks, [*variants, disguised])
    out = tmp_path / "v.jsonl"
    r = CliRunner().invoke(_cli(), ["--from", variants[0].id, "--tasks", str(tasks), "--n", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert all(v.provenance.parent_id == variants[0].id for v in read_tasks(out, Task))
    r = CliRunner().invoke(_cli(), ["--from", "my_task_1", "--tasks", str(tasks), "--n", "1", "--out", str(out)])
    assert r.exit_code == 2 and "test-split" in r.output


def test_inferred_price_is_not_inherited_once_the_symbol_changed():
    """'Buy MSFT at the current price' (310.23) cannot keep that price for AAPL."""
    from rods_core.benchmarks.bfcl.synth.critique import _inherited
    from rods_core.benchmarks.bfcl.synth.values import CallInfo, Piece

    parent = CallInfo(
        0, 0, "place_order", {"order_type": "Buy", "symbol": "MSFT", "price": 310.23, "amount": 150}, "{}"
    )
    parent.pieces = [Piece("symbol", None, "MSFT", "said"), Piece("price", None, 310.23, "fixed")]
    same = parse_calls("place_order(order_type='Buy', symbol='MSFT', price=310.23, amount=150)")[0]
    moved = parse_calls("place_order(order_type='Buy', symbol='AAPL', price=310.23, amount=150)")[0]
    assert _inherited([parent], 0, "price", 310.23, True, [], same)
    assert not _inherited([parent], 0, "price", 310.23, True, [], moved)
    assert _inherited([parent], 0, "order_type", "Buy", True, [], moved)  # a word-inferred value stays
    assert not _inherited([parent], 0, "price", 310.23, False, [], same)  # reworded turns state everything


def test_process_worker_runs_beside_the_caller():
    with SynthWorker(SynthesisConfig(worker="process", n_per_parent=1, max_attempts=16), job=synthesize) as worker:
        assert worker.submit(FIFTY[0])
        deadline, results = time.monotonic() + 120, []
        while not results and time.monotonic() < deadline:
            results = worker.drain()
            time.sleep(0.05)
    assert results and results[0].accepted and results[0].parent_id == FIFTY[0].id
