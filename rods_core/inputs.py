"""Input doors: everything a user or a file hands the tool is read here, and refused with `file:line: field:
reason` (a DoorError) before anything is created; nothing in this module writes.

Covers the primitives (UTF-8 text, JSON and YAML values with a nesting bound, output paths, model folders),
the task-file door (schema, then verification by execution, then the leak guard) and the pre-flight of a
training run (run id, resume target, seed file, model folder).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from rods_core.config import RunConfig
    from rods_core.tasks import Task

# BFCL's deepest record nests 12 levels (a file system's folders); 64 leaves room and stops hostile input
# long before Python's recursion limit (json, yaml, deepcopy and pydantic all recurse).
MAX_DEPTH = 64
_BRACKETS = re.compile(r"[\[\]{}]")


class DoorError(ValueError):
    """Input refused at a door; the message names the source, line and field where they are known."""


# ----- text, JSON, YAML --------------------------------------------------------------------------------
@contextmanager
def _filesystem(p: Path, what: str) -> Iterator[None]:
    """OS errors on a user-given path (no such file, a NUL byte, a name too long, no access) as DoorError."""
    if "\x00" in str(p):  # pathlib reports such a path as missing; open() would raise ValueError later
        raise DoorError(f"{str(p)[:120]!r}: cannot use it as a {what} (the path holds a NUL byte)")
    try:
        yield
    except DoorError:
        raise
    except FileNotFoundError:
        raise DoorError(f"{p}: no such {what}") from None
    except (OSError, ValueError) as e:
        shown = repr(str(p)[:120]) if "\x00" in str(p) or len(str(p)) > 120 else str(p)
        raise DoorError(f"{shown}: cannot use it as a {what} ({getattr(e, 'strerror', None) or e})") from None


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """A regular file's bytes, or DoorError saying why it cannot be read (missing, a folder, no access)."""
    p = Path(path)
    with _filesystem(p, what):
        if p.is_dir():
            raise DoorError(f"{p}: is a folder, not a {what}")
        return p.read_bytes()


def _bad_byte(data: bytes, e: UnicodeDecodeError) -> tuple[int, str]:
    """(line, reason) for the first byte that is not UTF-8."""
    line = data.count(b"\n", 0, e.start) + 1
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return line, f"byte 0x{data[e.start]:02x} at column {col} is not UTF-8; save the file as UTF-8"


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM dropped), or DoorError naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line, why = _bad_byte(data, e)
        raise DoorError(f"{source}:{line}: (encoding): {why}") from None


def read_text(path: str | Path, what: str = "file") -> str:
    return decode(read_bytes(path, what), str(path))


