"""Every input door answers bad input with `file:line: field: reason` and exit code 2 (or a typed DoorError),
never a traceback, and creates nothing: hostile cases per door, the leak guard at every route owned here,
then hypothesis fuzzing of each door with random bytes, deep nesting, huge values and wrong types."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rods_core.benchmarks.leaks import TestSplitRefused
from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.task_files import load_task_file
from rods_core.config import load_config
from rods_core.config.inputs import DoorError, check_output_file
from rods_core.policy.model_folders import check_model_dir
from rods_core.preflight import preflight
from rods_lab import configs, launch
from rods_lab.identity import local
from rods_lab.paths import PROJECT_ROOT, AppPaths, import_upload, import_workspace_file
from storage.control import ControlDB
from tests.door_helpers import DEEP, FUZZ, JSON, NOT_UTF8, clean_or_valid, files, invoke, refused, run_config


@pytest.fixture
def seed_rec(train_seeds):
    return train_seeds[0].to_record()


@pytest.fixture
def test_task(all_seeds, train_seeds):
    train = {t.id for t in train_seeds}
    return next(t for t in all_seeds if t.id not in train)


def jsonl(path: Path, *recs) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


# ----- task files: seeds import, --tasks -----------------------------------------------------------------
def test_seeds_import_refuses_each_hostile_file_and_creates_no_database(tmp_path, seed_rec):
    db = tmp_path / "db" / "control.sqlite"
    good = json.dumps(seed_rec).encode()
    cases = {
        "enc.jsonl": (good + b"\n" + b'{"id": "' + NOT_UTF8 + b'"}\n', "enc.jsonl:2: (encoding): byte 0xff"),
        "deep.jsonl": (DEEP.encode(), "deep.jsonl:1: (json): not valid JSON: nested deeper than 64"),
        "huge.jsonl": (b'{"id": ' + b"9" * 5000 + b"}", "huge.jsonl:1: (json): not valid JSON: Exceeds the limit"),
        "ids.jsonl": (json.dumps({**seed_rec, "id": "../../etc/passwd"}).encode(), "ids.jsonl:1: id: Value error"),
        "type.jsonl": (json.dumps({**seed_rec, "question": "hi"}).encode(), "type.jsonl:1: question: Input should"),
        "surrogate.jsonl": (b'{"id": "a\\ud800"}', "surrogate.jsonl:1: (json): a string holds an unpaired surrogate"),
        "state.jsonl": (
            json.dumps({**seed_rec, "initial_config": {"GorillaFileSystem": {"root": "notadict"}}}).encode(),
            "state.jsonl:1: initial_config: the API classes cannot load it (AttributeError",
        ),
        "gt.jsonl": (
            json.dumps(
                {**seed_rec, "ground_truth": [["cd(folder='nowhere_xyz')"], *seed_rec["ground_truth"][1:]]}
            ).encode(),
            "gt.jsonl:1: ground_truth.0.0: \"cd(folder='nowhere_xyz')\" fails on replay",
        ),
    }
    for name, (data, needle) in cases.items():
        (tmp_path / name).write_bytes(data)
        refused(invoke("seeds", "import", tmp_path / name, "--db", db), needle, "nothing was read")
    refused(invoke("seeds", "import", tmp_path, "--db", db), "is a folder")
    assert not db.parent.exists()  # no database, not even its folder


def test_task_file_doors_of_sft_eval_and_env_score(tmp_path, seed_rec, test_task):
    model = tmp_path / "m"
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(json.dumps(seed_rec).encode() + b"\n" + NOT_UTF8 + b"\n")
    refused(invoke("sft", "--model", model, "--out", tmp_path / "o", "--tasks", bad), "bad.jsonl:2: (encoding)")
    refused(invoke("eval", "--model", model, "--tasks", bad), "--model: ", "no such folder")
    answers = jsonl(tmp_path / "a.jsonl", {"id": seed_rec["id"], "turns": seed_rec["ground_truth"]})
    refused(invoke("env", "score", "--answers", answers, "--tasks", bad), "bad.jsonl:2: (encoding)")
    failing = jsonl(tmp_path / "f.jsonl", {**seed_rec, "initial_config": {"GorillaFileSystem": {"root": 3}}})
    refused(invoke("env", "score", "--answers", answers, "--tasks", failing), "f.jsonl:1: initial_config")
    # scoring is evaluation: a test-split task file is fine there, never for training
    leak = jsonl(tmp_path / "leak.jsonl", test_task.to_record())
    ok = invoke(
        "env",
        "score",
        "--answers",
        jsonl(tmp_path / "t.jsonl", {"id": test_task.id, "turns": test_task.ground_truth}),
        "--tasks",
        leak,
        "--json",
    )
    assert ok.exit_code == 0 and json.loads(ok.output)["accuracy"] == 1.0
    assert not (tmp_path / "o").exists()


# ----- answers files ------------------------------------------------------------------------------------
def test_answers_file_door(tmp_path, seed_rec):
    one = {"id": seed_rec["id"], "turns": seed_rec["ground_truth"]}
    cases = {
        "enc.jsonl": (json.dumps(one).encode() + b"\n" + NOT_UTF8, "enc.jsonl:2: (encoding)"),
        "deep.jsonl": (DEEP.encode(), "deep.jsonl:1: (json): not valid JSON: nested deeper"),
        "dup.jsonl": (
            (json.dumps(one) + "\n" + json.dumps(one)).encode(),
            "dup.jsonl:2: id: 'multi_turn_base_1' answered twice (first on line 1)",
        ),
        "empty.jsonl": (b"\n  \n", "empty.jsonl: no answers in the file"),
        "types.jsonl": (
            b'{"id": "x", "turns": [[1]]}',
            "types.jsonl:1: turns: must be a list of lists of call strings",
        ),
    }
    for name, (data, needle) in cases.items():
        (tmp_path / name).write_bytes(data)
        refused(invoke("env", "score", "--answers", tmp_path / name), needle)
    refused(invoke("env", "score", "--answers", tmp_path), "is a folder")


# ----- a run's pre-flight: ids, resume, model folder, seed file -------------------------------------------
def test_train_preflight_refuses_before_anything_exists(tmp_path, test_task):
    cfg = run_config(tmp_path)
    runs = (tmp_path / "runs").resolve()
    refused(
        invoke("train", "--config", cfg, "--run-id", "../../escaped-run"),
        "run id '../../escaped-run' is not a valid id",
    )
    refused(invoke("train", "--config", cfg, "--run-id", "a b"), "is not a valid id")
    refused(
        invoke("train", "--config", cfg, "--resume", "never_ran"),
        f"--resume never_ran: no such run in the runs folder {runs}",
    )
    refused(invoke("train", "--config", cfg, "--run-id", "a", "--resume", "b"), "differ")
    refused(invoke("train", "--config", cfg, "--run-id", "fresh"), "model.path: ", "no such folder")
    leak = jsonl(tmp_path / "ws" / "leak.jsonl", test_task.to_record()) if (tmp_path / "ws").mkdir() is None else None
    cfg_file = run_config(tmp_path, **{"seeds.subset": "file", "seeds.file": str(leak)})
    refused(invoke("train", "--config", cfg_file, "--run-id", "fresh"), "seeds.file (", "refused", test_task.id)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "no-model").exists()
    (runs / "old").mkdir(parents=True)
    (runs / "old" / "config.yaml").write_text("name: old\n")
    refused(invoke("train", "--config", cfg, "--run-id", "old"), "the run exists", "--resume old")


def test_model_folder_door(tmp_path):
    m = tmp_path / "m"
    with pytest.raises(DoorError, match="no such folder"):
        check_model_dir(m)
    m.write_text("x")
    with pytest.raises(DoorError, match="is a file, not a model folder"):
        check_model_dir(m)
    m.unlink()
    m.mkdir()
    with pytest.raises(DoorError, match="holds no config.json"):
        check_model_dir(m)
    steps = [
        (NOT_UTF8, "config.json:1: \\(encoding\\)"),
        (DEEP.encode(), "not valid JSON: nested deeper"),
        (b"[1]", "must be a JSON object"),
        (b"{}", "model_type: missing"),
        (b'{"model_type": "qwen2"}', "no weights"),
    ]
    for data, needle in steps:
        (m / "config.json").write_bytes(data)
        with pytest.raises(DoorError, match=needle):
            check_model_dir(m)
    (m / "model.safetensors").write_bytes(b"")
    with pytest.raises(DoorError, match="no tokenizer"):
        check_model_dir(m)
    (m / "tokenizer.json").write_text("{}")
    assert check_model_dir(m) == m
    (m / "rods_model.json").write_text(json.dumps({"prompt": {"docs_mode": 3}}))
    with pytest.raises(DoorError, match="rods_model.json: prompt.docs_mode"):
        check_model_dir(m)
    with pytest.raises(DoorError, match="cannot use it as a model folder"):
        check_model_dir("a\x00b")


# ----- output paths ---------------------------------------------------------------------------------------
def test_output_paths(tmp_path, train_seeds):
    from storage.pools import write_pools_snapshot

    write_pools_snapshot(tmp_path / "runs" / "r1", {"active": train_seeds[:2], "retired": []}, step=1)
    base = ("export", "--run", "r1", "--runs-dir", tmp_path / "runs")
    refused(invoke(*base, "--out", tmp_path), "is a folder; give a file name")
    refused(
        invoke(*base, "--out", tmp_path / "x" / "f.jsonl", "--pool", "retired"), "the retired pool of r1 holds no task"
    )
    refused(
        invoke("export", "--run", "../..", "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o.jsonl"),
        "not a run folder inside",
    )
    (tmp_path / "file").write_text("")
    refused(invoke(*base, "--out", tmp_path / "file" / "o.jsonl"), "is a file, not a folder")
    refused(invoke("synth", "--from", train_seeds[0].id, "--out", tmp_path), "is a folder")
    with pytest.raises(DoorError, match="cannot use it"):
        check_output_file("a\x00b")
    assert not (tmp_path / "x").exists()


# ----- the leak guard at every route owned here -------------------------------------------------------------
def test_test_split_task_refused_at_every_route(tmp_path, train_seeds, test_task):
    leak = (
        jsonl(
            tmp_path / "ws" / "imports" / "leak.jsonl", *(t.to_record() for t in train_seeds[:2]), test_task.to_record()
        )
        if (tmp_path / "ws" / "imports").mkdir(parents=True) is None
        else None
    )
    renamed = jsonl(tmp_path / "renamed.jsonl", {**test_task.to_record(), "id": "my_own_task"})  # caught by content
    db = tmp_path / "control.sqlite"
    refused(invoke("seeds", "import", leak, "--db", db), "rods seeds import", test_task.id)
    refused(invoke("seeds", "import", renamed, "--db", db), "my_own_task: same content as a test-split task")
    refused(
        invoke("sft", "--model", tmp_path, "--out", tmp_path / "o", "--tasks", leak), "rods sft --tasks", test_task.id
    )
    refused(invoke("eval", "--model", tmp_path, "--tasks", leak), "--model")  # the model is checked first
    with pytest.raises(TestSplitRefused, match="rods eval --tasks"):
        load_task_file(leak, "rods eval --tasks", benchmark=make_benchmark("bfcl_multi_turn"))
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    cdb = ControlDB(tmp_path / "ws" / "control.sqlite")
    with pytest.raises(TestSplitRefused, match="the Seeds page upload"):
        import_upload(paths, cdb, "leak.jsonl", leak.read_bytes(), [])
    with pytest.raises(TestSplitRefused, match="the Seeds page import"):
        import_workspace_file(paths, cdb, "imports/leak.jsonl", [])
    base = PROJECT_ROOT / "configs" / "demo-cpu.yaml"
    with pytest.raises(TestSplitRefused, match="seeds.file"):
        configs.build_config(base, {"seeds.subset": "file", "seeds.file": "imports/leak.jsonl"}, paths)
    cdb.upsert_seeds([test_task], source="import")  # e.g. imported with --allow-test
    with pytest.raises(TestSplitRefused, match="a run on catalog seeds"):
        launch.launch_on_seeds(cdb, [test_task.id], base, "leaky", {}, paths, actor=local("test"))
    cfg = load_config(run_config(tmp_path, **{"seeds.subset": "file", "seeds.file": str(leak)}))
    with pytest.raises(TestSplitRefused, match="seeds.file"):
        preflight(cfg, None, None)
    assert [s.task_id for s in cdb.list_seeds()] == [test_task.id] and not db.exists()
    assert not (tmp_path / "ws" / "subsets").exists() and not paths.runs.exists()
    assert sorted(p.name for p in (tmp_path / "ws" / "imports").iterdir()) == ["leak.jsonl"]


# ----- the app's doors: uploads, typed paths, overrides ------------------------------------------------------
def test_seeds_page_upload_refuses_and_keeps_nothing(tmp_path, monkeypatch, seed_rec):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    at = AppTest.from_file(str(PROJECT_ROOT / "pages" / "5_Seeds.py"), default_timeout=60).run()
    assert not at.exception
    for name, data, needle in (
        ("bad.jsonl", json.dumps(seed_rec).encode() + b"\n" + NOT_UTF8, "bad.jsonl:2: (encoding)"),
        ("deep.jsonl", DEEP.encode(), "deep.jsonl:1: (json): not valid JSON: nested deeper"),
    ):
        at.file_uploader(key="seeds_upload").set_value((name, data, "application/jsonl")).run()
        at.button(key="seeds_import").click().run()
        assert not at.exception and any("Nothing was imported" in e.value for e in at.error)
        assert any(needle in c.value for c in at.code)
    assert not (tmp_path / "ws" / "imports").exists()
    assert AppPaths.from_env().db().list_seeds() == []
    good = json.dumps(seed_rec).encode() + b"\n"
    at.file_uploader(key="seeds_upload").set_value(("../../../x y.jsonl", good, "application/jsonl")).run()
    at.button(key="seeds_import").click().run()
    assert any("Imported 1 new" in s.value for s in at.success)
    assert [p.name for p in (tmp_path / "ws" / "imports").iterdir()] == ["x_y.jsonl"]  # kept under imports/ only


def test_launch_page_shows_override_errors(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    at = AppTest.from_file(str(PROJECT_ROOT / "pages" / "1_Launch.py"), default_timeout=60).run()
    assert not at.exception
    for more, needle in (
        ("grpo.max_steps.x=3", "grpo.max_steps is a value (int), not a section"),
        ("eval.every=1\ngrpo.max_steps=[1,2", "more fields line 2: grpo.max_steps: not a YAML value"),
        ("seeds.subset=file\nseeds.file=../../etc/passwd", "outside the workspace"),
    ):
        at.text_area(key="launch_more").input(more)
        at.button[0].click().run()
        assert not at.exception and any(needle in e.value for e in at.error), [e.value for e in at.error]
    assert not (tmp_path / "runs").exists()


# ----- fuzzing: random bytes, deep nesting, huge values, wrong types -------------------------------------------
FIELDS = [
    "id",
    "category",
    "question",
    "initial_config",
    "involved_classes",
    "ground_truth",
    "missed_function",
    "provenance",
    "path",
]


@st.composite
def hostile_bytes(draw, valid: bytes):
    """Random bytes, deep nesting, a huge number, or a valid record with one field replaced by anything."""
    kind = draw(st.sampled_from(["bytes", "deep", "huge", "mutate", "json"]))
    if kind == "bytes":
        return draw(st.binary(max_size=400))
    if kind == "deep":
        n = draw(st.integers(60, 20_000))  # the 100k-deep cases are explicit tests above
        return (draw(st.sampled_from(["[", '{"a":'])) * n).encode()
    if kind == "huge":
        return b'{"id": "x", "n": ' + b"7" * draw(st.integers(4000, 20_000)) + b"}"
    if kind == "json":
        return json.dumps(draw(JSON), allow_nan=True).encode()
    rec = json.loads(valid)
    rec[draw(st.sampled_from(FIELDS))] = draw(JSON)
    return json.dumps(rec).encode()


NAMES_A_LINE = re.compile(r" in .*; nothing was read:\n.*:\d+: \S", re.S)  # TaskFileError: file:line: field


@FUZZ
@given(data=st.data())
def test_fuzz_seeds_import_and_upload(tmp_path, seed_rec, data):
    payload = data.draw(hostile_bytes(json.dumps(seed_rec).encode()))
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    (case / "in.jsonl").write_bytes(payload)
    before = files(case)
    res = invoke("seeds", "import", case / "in.jsonl", "--db", case / "db" / "c.sqlite")
    clean_or_valid(res)
    if res.exit_code == 2:
        assert files(case) == before  # no database, nothing else
    paths = AppPaths(case / "ws", case / "runs")
    name = data.draw(st.text(max_size=20))
    app_db = ControlDB(case / "app.sqlite")
    try:
        import_upload(paths, app_db, name, payload, [])
    except DoorError as e:  # the whole file refused, naming the line of each problem
        assert isinstance(e, TestSplitRefused) or NAMES_A_LINE.search(str(e)), str(e)
        assert not (case / "ws").exists() and app_db.list_seeds() == []


@FUZZ
@given(data=st.data())
def test_fuzz_answers_and_task_files(tmp_path, seed_rec, data):
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    answers = data.draw(hostile_bytes(json.dumps({"id": seed_rec["id"], "turns": seed_rec["ground_truth"]}).encode()))
    (case / "a.jsonl").write_bytes(answers)
    clean_or_valid(invoke("env", "score", "--answers", case / "a.jsonl"))
    (case / "t.jsonl").write_bytes(data.draw(hostile_bytes(json.dumps(seed_rec).encode())))
    (case / "ok.jsonl").write_text(json.dumps({"id": seed_rec["id"], "turns": seed_rec["ground_truth"]}) + "\n")
    clean_or_valid(invoke("env", "score", "--answers", case / "ok.jsonl", "--tasks", case / "t.jsonl"))


@FUZZ
@given(
    config=st.binary(max_size=200) | JSON.map(lambda d: json.dumps(d).encode()),
    card=st.binary(max_size=200) | JSON.map(lambda d: json.dumps(d).encode()),
)
def test_fuzz_model_folders(tmp_path, config, card):
    m = tmp_path / "m"
    m.mkdir(exist_ok=True)
    (m / "config.json").write_bytes(config)
    (m / "rods_model.json").write_bytes(card)
    (m / "model.safetensors").write_bytes(b"")
    (m / "tokenizer.json").write_bytes(b"{}")
    try:
        check_model_dir(m)
    except DoorError as e:
        assert str(e).startswith("model.path: ")


@FUZZ
@given(out=st.text(max_size=60))
def test_fuzz_output_paths(tmp_path, out):
    try:
        p = check_output_file(tmp_path / out)
    except DoorError as e:  # names the path (quoted when it holds a NUL byte or is long)
        path = tmp_path / out
        assert str(e).startswith((f"{path}: ", f"{str(path)[:120]!r}: ")), str(e)
    else:
        assert not p.is_dir()
