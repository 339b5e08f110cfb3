"""The model-folder door: a local Hugging Face folder (or a hub id already in the local cache) holding a config,
weights, a tokenizer and, for a tiny model, a card of the chat format it was trained on; nothing is downloaded."""

from __future__ import annotations

import re
from pathlib import Path

from rods_core.benchmarks.toolcalls.chat import CHAT_FORMAT
from rods_core.config import PromptConfig
from rods_core.config.inputs import DoorError, decode, filesystem_door, json_value, read_bytes

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
    with filesystem_door(p, "model folder"):
        return _check_model_dir(p, field)


def _check_model_dir(p: Path, field: str) -> Path:
    build = f"build one with `rods model init-tiny --out {p}` then `rods sft`, or set model.build_if_missing: true"
    if not p.exists():
        raise DoorError(f"{field}: {p}: no such folder; {build}")
    if not p.is_dir():
        raise DoorError(f"{field}: {p}: is a file, not a model folder")
    if (p / "adapter_config.json").is_file() and not (p / "config.json").is_file():
        return _check_adapter_dir(p, field)
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
        if card.get("kind") == "rods-tiny" and card.get("chat_format") != CHAT_FORMAT:
            raise DoorError(
                f"{field}: {p}: a tiny model of an older chat format ({card.get('chat_format', 'Python-list calls')}"
                f", not {CHAT_FORMAT}); delete the folder and rebuild it (`rods model demo`, or init-tiny + sft)"
            )
        if "prompt" in card:
            from pydantic import ValidationError

            try:
                PromptConfig.model_validate(card["prompt"])
            except ValidationError as e:
                loc = ".".join(map(str, e.errors()[0]["loc"]))
                raise DoorError(
                    f"{field}: {card_path}: prompt{'.' + loc if loc else ''}: {e.errors()[0]['msg']}"
                ) from None
    return p


def _check_adapter_dir(p: Path, field: str) -> Path:
    """A LoRA adapter folder (a `model.lora` run's final/): adapter weights, a tokenizer, and a base model that is
    itself a usable model folder (or a cached hub id)."""
    adapter = _json_object(p / "adapter_config.json", "adapter config", field)
    base = adapter.get("base_model_name_or_path")
    if not isinstance(base, str) or not base:
        raise DoorError(f"{field}: {p / 'adapter_config.json'}: base_model_name_or_path: missing")
    if not any((p / f).is_file() for f in ("adapter_model.safetensors", "adapter_model.bin")):
        raise DoorError(f"{field}: {p}: a LoRA adapter folder without adapter weights (adapter_model.safetensors)")
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        raise DoorError(f"{field}: {p}: no tokenizer ({' or '.join(TOKENIZER_FILES)})")
    check_model_dir(model_folder(base, field=f"{field} (the adapter's base model)"), f"{field} (the adapter's base)")
    return p
