"""Reading a run config: the YAML file, `key.path=value` overrides, validation errors that name each field."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rods_core.config.inputs import DoorError, read_text, yaml_value
from rods_core.config.run import RunConfig
from rods_core.config.synth import renamed_key, renamed_sections


class ConfigError(DoorError):
    """A run config could not be read; the message names the file and every bad field."""


def format_validation_error(err: ValidationError, source: str = "config") -> str:
    errors = err.errors()
    lines = [f"{source}: {len(errors)} problem(s):"]
    for e in errors[:20]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        hint = (
            " (unknown field: check the spelling against `rods config show`)" if e["type"] == "extra_forbidden" else ""
        )
        lines.append(f"  {loc}: {e['msg']}{hint}")
    if len(errors) > 20:
        lines.append(f"  ... and {len(errors) - 20} more")
    return "\n".join(lines)


# ----- overrides: `key.path=value` (the CLI's --set, the app's "more fields") ----------------------------
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def parse_override(item: str, where: str = "--set") -> tuple[str, Any]:
    """`grpo.max_steps=5` -> ("grpo.max_steps", 5); the value is YAML. ConfigError names `where` and the key."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{where}: {item[:80]!r}: expected key.path=value")
    bad = [p for p in key.split(".") if not _FIELD.fullmatch(p)]
    if bad:
        raise ConfigError(f"{where}: {key[:80]!r}: {bad[0][:40]!r} is not a field name (letters, digits, _)")
    key = renamed_key(key, where)
    try:
        return key, yaml_value(raw)
    except DoorError as e:
        raise ConfigError(f"{where}: {key}: not a YAML value: {e}") from None


def parse_overrides(items: str | Iterable[str], source: str | None = None) -> dict[str, Any]:
    """Several overrides: a list (one per --set) or a text, one per line (blank and # lines skipped).
    Errors name `source` (default: --set for a list, "overrides line N" for a text)."""
    text = isinstance(items, str)
    source = source or ("overrides" if text else "--set")
    out: dict[str, Any] = {}
    for n, item in enumerate(items.splitlines() if text else items, start=1):
        if text and (not item.strip() or item.strip().startswith("#")):
            continue
        key, value = parse_override(item.strip() if text else item, f"{source} line {n}" if text else source)
        out[key] = value
    return out


def set_dotted(data: dict, key: str, value: Any) -> None:
    """data["a"]["b"] = value for key "a.b", creating sections; ConfigError when a parent is not a section."""
    node = data
    *parents, leaf = key.split(".")
    for i, p in enumerate(parents):
        if node.get(p) is None:
            node[p] = {}
        elif not isinstance(node[p], dict):
            at = ".".join(parents[: i + 1])
            raise ConfigError(f"{key}: {at} is a value ({type(node[p]).__name__}), not a section; {key} cannot be set")
        node = node[p]
    node[leaf] = value


EXTENDS = "extends"


def read_config_data(path: str | Path) -> dict:
    """A config file's mapping, before validation, with its `extends:` chain merged in: `extends: base.yaml`
    (a path relative to this file's folder) names a config whose mapping this file's is deep-merged over
    (sections merge key by key; a value, list included, replaces the base's). ConfigError, naming the file,
    when a file of the chain is missing, a folder, not UTF-8, not YAML, too deep or not a mapping, or when the
    chain comes back to a file it passed."""
    return _read_chain(Path(path), ())


def _read_chain(path: Path, seen: tuple[Path, ...]) -> dict:
    data = _read_one(path)
    base = data.pop(EXTENDS, None)
    if base is None:
        return data
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{path}: extends: must be the path of another config file (relative to {path.parent})")
    here = path.resolve()
    target = (path.parent / base).resolve()
    chain = (*seen, here)
    if target in chain:
        loop = " -> ".join(str(p) for p in (*chain, target))
        raise ConfigError(f"{path}: extends: {base}: the chain comes back to a file it passed ({loop}); remove one")
    if not target.is_file():
        raise ConfigError(f"{path}: extends: {base}: no such config file ({target})")
    return deep_merge(_read_chain(target, chain), data)


def _read_one(path: Path) -> dict:
    try:
        data = yaml_value(read_text(path, "config file"), str(path)) or {}
    except DoorError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of fields")
    try:
        return renamed_sections(data, str(path))  # an old section name, read as the new one (with a note)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def deep_merge(base: dict, over: dict) -> dict:
    """`over` merged onto a copy of `base`: mappings merge key by key, anything else in `over` replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | Path, overrides: dict | None = None) -> RunConfig:
    """Read a YAML run config (plus dotted-key overrides) and validate it."""
    data = read_config_data(path)
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, str(path))) from None


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
