"""A third benchmark, written here in a few lines of the protocols, trains with GRPO through the same trainer:
its environment plays the episodes and its score is the reward GRPO learns from."""

from __future__ import annotations

import json

import torch
from pydantic import BaseModel

from rods_core.benchmarks.bfcl.tasks import Provenance
from rods_core.benchmarks.protocols import (
    EpisodeScore,
    RecordChecks,
    Step,
    scripted_policy,
    verify_with,
)
from rods_core.config import EpisodeConfig, RunConfig
from rods_core.policy.tiny import load_policy
from rods_core.trainer import RodsGRPOTrainer
from tests.conftest import smoke_config


class WordTask(BaseModel):
    """Say a given word; the reward grows with the reply's length (a signal with variance even for an
    untrained model), accuracy needs the word itself."""

    id: str
    word: str
    provenance: Provenance = Provenance()

    def content_key(self) -> str:
        return self.word

    def to_record(self) -> dict:
        return self.model_dump(mode="json")


class WordEnv:
    def __init__(self, task: WordTask):
        self.task, self.reply = task, ""

    def tools(self):
        return []

    def reset(self):
        return [{"role": "user", "content": f"Say {self.task.word}."}]

    def step(self, message):
        self.reply = message.get("content") or ""
        return Step([], True)

    def finish(self):
        pass

    def score(self):
        return EpisodeScore(min(1.0, len(self.reply) / 400), self.task.word in self.reply)


class WordVariants:
    """Variants of a word task: the word with one to n letters "s" added (never a held-out word)."""

    def variants(self, task, n, seed, pool_keys=()):
        from rods_core.benchmarks.synthesis import listed_result

        made = [
            task.model_copy(
                update={
                    "id": f"{task.id}_s{k + 1}",
                    "word": task.word + "s" * (k + 1),
                    "provenance": Provenance(source="synth", parent_id=task.id),
                }
            )
            for k in range(n)
        ]
        return listed_result(task.id, made, n, pool_keys)


class Words(RecordChecks):
    name, task_type, synthesizer, structure = "words", WordTask, WordVariants(), None
    WORDS = ("apple", "river", "stone", "cloud", "ember", "maple")

    def seeds(self, split):
        every = [WordTask(id=f"word_{i}", word=w) for i, w in enumerate(self.WORDS)]
        return [t for i, t in enumerate(every) if split == "all" or (i >= 4) == (split == "test")]

    def leak_reason(self, task):
        return "a held-out word" if task.word in self.WORDS[4:] else None

    def environment(self, task, workdir):
        return WordEnv(task)

    def reference_policy(self, task):  # the word, at the length of full marks
        return scripted_policy([{"role": "assistant", "content": f"{task.word} " * (400 // len(task.word))}])

    def verify(self, task, workdir):
        return verify_with(self, task, workdir)

    def render(self, task):
        return f"**{task.id}**: say {task.word}"

    def group_of(self, task):
        return "all"


# Two steps of Words with synthesis at once and its variants waiting for review (the run and registry tests)
WORDS_RUN = {
    "grpo.max_steps": 2,
    "seeds.subset": "all",
    "eval.split": "test",
    "method": "uniform_synth",  # parents drawn whatever their region: variants at once
    "synthesis.deterministic": True,  # step 1's variants are applied at step 2, whatever the load
    "buffer.review": "gated",  # they wait in the review queue
}


def test_grpo_trains_two_steps_on_a_benchmark_defined_in_a_test(tmp_path, tiny_model_dir):
    bench = Words()
    cfg = RunConfig.model_validate(
        smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2, "grpo.num_generations": 3})
    )
    tasks = {t.id: t for t in bench.seeds("train")}
    ids, seen = list(tasks), []
    model, tokenizer, prompt = load_policy(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(tmp_path / "ck"),
        draw=lambda n: [ids[i % len(ids)] for i in range(n)],
        task_of=tasks.__getitem__,
        on_rollout=seen.append,
        episode_cfg=EpisodeConfig(prompt=prompt, sampling={"temperature": 1.0, "max_new_tokens": 24}),
        benchmark=bench,
    )
    trainer.train()
    assert len(seen) == 2
    rewards = [r for report in seen for _, group in report.groups for r in group]
    # The rewards are the benchmark's score (replies of up to 24 tokens: below 1), and they
    # differ within groups, so GRPO had advantages to learn from.
    assert all(0.0 <= r < 1.0 for r in rewards) and len(set(rewards)) > 1
    assert {tid for report in seen for tid, _ in report.groups} <= set(ids)
    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())


def test_rods_train_runs_two_steps_on_a_benchmark_given_to_the_run(tmp_path, tiny_model_dir):
    """The whole run path (seeds, RODS step, synthesis worker, buffer, episodes, held-out evaluation, the
    record) with the benchmark above, then the app's Boundary, Buffer and Review data of the run: nothing
    outside this file knows it."""
    from rods_core.loop import StepWatcher
    from rods_lab.run import train
    from tests.conftest import smoke_config

    rows = []

    class Keep(StepWatcher):
        def after_step(self, row: dict, drawn: list) -> None:
            rows.append((row, drawn))

    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **WORDS_RUN))
    run_dir = train(cfg, run_id="words", log=lambda *_: None, watcher=Keep(), benchmark=Words())
    assert len(rows) == 2
    drawn = {t.id for _, d in rows for t in d}
    assert drawn and drawn <= {t.id for t in Words().seeds("train")}
    assert all(0.0 <= row["reward/mean"] < 1.0 for row, _ in rows)
    assert (run_dir / "final" / "config.json").exists()
    check_the_apps_views(run_dir, Words())


