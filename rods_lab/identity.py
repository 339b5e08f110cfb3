"""Who acts in the app: Streamlit's own OIDC login (st.login / st.user, configured in .streamlit/secrets.toml)
and the lab's roles, for every page and every service that changes something.

With `[auth]` configured every page needs a logged-in user, and decisions, comments, seed edits, launches and
stops record the identity provider's email. Roles come from `[rods.roles]` in the same file: reviewers decide
and curate (decisions, comments, seeds), launchers start and stop runs, everyone else reads. The services
(rods_lab.review, rods_lab.launch, rods_lab.paths' seed imports) call `require`, so hiding a button is never
the only guard. Without `[auth]` the app is a one-person tool on 127.0.0.1: the reviewer types a name, which
is not verified, and everyone may do everything; `make app-lab` refuses to serve beyond the machine so.
"""

from __future__ import annotations

import contextlib
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

SECRETS_FILE = Path(".streamlit") / "secrets.toml"
AUTH_SHARED = ("redirect_uri", "cookie_secret")  # Streamlit's [auth] keys shared by every provider
AUTH_PROVIDER = ("client_id", "client_secret", "server_metadata_url")  # in [auth] or in [auth.<provider>]
ROLES = {"reviewer": "decide on and curate tasks (decisions, comments, seeds)", "launcher": "start and stop runs"}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class Refused(PermissionError):
    """An action the acting user's roles do not allow; the message says who may."""


@dataclass(frozen=True)
class RolePolicy:
    """The roles allowlist (`[rods.roles]`): lower-cased emails per role."""

    reviewers: frozenset[str] = frozenset()
    launchers: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RolePolicy:
        roles = (settings.get("rods") or {}).get("roles") or {}
        unknown = set(roles) - {f"{r}s" for r in ROLES}
        if unknown:
            raise ValueError(
                f"{SECRETS_FILE} [rods.roles]: unknown key(s) {sorted(unknown)}; the roles are reviewers, launchers"
            )
        return cls(
            **{k: frozenset(str(e).strip().lower() for e in roles.get(k, ())) for k in ("reviewers", "launchers")}
        )

    def members(self, role: str) -> frozenset[str]:
        return getattr(self, f"{role}s")


@dataclass(frozen=True)
class Actor:
    """Who acts: the identity provider's email (`verified`), or the name typed when auth is off."""

    name: str
    verified: bool
    roles: frozenset[str]
    policy: RolePolicy = field(default_factory=RolePolicy, repr=False)

    def may(self, role: str) -> bool:
        return role in self.roles

    @property
    def label(self) -> str:
        held = ", ".join(sorted(self.roles)) if self.roles else "read-only"
        return f"{self.name} ({held})"


def local(name: str = "") -> Actor:
    """The app without auth (one machine): the typed name, unverified, every role."""
    return Actor(name.strip(), False, frozenset(ROLES))


def actor_of(email: str, policy: RolePolicy) -> Actor:
    """A logged-in user with the roles the allowlist gives that email."""
    key = email.strip().lower()
    return Actor(email.strip(), True, frozenset(r for r in ROLES if key in policy.members(r)), policy)


def require(actor: Actor, role: str, what: str) -> None:
    """Raise Refused, naming who may, unless `actor` holds `role`; the services call it before they act."""
    if actor.may(role):
        return
    who = ", ".join(sorted(actor.policy.members(role))) or "nobody yet"
    raise Refused(
        f"{actor.name or 'this user'} may not {what}: only {role}s may ({who}). Ask whoever runs the lab's app to "
        f"add you to [rods.roles] {role}s in {SECRETS_FILE}."
    )


# ----- the settings ---------------------------------------------------------------------------------------
def auth_missing(settings: Mapping[str, Any]) -> list[str]:
    """The `[auth]` keys st.login needs that `settings` (the secrets) lacks: the shared ones in [auth], the
    provider's in [auth] or in one [auth.<provider>] table. Empty: login is configured."""
    auth = settings.get("auth") or {}
    missing = [f"auth.{k}" for k in AUTH_SHARED if not auth.get(k)]
    tables = [(f"auth.{n}.", v) for n, v in auth.items() if isinstance(v, Mapping)] or [("auth.", auth)]
    best = min(([f"{p}{k}" for k in AUTH_PROVIDER if not (t.get(k) or auth.get(k))] for p, t in tables), key=len)
    return missing + best


def read_settings(path: Path = SECRETS_FILE) -> dict[str, Any]:
    """The secrets file as a dict ({} when it is missing); a file that is not TOML says where and why."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e}); fix the file") from e


def lab_serving_problem(host: str, path: Path = SECRETS_FILE) -> str | None:
    """Why the app must not serve on `host` (None: it may). Beyond this machine, login must be configured."""
    if host in LOCAL_HOSTS:
        return None
    try:
        missing = auth_missing(read_settings(path))
    except ValueError as e:
        return str(e)
    if not missing:
        return None
    return (
        f"refusing to serve the lab app on {host} without a login: {path} lacks {', '.join(missing)}. Configure "
        "your identity provider there (docs/app.md, 'Serving the lab'), or serve on 127.0.0.1 with `make app`."
    )


def main(argv: list[str]) -> int:
    """`python -m rods_lab.identity HOST [SECRETS]` (`make app-lab`): exit 2 with the reason when the app
    must not serve on HOST with the secrets file SECRETS (default .streamlit/secrets.toml)."""
    problem = lab_serving_problem(argv[0] if argv else "127.0.0.1", Path(argv[1]) if len(argv) > 1 else SECRETS_FILE)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return 0


# ----- in the app -----------------------------------------------------------------------------------------
def _secrets() -> dict[str, Any]:
    return st.secrets.to_dict() if st.secrets.load_if_toml_exists() else {}


def auth_on() -> bool:
    """Login is configured (an `[auth]` table is present); an incomplete one stops the page in `gate`."""
    return bool(_secrets().get("auth"))


def current() -> Actor:
    """The acting user: the logged-in email with its roles, or (auth off) the name typed on the Review page."""
    if not auth_on():
        return local(str(st.session_state.get("review_reviewer") or ""))
    if not st.user.is_logged_in:
        return Actor("", True, frozenset())
    return actor_of(str(st.user.email or ""), RolePolicy.from_settings(_secrets()))


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """Show a refused action's message (who may do it) where the action was asked for."""
    try:
        yield
    except Refused as e:
        st.error(str(e))


def gate(account: bool = False) -> None:
    """The first line of every page (through ui.page_setup) and of app.py: with auth configured, a page shows
    only a login button until the user is logged in. `account`: show who is logged in, with Log out."""
    settings = _secrets()
    if not settings.get("auth"):
        return
    if missing := auth_missing(settings):
        st.error(f"Login is half configured: {SECRETS_FILE} lacks {', '.join(missing)} (docs/app.md).")
        st.stop()
    if not st.user.is_logged_in:
        st.info("RODS Lab needs you to log in: decisions, launches and seed edits are recorded under your name.")
        st.button("Log in", key="identity_login", type="primary", on_click=st.login)
        st.stop()
    if account:
        me = current()
        st.sidebar.caption(f"Logged in as **{me.name}** · {', '.join(sorted(me.roles)) or 'read-only'}")
        st.sidebar.button("Log out", key="identity_logout", on_click=st.logout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
