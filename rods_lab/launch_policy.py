"""What a run launched from the app may take from the app's host: the environment variables it inherits and
the ones it may name as an LLM endpoint's API key. Both come from the lab's admin (`[rods.launch]` in
.streamlit/secrets.toml), never from the launch form.

The app's own environment holds its secrets (the control store's URL with its password, provider tokens); a
launcher writes the run config, and the LLM backend sends `Bearer $<synthesis.api_key_env>` to the config's
`endpoint_url`. So a run starts with the variables named here only, and `api_key_env` must be one the admin
listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# What a training process reads or its libraries need; nothing here holds a credential.
RUN_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "XDG_CACHE_HOME",
    "RODS_CONTROL_DB",  # the trainer records to the store; it never names it as a key (see api_key_problem)
    "RODS_WORKSPACE",
    "RODS_RUNS",
    "RODS_THREADS",
    "RODS_EXPERIMENTS",
    "RODS_AUDIT_DIR",
    "RODS_GPU_MEMORY",
    "RODS_FAULT",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "TRANSFORMERS_OFFLINE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    # CPU kernel choices: a run repeats another's figures only under the same kernels (rods_lab/experiments/machine.py), and
    # some processors need OpenBLAS's core type set or older builds compute wrong results
    "ATEN_CPU_CAPABILITY",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "VLLM_CPU_KVCACHE_SPACE",
)
SECTION = "[rods.launch]"


@dataclass(frozen=True)
class LaunchPolicy:
    """The admin's rules for launched runs: `api_key_envs` a run may name as its endpoint's key (and so
    inherits), `env` more variables every run inherits. The default allows no key and adds nothing."""

    api_key_envs: frozenset[str] = frozenset()
    env: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> LaunchPolicy:
        """From the secrets' `[rods.launch]` (`api_key_envs = [...]`, `env = [...]`); unknown keys fail."""
        section = (settings.get("rods") or {}).get("launch") or {}
        unknown = set(section) - {"api_key_envs", "env"}
        if unknown:
            raise ValueError(
                f".streamlit/secrets.toml {SECTION}: unknown key(s) {sorted(unknown)}; keys: api_key_envs, env"
            )
        return cls(frozenset(map(str, section.get("api_key_envs", ()))), frozenset(map(str, section.get("env", ()))))

    def api_key_problem(self, name: str | None) -> str | None:
        """Why a run may not name `name` as synthesis.api_key_env (None: it may)."""
        if name is None or name in self.api_key_envs:
            return None
        allowed = ", ".join(sorted(self.api_key_envs)) or "none yet"
        return (
            f"synthesis.api_key_env: {name!r} is not a variable the lab's admin allows as an API key (allowed: "
            f"{allowed}); the admin adds it to api_key_envs in {SECTION} of .streamlit/secrets.toml"
        )

    def run_environment(self, environ: Mapping[str, str], key: str | None = None) -> dict[str, str]:
        """The variables a launched run gets from `environ`: RUN_ENV, the admin's `env`, and `key` (the run's
        allowed api_key_env) when given."""
        names: Iterable[str] = (*RUN_ENV, *sorted(self.env), *([key] if key else []))
        return {n: environ[n] for n in names if n in environ}