def check_the_apps_views(run_dir, bench: Words) -> None:
    """The data the Boundary, Buffer and Review pages lay out, given the run's benchmark."""
    from rods_lab import views
    from storage import curation
    from storage.reader import RunReader

    snap, reader = views.snapshot(run_dir, bench), RunReader(run_dir)
    staged = snap.tasks("staged")
    assert staged and all(isinstance(t, WordTask) for t in snap.tasks("all"))
    assert not views.has_structure(bench)  # success and pools by group, tasks as rendered
    structure = views.structure_table(snap, None, bench)
    assert set(structure.task_id) == {t.id for t in snap.tasks("all")} and set(structure.category) == {"all"}
    assert set(views.success_by_complexity(reader, structure).class_combo) == {"all"}  # Boundary
    table = views.pool_table(run_dir, reader, None, bench)  # Buffer
    assert set(table.task_id) == set(structure.task_id) and table["mean"].notna().any()
    review = curation.review_rows(  # Review
        snap,
        views.latest_buffer_reasons(reader),
        views.variant_outcomes(reader, [t.id for t in staged]),
        reader.latest_task_stats(),
        [],
        None,
        bench,
    )
    assert set(review.task_id) == {t.id for t in staged} and set(review.state) == {"awaiting_review"}
    assert set(review.category) == {"all"} and (review.values_changed == 1).all()
    variant = staged[0]
    assert views.verify_edit(bench, variant, variant.model_copy(update={"word": "birch"}), snap) == (True, "verified")
    refused = views.verify_edit(bench, variant, variant.model_copy(update={"word": "maple"}), snap)
    assert refused[0] is False and "held-out word" in refused[1]


