"""The synthesis stages' LLM prompts: built-in files in rods_core/benchmarks/bfcl/synth/prompts, each replaceable by a
same-named file in a folder of the user's; every file is checked for its placeholders when read."""

from __future__ import annotations

from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).parent.parent / "benchmarks" / "bfcl" / "synth" / "prompts"


PROMPT_FIELDS: dict[str, frozenset[str]] = {
    "rewrite_system": frozenset(),
    "rewrite_user": frozenset({"turns", "n_turns"}),
    "critique_system": frozenset(),
    "critique_user": frozenset({"turns"}),
}


def _check_prompt(path: Path, text: str, name: str) -> str:
    if not text.strip():
        raise ValueError(f"{path}: prompt {name!r} is empty")
    if not PROMPT_FIELDS[name]:
        return text
    template = Template(text)
    if not template.is_valid():
        raise ValueError(f"{path}: a '$' that starts no placeholder; write '$$' for a literal dollar sign")
    used = set(template.get_identifiers())
    unknown, missing = used - PROMPT_FIELDS[name], PROMPT_FIELDS[name] - used
    if unknown or missing:
        parts = [f"unknown placeholder(s) {sorted('$' + u for u in unknown)}"] if unknown else []
        parts += [f"missing placeholder(s) {sorted('$' + m for m in missing)}"] if missing else []
        raise ValueError(f"{path}: {'; '.join(parts)}; {name} uses {sorted('$' + f for f in PROMPT_FIELDS[name])}")
    return text


class Prompts:
    """The stage prompts: built-in files, each replaced by a same-named file in `folder` when there is one."""

    def __init__(self, folder: str | Path | None = None):
        override = Path(folder) if folder else None
        if override is not None:
            if not override.is_dir():
                raise ValueError(f"prompts_dir {override} is not a folder")
            for path in sorted(override.glob("*.md")):
                if path.stem not in PROMPT_FIELDS:
                    raise ValueError(f"{path}: unknown prompt file; the prompts are {sorted(PROMPT_FIELDS)} (.md)")
        self.texts: dict[str, str] = {}
        for name in PROMPT_FIELDS:
            path = override / f"{name}.md" if override and (override / f"{name}.md").is_file() else None
            path = path or PROMPT_DIR / f"{name}.md"
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ValueError(f"{path}: cannot read the prompt ({type(e).__name__})") from None
            self.texts[name] = _check_prompt(path, text, name)

    def messages(self, stage: str, **fields: object) -> list[dict]:
        """The system and user messages of `stage` ('rewrite' or 'critique') with `fields` filled in."""
        user = Template(self.texts[f"{stage}_user"]).substitute({k: str(v) for k, v in fields.items()})
        return [{"role": "system", "content": self.texts[f"{stage}_system"]}, {"role": "user", "content": user}]
