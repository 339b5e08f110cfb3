"""The audit chain's secrets and anchors, kept outside the control store: the HMAC keys every event is signed
with, and each run's recorded start and head. Someone who can write the store but not this folder can neither
recompute a chain nor remove its last events (or a run's whole trail) unnoticed.

The folder is `$RODS_AUDIT_DIR`, else `audit/` beside a SQLite store, else (PostgreSQL) `<workspace>/audit`.
`keys` holds one key a line (`<key id> <hex key>`, the last one signs new events, older ones still verify
theirs); it is created with a random key on first use, readable by its owner only. `heads/<store>/<run>.json`
holds a run's first and latest event hash with their sequence number, signed too. Rotation: `rotate_key`
appends a new key; keep the old lines as long as events they signed must verify (docs/control-store.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

AUDIT_DIR_ENV = "RODS_AUDIT_DIR"
KEYS_FILE = "keys"
HEADS = "heads"
KEY_BYTES = 32


class AuditKeyError(RuntimeError):
    """The keys file cannot be read or written: the message names it and the fix."""


@dataclass(frozen=True)
class Head:
    """A run's chain as last recorded outside the store: its first event's hash and its latest one's."""

    seq: int
    head: str
    start: str | None


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:12]


class AuditKeys:
    """The keys folder of one store: signing keys by id, and the recorded heads of that store's runs."""

    def __init__(self, folder: str | Path, store: str):
        self.folder = Path(folder)
        self.store_tag = hashlib.sha256(store.encode()).hexdigest()[:16]  # one store's runs apart from another's
        self._keys: dict[str, bytes] | None = None

    # ----- keys -----------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.folder / KEYS_FILE

    def keys(self) -> dict[str, bytes]:
        """Every key by id, in file order (the last signs); {} while there is no keys file (verifying makes none)."""
        if self._keys is None:
            self._keys = self._read() if self.path.exists() else {}
        return self._keys

    def _read(self) -> dict[str, bytes]:
        try:
            lines = [ln.split() for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            keys = {i: bytes.fromhex(k) for i, k in (ln for ln in lines if not ln[0].startswith("#"))}
        except (OSError, ValueError) as e:
            raise AuditKeyError(
                f"audit keys {self.path}: cannot read them ({e}); each line is '<key id> <hex key>' "
                f"(set ${AUDIT_DIR_ENV} to the folder that holds the lab's keys)"
            ) from e
        if not keys:
            raise AuditKeyError(f"audit keys {self.path}: no key; remove the file to start a new one")
        return keys

    def signing(self) -> tuple[str, bytes]:
        """(id, key) of the key new events are signed with; the first write makes the keys file, one random key."""
        if not self.keys():
            self.rotate_key()
        return next(reversed(self.keys().items()))

    def rotate_key(self) -> str:
        """Append a new random key, which signs from now on; returns its id. Old keys stay to verify old events."""
        key = secrets.token_bytes(KEY_BYTES)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(f"{key_id(key)} {key.hex()}\n")
        self._keys = None
        return key_id(key)

    def sign(self, kid: str, data: bytes) -> str | None:
        """HMAC-SHA256 of `data` under key `kid`; None when this folder does not hold that key."""
        key = self.keys().get(kid)
        return hmac.new(key, data, hashlib.sha256).hexdigest() if key is not None else None

    # ----- heads ----------------------------------------------------------------------------------------
    def _head_path(self, run_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id, flags=re.ASCII)
        return self.folder / HEADS / self.store_tag / f"{safe}.json"

    def _head_mac(self, run_id: str, head: Head, kid: str) -> str | None:
        body = json.dumps([run_id, head.seq, head.head, head.start]).encode()
        return self.sign(kid, body)

    def record_head(self, run_id: str, head: Head) -> None:
        """Write the run's head (never back: a slower writer's older head is a lower bound, kept as it is)."""
        old = self.head(run_id)
        if old is not None and not isinstance(old, str) and old.seq >= head.seq:
            return
        start = head.start or (old.start if isinstance(old, Head) else None)
        new = Head(head.seq, head.head, start)
        kid, _ = self.signing()
        body = {"run_id": run_id, "seq": new.seq, "head": new.head, "start": new.start, "key_id": kid}
        body["mac"] = self._head_mac(run_id, new, kid)
        path = self._head_path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, path)

    def head(self, run_id: str) -> Head | str | None:
        """The run's recorded head; None when none was recorded; a string saying why when the file was edited."""
        path = self._head_path(run_id)
        if not path.exists():
            return None
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            head = Head(int(body["seq"]), str(body["head"]), body.get("start"))
            good = self._head_mac(run_id, head, str(body["key_id"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"the head recorded outside the store ({path}) cannot be read: {e}"
        if good is None or not hmac.compare_digest(good, str(body.get("mac"))):
            return f"the head recorded outside the store ({path}) was edited: its signature does not match"
        return head


def audit_folder(store_file: Path | None, workspace: str | Path | None = None) -> Path:
    """Where a store's keys and heads live: $RODS_AUDIT_DIR, else `audit/` beside a SQLite file, else (a
    server's store) `<workspace>/audit`, the default workspace when none is given."""
    if os.environ.get(AUDIT_DIR_ENV):
        return Path(os.environ[AUDIT_DIR_ENV])
    if store_file is not None:
        return store_file.parent / "audit"
    return Path(workspace or "workspace") / "audit"