def test_the_rods_step_synthesizes_memory_variants_through_the_benchmark(tmp_path):
    """Boundary memory questions go to the memory synthesizer in the step's worker; its variants come back as
    memory tasks, are staged by the buffer, trip no leak guard and replay to full marks."""
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_core.benchmarks.memory.tasks import MemoryTask
    from rods_core.ranks import Ranks
    from rods_core.step import RodsStep
    from rods_core.trainer import RolloutReport
    from tests.polling import wait_until

    bench = BfclMemory("kv", prereq="fact")
    seeds = [t for t in bench.seeds("train") if bench.synthesizer.variants(t, 1, 0).accepted][:4]
    cfg = RunConfig.model_validate(
        {
            "method": "rods",
            "benchmark": "bfcl_memory_kv",
            "prereq": "fact",
            "buffer": {"p_max": 4, "probe_slots": 1, "max_probe_wait": 2},
            "synthesis": {"parents_per_step": 2, "n_per_parent": 1},
        }
    )
    groups = [(t.id, [1.0, 0.0, 1.0, 0.0]) for t in seeds]  # every seed at the boundary
    report = RolloutReport(groups=groups, accuracy=[0.0] * 16, n_calls=[1] * 16, model_tokens=160)
    cur = RodsStep(cfg, seeds, Ranks(), bench)
    try:
        cur.after_step(1, report, [])
        assert cur.worker.submitted == 2
        wait_until(lambda: cur.worker.in_flight == 0, "two memory synthesis jobs")
        out = cur.after_step(2, report, [])
    finally:
        cur.close()
    staged = cur.source.pools()["staged"]
    assert out.metrics["synth/accepted"] >= 1 and staged
    for tid in staged:
        v = cur.task(tid)
        assert isinstance(v, MemoryTask) and v.provenance.parent_id in {t.id for t in seeds}
        assert bench.leak_reason(v) is None and bench.verify(v, tmp_path).ok
    accepted = [r for r in out.events["variant"] if r["accepted"]]
    assert {MemoryTask.model_validate(r["task"]).id for r in accepted} == set(staged)


def test_the_config_names_the_benchmark_and_refuses_bfcl_options_on_another():
    import pytest
    from pydantic import ValidationError

    from rods_core.config import load_config

    assert RunConfig().benchmark == "bfcl_multi_turn" and RunConfig().prereq == "all"
    memory = load_config("configs/memory-cpu.yaml")
    assert (memory.benchmark, memory.prereq, memory.seeds.subset) == ("bfcl_memory_kv", "fact", "all")
    with pytest.raises(ValidationError, match="benchmark") as e:
        RunConfig.model_validate({"benchmark": "memory"})
    assert "bfcl_memory_rec_sum" in str(e.value)  # the choices are listed
    bad = {"benchmark": "bfcl_memory_kv", "method": "env_augment", "seeds": {"subset": "demo", "categories": ["base"]}}
    with pytest.raises(ValidationError) as e:
        RunConfig.model_validate(bad)
    for said in ("method env_augment", "use all or file", "seeds.categories: BFCL multi-turn's categories"):
        assert said in str(e.value)
    RunConfig.model_validate({**bad, "method": "rods", "seeds": {}})  # the fixes named are enough


def test_the_config_refuses_memorys_prereq_on_bfcl_multi_turn():
    """`prereq: fact` on a BFCL multi-turn run would be silently ignored: refused, naming the field and fix."""
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="prereq 'fact': an option of bfcl_memory_kv.*remove prereq"):
        RunConfig.model_validate({"prereq": "fact"})
    assert RunConfig.model_validate({"prereq": "all"}).prereq == "all"


def test_a_memory_buffer_resumes_with_its_variants_as_memory_tasks():
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_core.benchmarks.memory.tasks import MemoryTask
    from rods_core.boundary import BoundaryDetector
    from rods_core.buffer import ReplayBuffer
    from rods_core.config import BufferConfig

    bench = BfclMemory("kv")
    seeds = [t for t in bench.seeds("train") if bench.synthesizer.variants(t, 1, 0).accepted][:3]
    variant = bench.synthesizer.variants(seeds[0], 1, 0).accepted[0]
    buffer = ReplayBuffer(seeds, BoundaryDetector(), BufferConfig())
    buffer.offer([variant], step=1)
    again = ReplayBuffer(seeds, BoundaryDetector(), BufferConfig())
    again.load_state_dict(json.loads(json.dumps(buffer.state_dict())))  # as a checkpoint stores it
    assert again.pools() == buffer.pools() and variant.id in again.pools()["staged"]
    assert isinstance(again.task(variant.id), MemoryTask) and again.task(variant.id) == variant