def check_value(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """The value itself if it nests at most `max_depth` containers and every string encodes as UTF-8.

    Iterative and memoised by identity, so YAML aliases (a shared node seen many times) cost one visit.
    """
    stack, seen = [(value, 1)], {}
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise DoorError(f"a string holds an unpaired surrogate ({v[:40]!r}); use real characters") from None
        elif isinstance(v, (dict, list, tuple)):
            if depth > max_depth:
                raise DoorError(f"nested deeper than {max_depth} levels")
            if seen.get(id(v), 0) >= depth:
                continue
            seen[id(v)] = depth
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
            if isinstance(v, dict):
                stack.extend((k, depth) for k in v if isinstance(k, str))
    return value


def json_value(text: str) -> Any:
    """One JSON document, checked by check_value; DoorError with the parser's reason otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise DoorError(f"not valid JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise DoorError(f"not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # e.g. an integer past Python's 4,300-digit conversion limit
        raise DoorError(f"not valid JSON: {e}") from None
    return check_value(value)


def _at(where: str | None, msg: str) -> str:
    return f"{where}: {msg}" if where else msg


def _flow_depth(text: str) -> int:
    """The deepest nesting of [ and { (quotes ignored: an over-count only refuses absurd input sooner)."""
    depth = peak = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        peak = max(peak, depth)
    return peak


def yaml_value(text: str, source: str | None = None) -> Any:
    """One YAML document (safe loader), checked by check_value; DoorError naming `source`:line otherwise."""
    if _flow_depth(text) > MAX_DEPTH:  # PyYAML takes seconds to reach its recursion limit on deep [[[...
        raise DoorError(_at(source, f"nested deeper than {MAX_DEPTH} levels"))
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DoorError(
            _at(f"{source}:{mark.line + 1}" if source and mark else source, f"not valid YAML ({problem})")
        ) from None
    except RecursionError:
        raise DoorError(_at(source, f"nested deeper than {MAX_DEPTH} levels")) from None
    try:
        return check_value(value)
    except DoorError as e:
        raise DoorError(_at(source, str(e))) from None


@dataclass(frozen=True)
class Bad:
    """A line that could not be parsed: the field (or "(json)"/"(encoding)") and the reason."""

    field: str
    reason: str


def jsonl_lines(data: bytes, source: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value or Bad) for every non-blank line of a JSONL file's bytes."""
    for ln, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as e:
            yield ln, Bad("(encoding)", _bad_byte(raw, e)[1])
            continue
        try:
            yield ln, json_value(text)
        except DoorError as e:
            yield ln, Bad("(json)", str(e))


# ----- paths -------------------------------------------------------------------------------------------
def _writable_ancestor(p: Path, what: str) -> None:
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DoorError(f"{p}: cannot create the {what}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DoorError(f"{p}: cannot create the {what}: no write access to {parent}")


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """A path a file may be written to: not a folder, and its folder can be created."""
    p = Path(path)
    with _filesystem(p, what):
        if p.is_dir():
            raise DoorError(f"{p}: is a folder; give a file name, e.g. {p / 'out.jsonl'}")
        if p.exists() and not p.is_file():
            raise DoorError(f"{p}: exists and is not a regular file")
        _writable_ancestor(p, what)
    return p


def check_output_dir(path: str | Path, what: str = "output folder") -> Path:
    """A path a folder may be written to: not a file, and creatable."""
    p = Path(path)
    with _filesystem(p, what):
        if p.exists() and not p.is_dir():
            raise DoorError(f"{p}: is a file; give a folder")
        if not p.exists():
            _writable_ancestor(p, what)
    return p


WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _json_object(path: Path, what: str, field: str) -> dict:
    try:
        doc = json_value(decode(read_bytes(path, what), str(path)))
    except DoorError as e:
        raise DoorError(f"{field}: {e}" if str(e).startswith(str(path)) else f"{field}: {path}: {e}") from None
    if not isinstance(doc, dict):
        raise DoorError(f"{field}: {path}: must be a JSON object")
    return doc


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def model_folder(path: str | Path, build_if_missing: bool = False, field: str = "model.path") -> Path:
    """The folder `path` names: a local folder as given, or, for a hub id (`org/name`) that is no local
    folder, its snapshot in the local Hugging Face cache (HF_HUB_CACHE). Nothing is ever downloaded: a hub id
    missing from the cache is a DoorError saying how to fetch it. A path whose parent folder exists is local
    (`models/x`), and with `build_if_missing` a missing path is the folder to build, never a hub id."""
    p = Path(path).expanduser()
    if p.exists() or p.parent.exists() or build_if_missing or not HUB_ID.fullmatch(str(path)):
        return p
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(path), local_files_only=True))
    except LocalEntryNotFoundError:
        raise DoorError(
            f"{field}: {path}: no such folder, and no such model in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); runs never download: fetch it once with `hf download {path}`, "
            "or give a local model folder (`rods model init-tiny` builds a tiny one)"
        ) from None


def check_model_dir(path: str | Path, field: str = "model.path") -> Path:
    """A local Hugging Face model folder (config.json with model_type, weights, a tokenizer; a readable
    rods_model.json card when present), or DoorError saying what is missing and how to get a model."""
    p = Path(path)
    with _filesystem(p, "model folder"):
        return _check_model_dir(p, field)


def _check_model_dir(p: Path, field: str) -> Path:
    build = f"build one with `rods model init-tiny --out {p}` then `rods sft`, or set model.build_if_missing: true"
    if not p.exists():
        raise DoorError(f"{field}: {p}: no such folder; {build}")
    if not p.is_dir():
        raise DoorError(f"{field}: {p}: is a file, not a model folder")
    if not (p / "config.json").is_file():
        raise DoorError(f"{field}: {p}: holds no config.json (not a Hugging Face model folder); {build}")
    config = _json_object(p / "config.json", "model config", field)
    if not isinstance(config.get("model_type"), str):
        raise DoorError(f"{field}: {p / 'config.json'}: model_type: missing (not a transformers model config)")
    if not any((p / f).is_file() for f in WEIGHT_FILES):
        raise DoorError(f"{field}: {p}: no weights ({' or '.join(WEIGHT_FILES[::2])})")
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        raise DoorError(f"{field}: {p}: no tokenizer ({' or '.join(TOKENIZER_FILES)})")
    card_path = p / "rods_model.json"
    if card_path.exists():
        card = _json_object(card_path, "model card", field)
        from rods_core.policy.prompting import CHAT_FORMAT

        if card.get("kind") == "rods-tiny" and card.get("chat_format") != CHAT_FORMAT:
            raise DoorError(
                f"{field}: {p}: a tiny model of an older chat format ({card.get('chat_format', 'Python-list calls')}"
                f", not {CHAT_FORMAT}); delete the folder and rebuild it (`rods model demo`, or init-tiny + sft)"
            )
        if "prompt" in card:
            from pydantic import ValidationError

            from rods_core.policy.prompting import PromptConfig

            try:
                PromptConfig.model_validate(card["prompt"])
            except ValidationError as e:
                loc = ".".join(map(str, e.errors()[0]["loc"]))
                raise DoorError(
                    f"{field}: {card_path}: prompt{'.' + loc if loc else ''}: {e.errors()[0]['msg']}"
                ) from None
    return p


# ----- task files: schema, execution, leak guard -------------------------------------------------------
def _reports_error(result: str) -> bool:
    """A call that returned normally but says it failed: the API classes answer {"error": "..."}."""
    if not result.startswith("{"):
        return False
    try:
        doc = json.loads(result)
    except ValueError:
        return False
    return isinstance(doc, dict) and any("error" in str(k).lower() and v for k, v in doc.items())


def replay_problem(task: Task) -> tuple[str, str] | None:
    """(field, reason) when the task's initial state does not load or a ground-truth call fails on replay
    (raises, or answers {"error": ...}).

    BFCL's own 800 tasks are the reference and pass as they are (5 test-split ones hold a call our typed
    environment refuses). Departure from synth.verify.verify_task: no "useful" or failure-looking-result
    heuristics, which refuse 8 BFCL train seeds; only what breaks a run is refused.
    """
    from rods_core.envs.bfcl import BfclEnvironment
    from rods_core.envs.checker import score_calls
    from rods_core.seeds import is_bfcl_task

    if is_bfcl_task(task):
        return None
    try:
        env = BfclEnvironment(task)
    except Exception as e:  # noqa: BLE001 - the API classes raise anything on a malformed scenario
        return "initial_config", f"the API classes cannot load it ({type(e).__name__}: {str(e)[:160]})"
    for turn, calls in enumerate(task.ground_truth):
        env.start_turn(turn)
        for k, text in enumerate(calls):
            failed = next((o.result for o in env.execute(text) if not o.ok or _reports_error(o.result)), None)
            if failed is not None:
                return f"ground_truth.{turn}.{k}", f"{text[:80]!r} fails on replay: {failed[:160]}"
    try:
        score = score_calls(task, task.ground_truth)
    except Exception as e:  # noqa: BLE001 - a checker crash on this task is a reason to refuse it
        return "ground_truth", f"the checker fails on it ({type(e).__name__}: {str(e)[:160]})"
    if score.accuracy < 1:
        return "ground_truth", "does not pass the checker when replayed"
    return None


def parse_task_bytes(data: bytes, source: str, where: str, *, verify: bool = True, guard: bool = True) -> list[Task]:
    """The tasks of a JSONL file's bytes, all or nothing: schema (TaskFileError naming file:line:field),
    then verification by execution, then (guard=True) the leak guard naming `where`."""
    from rods_core.seeds import refuse_test_tasks
    from rods_core.tasks import TaskFileError, parse_task_lines

    lines = parse_task_lines(data, source)
    if verify:
        problems = [(ln, *why) for ln, task in lines if (why := replay_problem(task))]
        if problems:
            raise TaskFileError(source, problems, "task(s) failing verification by execution")
    tasks = [t for _, t in lines]
    if guard:
        refuse_test_tasks(tasks, f"{where} ({source})")
    return tasks


def load_task_file(path: str | Path, where: str, *, verify: bool = True, guard: bool = True) -> list[Task]:
    """parse_task_bytes on a file (DoorError when it cannot be read)."""
    return parse_task_bytes(read_bytes(path, "task file"), str(path), where, verify=verify, guard=guard)


# ----- a training run's pre-flight ---------------------------------------------------------------------
def preflight(cfg: RunConfig, run_id: str | None, resume: str | None) -> str | None:
    """Check a run's inputs before anything is created: ids by the rule, the resume target exists, a new
    id names no existing run, the seed file passes the task-file door, the model folder holds a model.
    Returns the run id to use (None: a new one is made)."""
    from rods_core.ids import check_run_id

    runs = Path(cfg.output_dir).resolve()
    if run_id and resume and run_id != resume:
        raise DoorError(f"--run-id {run_id} and --resume {resume} differ; give one of them")
    if resume:
        check_run_id(resume)
        if not (runs / resume).is_dir():
            raise DoorError(f"--resume {resume}: no such run in the runs folder {runs}")
    elif run_id:
        check_run_id(run_id)
        if (runs / run_id / "config.yaml").exists():
            raise DoorError(f"--run-id {run_id}: the run exists in {runs}; resume it with --resume {run_id}")
    if cfg.seeds.subset == "file":
        load_task_file(cfg.seeds.file, "seeds.file")
    model = model_folder(cfg.model.path, cfg.model.build_if_missing)
    if not cfg.model.build_if_missing or (model / "config.json").exists():
        check_model_dir(model)
    elif model.exists() and not model.is_dir():
        raise DoorError(f"model.path: {model}: is a file; give a folder to build the tiny model in")
    return resume or run_id
