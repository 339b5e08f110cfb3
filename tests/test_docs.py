"""The README and docs/: every relative link resolves (file and #anchor), the README stays a short page for
users, and the prose carries no history (session numbers, commit hashes, issue references)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").rglob("*.md")])
README_MAX_BYTES = 12 * 1024

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# 7-40 hex characters with at least one digit and one letter, standing alone: an abbreviated commit hash
HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
HISTORY = re.compile(r"\bsessions? \d+|\bissue #?\d+|\bthe issue\b|\bPR #\d+", re.I)


def prose(path: Path) -> str:
    """The page without its fenced code blocks (commands there are not links or history)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for title in HEADING.findall(prose(path)):
        text = re.sub(r"[`*_]", "", title).strip().lower()
        out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(prose(path)) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page):
    assert broken_links(page) == [], page.relative_to(ROOT)


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_prose_names_no_sessions_commits_or_issues(page):
    text = page.read_text(encoding="utf-8")
    found = HISTORY.findall(text) + HASH.findall(text)
    assert found == [], f"{page.relative_to(ROOT)} narrates history: {found}"


def test_readme_is_a_short_page_for_users_that_links_the_docs():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= README_MAX_BYTES, f"README.md is {len(text.encode())} bytes"
    assert "session " not in text.lower()
    for section in ("## Set up", "## Quick start on a CPU", "## The CLI", "## Reproducing the paper", "## Curation"):
        assert section in text, section
    assert "## Scaling and GPU hosts" in text and "docs/vllm.md" in text
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
    unlinked = [p.relative_to(ROOT) for p in DOCS if p != README and p.resolve() not in linked]
    assert unlinked == [], f"docs the README does not link: {unlinked}"


def cli_table_commands(text: str) -> list[tuple[list[str], list[str]]]:
    """(command path alternatives, options) of each `rods ...` span in the first cell of the README's CLI table."""
    out = []
    for row in re.findall(r"^\| (`rods .*?) \| ", text, re.M):
        for span in re.findall(r"`(rods [^`]+)`", row.replace("\\|", "|")):
            words = span.split()[1:]
            names = [words[0]]
            for w in words[1:]:
                if w.startswith(("-", "[")):
                    break
                names += [n for n in w.split("|") if re.fullmatch(r"[a-z][a-z-]*", n)]
            out.append((names, re.findall(r"(?<![\w-])--[a-z][a-z-]*", span)))
    return out