def test_a_memory_runs_pools_read_back_and_export_as_memory_tasks(tmp_path):
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_core.benchmarks.memory.tasks import MemoryTask, load_memory_seeds
    from rods_core.benchmarks.task_files import load_task_file
    from rods_core.config import dump_config
    from storage.export import export_pool
    from storage.pools import read_pools_snapshot, write_pools_snapshot

    seeds = load_memory_seeds("train")[:3]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(dump_config(RunConfig(benchmark="bfcl_memory_kv")))
    write_pools_snapshot(run_dir, {"seeds": seeds, "active": seeds[:2]}, step=3)
    snap = read_pools_snapshot(run_dir)
    assert snap.tasks("seeds") == seeds and all(isinstance(t, MemoryTask) for t in snap.tasks("all"))
    out = tmp_path / "all.jsonl"
    assert export_pool(run_dir, "all", out) == 3
    assert [json.loads(line)["pool"] for line in out.read_text().splitlines()] == ["seeds", "seeds", "seeds"]
    # an export imports back through the benchmark's task-file door (its pool and stats fields dropped)
    assert load_task_file(out, "re-import", benchmark=BfclMemory("kv")) == seeds


def test_a_memory_seed_file_passes_the_door_through_the_benchmark(tmp_path):
    """seeds.subset: file on a memory run: the benchmark's schema, verifier and leak guard, all or nothing."""
    import pytest

    from rods_core.benchmarks.leaks import TestSplitRefused
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_core.benchmarks.task_files import TaskFileError
    from rods_core.tasksets import select_seeds

    bench = BfclMemory("kv", prereq="fact")
    train, test = bench.seeds("train")[:2], bench.seeds("test")[:1]

    def seeds_of(name: str, records: list) -> list:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r if isinstance(r, dict) else r.to_record()) + "\n" for r in records))
        cfg = RunConfig.model_validate({"benchmark": "bfcl_memory_kv", "seeds": {"subset": "file", "file": str(path)}})
        return select_seeds(cfg, bench)

    assert seeds_of("good.jsonl", train) == train
    unplayable = train[1].model_copy(update={"answers": ["x" * 3000]})  # longer than a kv memory entry holds
    with pytest.raises(TaskFileError, match="bad.jsonl:2"):
        seeds_of("bad.jsonl", [train[0], unplayable])
    with pytest.raises(TestSplitRefused, match=test[0].id):
        seeds_of("leak.jsonl", test)
    with pytest.raises(TaskFileError, match="scenario"):  # a BFCL-shaped record fails the memory schema
        seeds_of("bfcl.jsonl", [{"id": "x_1", "question": []}])


def test_rods_sft_warm_starts_on_a_memory_task_file(tmp_path, tiny_model_dir):
    """`rods sft --benchmark`: the file through the memory door, its demonstrations played by the memory
    reference policy, the report on memory episodes; --demo (BFCL's seeds) is refused with the reason."""
    from typer.testing import CliRunner

    from rods_core.benchmarks.memory.tasks import load_memory_seeds
    from rods_lab.cli import app

    tasks = tmp_path / "memory.jsonl"
    tasks.write_text(json.dumps(load_memory_seeds("train")[0].to_record()) + "\n")
    base = ["sft", "--model", str(tiny_model_dir), "--benchmark", "bfcl_memory_kv", "--prereq", "fact"]
    r = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "o1"), "--demo"])
    assert r.exit_code == 2 and "--demo is BFCL multi-turn's demo seeds" in r.output
    args = ["--out", str(tmp_path / "o2"), "--tasks", str(tasks), "--max-epochs", "1", "--samples", "0", "--json"]
    r = CliRunner().invoke(app, [*base, *args])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index("{\n") :])
    assert report["sft/tasks"] == 1 and report["eval/tasks"] == 1 and "eval/accuracy/customer" in report