def test_the_readme_cli_table_names_real_commands_and_options():
    import typer.main

    from rods_lab.cli import app

    root = typer.main.get_command(app)
    rows = cli_table_commands(README.read_text(encoding="utf-8"))
    assert len(rows) >= 15
    for names, options in rows:
        top, *subs = names
        assert top in root.commands, f"rods {top}: no such command"
        commands = [root.commands[top].commands[s] for s in subs] if subs else [root.commands[top]]
        for cmd in commands:
            known = {o for p in cmd.params for o in p.opts}
            assert set(options) <= known, f"rods {' '.join(names)}: {sorted(set(options) - known)} not options"


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The helpers above find a broken link, a missing anchor, a commit hash and a session number."""
    (tmp_path / "a.md").write_text("# Top part\n[x](b.md) [y](#top-part) [z](#nowhere) [w](https://e.org)\n")
    assert relative_links(tmp_path / "a.md") == ["b.md", "#top-part", "#nowhere"]
    assert anchors(tmp_path / "a.md") == {"top-part"}
    assert broken_links(tmp_path / "a.md") == ["b.md: no such file", "#nowhere: no heading #nowhere in a.md"]
    assert HASH.findall("code of c650205 at 2026-12-02, 1e15, sha256, tiny-demo") == ["c650205"]
    s, i = "session", "issue"  # the sample is built from parts, so this file itself carries no history
    assert HISTORY.findall(f"as in {s} 7, before {i} #15") == [f"{s} 7", f"{i} #15"]
    row = "| `rods runs list\\|show ID\\|stop ID`, `rods sft --model DIR [--demo \\| --tasks F]` | x |"
    assert cli_table_commands(row) == [
        (["runs", "list", "show", "stop"], []),
        (["sft"], ["--model", "--demo", "--tasks"]),
    ]


# `--run-id X`, `--resume X`, `--run X`, `runs/X/` in the docs; placeholders (ID, <id>) are not ids, nor is a
# link to a folder of run summaries (`[runs/](runs/)`)
RUN_ID_USE = re.compile(r"(?:--run-id|--resume|--run)\s+([^\s`\\\]]+)|\bruns/([^/\s`()\[\]]+)/")


def test_every_run_id_in_the_docs_follows_the_id_rule():
    """A run id a reader copies from the docs starts, resumes and shows in the app (rods_core.ids's rule);
    a shell loop's `$b` stands for each of its words."""
    from rods_core.ids import is_valid_id

    seen = []
    for path in DOCS:
        for m in RUN_ID_USE.finditer(path.read_text(encoding="utf-8")):
            given = m.group(1) or m.group(2)
            if given in ("ID", "<id>", "<run>", "<run") or given.startswith("<"):
                continue
            seen.append(given)
            assert is_valid_id(given.replace("$b", "static")), f"{path.name}: run id {given!r} breaks the id rule"
    assert "paper_rods" in seen


# ----- docs match the code: versions against the pins, dotted names against the modules -------------------------
PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*==\s*([0-9][0-9A-Za-z.*]*)")
EXTRA_PIN = re.compile(r'"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([0-9][^"]*)"')
# a version named after a requirement word or a comparison is another package's need, not our pin
NOT_OURS = re.compile(r"(?:needs|wants|requires|[<>=~!]=?)\s*$")
TOPS = ("rods_core", "rods_lab", "storage", "bench")
DOTTED = re.compile(r"(?<![\w/.-])((?:rods_core|rods_lab|storage|bench)(?:/\w+)*(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "jsonl", "txt", "csv", "parquet", "sqlite", "duckdb", "png"}


def pins(root: Path = ROOT) -> dict[str, str]:
    """Package (lower case) -> pinned version, from requirements*.txt and pyproject.toml's extras."""
    out: dict[str, str] = {}
    for req in sorted(root.glob("requirements*.txt")):
        for line in req.read_text(encoding="utf-8").splitlines():
            if m := PIN.match(line.split("#")[0]):
                out[m.group(1).lower()] = m.group(2)
    for m in EXTRA_PIN.finditer((root / "pyproject.toml").read_text(encoding="utf-8")):
        out.setdefault(m.group(1).lower(), m.group(2))
    return out


def versions_off_pin(text: str, pinned: dict[str, str]) -> list[str]:
    """`pkg X.Y[.Z]` in the text whose components differ from the pin's (a `*` in the pin matches any)."""
    bad = []
    for pkg, pin in pinned.items():
        for m in re.finditer(rf"(?<![\w/<>=.-]){re.escape(pkg)}[ -]v?(\d+(?:\.\d+)+)(?![\w.])", text, re.I):
            if NOT_OURS.search(text[max(0, m.start() - 12) : m.start()]):
                continue
            named, want = m.group(1).split("."), pin.split(".")
            if any(w not in ("*", n) for n, w in zip(named, want, strict=False)):
                bad.append(f"{m.group(0)} (pinned {pkg}=={pin})")
    return bad


def resolves(name: str, root: Path = ROOT) -> bool:
    """Whether a dotted name (`storage.control.ControlDB.heartbeat`, `rods_lab/processes.stop_run`) is a module
    of the project, or an attribute chain on one; a file name (`storage/control.py`) counts as its file."""
    import importlib

    parts = re.split(r"[./]", name)
    if parts[-1] in FILE_SUFFIXES:
        return (root / name).exists() or (root / name).parent.is_dir()
    for i in range(len(parts), 0, -1):
        where = root.joinpath(*parts[:i])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            obj = importlib.import_module(".".join(parts[:i]))
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


def test_every_version_named_in_the_docs_is_the_pinned_one():
    pinned = pins()
    bad = [f"{p.relative_to(ROOT)}: {v}" for p in DOCS for v in versions_off_pin(p.read_text(encoding="utf-8"), pinned)]
    assert not bad, "versions in the docs that are not the pins (fix the page, or the pin):\n" + "\n".join(bad)


def test_every_dotted_name_in_the_docs_exists():
    bad = [
        f"{p.relative_to(ROOT)}: {m.group(1)}"
        for p in DOCS
        for m in DOTTED.finditer(p.read_text(encoding="utf-8"))
        if not resolves(m.group(1))
    ]
    assert not bad, "names in the docs that the code does not have (rename them as the code does):\n" + "\n".join(bad)


def test_the_code_checks_catch_what_they_are_for():
    pinned = {"transformers": "5.17.0", "numpy": "2.3.*", "torch": "2.13.0"}
    text = "transformers 5.24 and numpy 2.4; numpy 2.3, torch 2.13.0, transformers < 5.18, vllm 0.33 needs torch 2.14"
    assert versions_off_pin(text, pinned) == [
        "transformers 5.24 (pinned transformers==5.17.0)",
        "numpy 2.4 (pinned numpy==2.3.*)",
    ]
    assert resolves("storage.control.ControlDB.heartbeat") and resolves("rods_lab/processes.stop_run")
    assert resolves("storage/control.py") and not resolves("rods_core.ranks.handoff_to_accelerate")
    assert not resolves("storage.control.process_start")