def test_a_memory_edit_is_parsed_verified_and_applied_and_a_bad_one_refused_while_the_run_goes_on():
    """Edit decisions on a memory run are hostile input: parsed as memory tasks and verified by executing
    their ground truth; the good one enters probing as an edit, each bad one is refused with its reason."""
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_core.ranks import Ranks
    from rods_core.recording import Decision
    from rods_core.step import RodsStep
    from rods_core.trainer import RolloutReport

    bench = BfclMemory("kv", prereq="fact")
    seeds = bench.seeds("train")[:2]
    cfg = RunConfig.model_validate({"method": "rods", "benchmark": "bfcl_memory_kv", "prereq": "fact"})
    flat = RolloutReport(
        groups=[(t.id, [0.0, 0.0]) for t in seeds], accuracy=[0.0] * 4, n_calls=[1] * 4, model_tokens=40
    )
    seed, test_task = seeds[0], bench.seeds("test")[0]
    good = seed.model_copy(update={"question": seed.question + " Answer in one word."}).to_record()

    def edit(i: int, record: object) -> Decision:
        return Decision(i, seed.id, "edit", json.dumps({"task": record, "accept": True}))

    decisions = [
        edit(1, good),
        edit(2, {**good, "answers": [" "]}),  # accepts any reply
        edit(3, {**good, "question": 7}),  # not a memory task
        edit(4, {**good, "answers": ["x" * 3000]}),  # fails by execution: longer than a kv memory entry holds
        edit(5, test_task.to_record()),  # a held-out question
        edit(6, seeds[1].to_record()),  # a copy of another pool task
        edit(7, {"id": "x_1", "question": [], "ground_truth": []}),  # a BFCL multi-turn record
    ]
    cur = RodsStep(cfg, seeds, Ranks(), bench)
    try:
        out = cur.after_step(1, flat, decisions)
        nxt = cur.after_step(2, flat, [])  # the run goes on
    finally:
        cur.close()
    got = {o.decision_id: (o.outcome, o.reason) for o in out.decisions}
    assert got[1][0] == "applied" and all(got[i][0] == "refused" for i in range(2, 8)), got
    assert "empty or blank" in got[2][1] and "question" in got[3][1] and "ground-truth path" in got[4][1]
    assert "held-out test split" in got[5][1] and "duplicate" in got[6][1] and "scenario" in got[7][1]
    edited = [cur.task(t) for t in cur.source.pools()["staged"]]
    assert [(t.question, t.provenance.source, t.provenance.parent_id) for t in edited] == [
        (good["question"], "edit", seed.id)
    ]
    assert nxt.events["task_stats"] and not nxt.decisions


def test_a_memory_runs_snapshots_are_written_inside_its_folder_and_removed_after_use(tmp_path, tiny_model_dir):
    """Rollouts, the held-out evaluation and the synthesizer's verification write BFCL memory's snapshot files
    inside the run folder's scratch/ (so a killed run leaves them there, deleted with the run), each in a
    folder removed once used. A spy on the real `_flush` records where each session's files went."""
    from rods_core.benchmarks.memory import env as memory_env
    from rods_core.benchmarks.scratch import run_scratch
    from rods_lab.run import train

    flushed: list = []
    real = memory_env.MemoryEnvironment._flush

    def spy(self):
        real(self)
        flushed.append((self.folder, sorted(p.name for p in self.folder.rglob("*") if p.is_file())))

    memory_env.MemoryEnvironment._flush = spy
    try:
        overrides = {
            "method": "uniform_synth",
            "benchmark": "bfcl_memory_kv",
            "prereq": "fact",
            "seeds.subset": "all",
            "seeds.ids": ["memory_145_notetaker_15", "memory_142_notetaker_12"],
            "seeds.limit": None,
            "grpo.max_steps": 2,
            "episode.max_context_tokens": 4096,
            "eval.limit": 1,
            "synthesis.parents_per_step": 1,
        }
        cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **overrides))
        run_dir = train(cfg, run_id="mem", log=lambda *_: None)
    finally:
        memory_env.MemoryEnvironment._flush = real
    scratch = run_scratch(run_dir).resolve()
    prefixes = {folder.relative_to(scratch).parts[0].split("_")[0] for folder, _ in flushed}
    assert {"episodes", "rods"} <= prefixes  # rollouts and evaluation; the synthesizer's verification
    assert all(files for _, files in flushed)  # BFCL's snapshot files were written there
    assert scratch.is_dir() and not list(scratch.iterdir())  # each folder removed after use
