"""Who acts in the app: Streamlit's own OIDC login (st.login / st.user, configured in .streamlit/secrets.toml)
and the lab's roles, for every page and every service that changes something.

With `[auth]` configured every page needs a logged-in user, and decisions, comments, seed edits, launches and
stops record the identity provider's email. Roles come from `[rods.roles]` in the same file: reviewers decide
and curate (decisions, comments, seeds), launchers start and stop runs, everyone else reads. The services
(rods_lab.review, rods_lab.launch, rods_lab.paths' seed imports) call `require`, so hiding a button is never
the only guard. Without `[auth]` the app is a one-person tool on 127.0.0.1: the reviewer types a name, which
is not verified, and everyone may do everything. So the app itself (`gate`, the first call of every page)
refuses to serve so beyond this machine: bound to another address than loopback, or reached under another name
than localhost (a DNS-rebinding page), it shows only what to configure. With `[auth]` it refuses a cookie secret
anyone could know (too short, the docs' placeholder: the login cookie could be forged) and an email the provider
did not verify (roles key on the email).
"""

from __future__ import annotations

import contextlib
import math
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
MIN_SECRET_BYTES = 32  # st.login signs its cookie with auth.cookie_secret: whoever knows it logs in as anyone
PLACEHOLDER_MARKS = ("…", "python -c", "long random", "change me", "changeme")  # the docs' and common placeholders


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
    issuer: str = ""  # the identity provider that vouched for `name` (its OIDC `iss`); "" without login

    @property
    def signed(self) -> str:
        """Who acted, as the audit chain records it: the email with the provider that vouched for it."""
        return f"{self.name} via {self.issuer}" if self.issuer else self.name

    def may(self, role: str) -> bool:
        return role in self.roles

    @property
    def label(self) -> str:
        held = ", ".join(sorted(self.roles)) if self.roles else "read-only"
        return f"{self.name} ({held})"


def local(name: str = "") -> Actor:
    """The app without auth (one machine): the typed name, unverified, every role."""
    return Actor(name.strip(), False, frozenset(ROLES))


def actor_of(email: str, policy: RolePolicy, issuer: str = "") -> Actor:
    """A logged-in user with the roles the allowlist gives that email."""
    key = email.strip().lower()
    return Actor(email.strip(), True, frozenset(r for r in ROLES if key in policy.members(r)), policy, issuer)


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


def secret_problem(secret: str) -> str | None:
    """Why `secret` cannot sign the login cookie (None: it can): shorter than MIN_SECRET_BYTES, too few
    distinct characters for that many random bytes, or a placeholder copied from the docs."""
    if any(mark in secret.lower() for mark in PLACEHOLDER_MARKS):
        return "auth.cookie_secret is a placeholder"
    bits = len(secret) * math.log2(max(len(set(secret)), 1))
    if len(secret.encode()) < MIN_SECRET_BYTES or bits < 4 * MIN_SECRET_BYTES:
        return f"auth.cookie_secret is not {MIN_SECRET_BYTES} random bytes ({len(secret)} character(s))"
    return None


def auth_problems(settings: Mapping[str, Any]) -> list[str]:
    """What keeps login from being safe: the missing `[auth]` keys (`auth_missing`), then a cookie secret
    anyone could know. Empty: login is configured."""
    missing = auth_missing(settings)
    weak = None if "auth.cookie_secret" in missing else secret_problem(str(settings["auth"]["cookie_secret"]))
    return missing + ([weak] if weak else [])


def _problems_text(problems: list[str], where: Path | str) -> str:
    """`where lacks k1, k2` for missing keys, `where: reason` otherwise, with the fix."""
    missing = [p for p in problems if p.startswith("auth.") and " " not in p]
    said = [f"{where} lacks {', '.join(missing)}"] if missing else []
    said += [f"{where}: {p}" for p in problems if p not in missing]
    fix = (
        "set auth.cookie_secret to the output of `python -c 'import secrets; print(secrets.token_hex(32))'`"
        if any("cookie_secret is" in p for p in problems)
        else "configure your identity provider there (docs/app.md, 'Serving the lab')"
    )
    return f"{'; '.join(said)}. Fix: {fix}"


def read_settings(path: Path = SECRETS_FILE) -> dict[str, Any]:
    """The secrets file as a dict ({} when it is missing); a file that is not TOML says where and why."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e}); fix the file") from e


def serving_problem(address: str, settings: Mapping[str, Any], where: Path | str = SECRETS_FILE) -> str | None:
    """Why the app must not serve when bound to `address` with these secrets (None: it may). Beyond this
    machine (any address but loopback; "" binds every interface), login must be configured and safe; with
    `[auth]` present at all, it must be safe wherever the app serves."""
    problems = auth_problems(settings)
    if not problems or (address in LOCAL_HOSTS and not settings.get("auth")):
        return None
    return (
        f"refusing to serve the lab app on {address or 'every interface'} without a safe login: "
        f"{_problems_text(problems, where)}; or serve on 127.0.0.1 without [auth] with `make app`."
    )


def lab_serving_problem(host: str, path: Path = SECRETS_FILE) -> str | None:
    """Why the app must not serve on `host` with the secrets file `path` (None: it may)."""
    try:
        return serving_problem(host, read_settings(path), path)
    except ValueError as e:
        return str(e)


def host_problem(host: str | None) -> str | None:
    """Why a request that named `host` (its Host header) must not reach the app without login (None: it may):
    a name other than this machine's is a page elsewhere that rebound its own name to 127.0.0.1, or a proxy
    that serves the lab without login. No header: not a network request (AppTest)."""
    if not host:
        return None
    name = host.rsplit("]", 1)[0].lstrip("[") if host.startswith("[") else host.rsplit(":", 1)[0]
    if name.lower().rstrip(".") in LOCAL_HOSTS:
        return None
    return (
        f"this app has no login and answers only on this machine (localhost, 127.0.0.1); it was reached as "
        f"{host!r}. To serve a lab, configure login in {SECRETS_FILE} (docs/app.md, 'Serving the lab')."
    )


def unverified_ok(settings: Mapping[str, Any], provider: str) -> bool:
    """Whether the admin trusts `provider`'s emails without an `email_verified` claim (`[rods.login]
    unverified_email_providers`, provider names as in [auth.<name>], "default" for a bare [auth])."""
    login = (settings.get("rods") or {}).get("login") or {}
    return provider in login.get("unverified_email_providers", ())


def main(argv: list[str]) -> int:
    """`python -m rods_lab.identity HOST [SECRETS]` (`make app-lab`): exit 2 with the reason when the app
    must not serve on HOST with the secrets file SECRETS (default .streamlit/secrets.toml)."""
    problem = lab_serving_problem(argv[0] if argv else "127.0.0.1", Path(argv[1]) if len(argv) > 1 else SECRETS_FILE)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return 0


# ----- in the app -----------------------------------------------------------------------------------------
def app_settings() -> dict[str, Any]:
    return st.secrets.to_dict() if st.secrets.load_if_toml_exists() else {}


def auth_on() -> bool:
    """Login is configured (an `[auth]` table is present); an incomplete one stops the page in `gate`."""
    return bool(app_settings().get("auth"))


def _verified(settings: Mapping[str, Any]) -> bool:
    """The logged-in email is one the provider vouched for (`email_verified` true), or one from a provider the
    admin trusts without that claim (`unverified_ok`)."""
    return st.user.get("email_verified") is True or unverified_ok(settings, str(st.user.get("provider") or "default"))


def current() -> Actor:
    """The acting user: the logged-in email with its roles (none while the provider has not verified it), or
    (auth off) the name typed on the Review page."""
    settings = app_settings()
    if not settings.get("auth"):
        return local(str(st.session_state.get("review_reviewer") or ""))
    if not st.user.is_logged_in:
        return Actor("", True, frozenset())
    email, issuer = str(st.user.get("email") or ""), str(st.user.get("iss") or "")
    if not _verified(settings):
        return Actor(email, True, frozenset(), issuer=issuer)  # `gate` stops the page before anything is shown
    return actor_of(email, RolePolicy.from_settings(settings), issuer)


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """Show a refused action's message (who may do it) where the action was asked for."""
    try:
        yield
    except Refused as e:
        st.error(str(e))


def _refuse(message: str) -> None:
    st.error(message)
    st.stop()


def gate(account: bool = False) -> None:
    """The first line of every page (through ui.page_setup) and of app.py. Without login, the app serves only
    this machine: bound elsewhere, or reached under another name, a page shows only what to configure. With
    auth configured, a page shows only a login button until the user is logged in with a verified email.
    `account`: show who is logged in, with Log out."""
    settings = app_settings()
    if problem := serving_problem(str(st.get_option("server.address") or ""), settings):
        _refuse(f"RODS Lab is closed: {problem}")
    if not settings.get("auth"):
        if problem := host_problem(st.context.headers.get("Host")):
            _refuse(f"RODS Lab is closed: {problem}")
        return
    if not st.user.is_logged_in:
        st.info("RODS Lab needs you to log in: decisions, launches and seed edits are recorded under your name.")
        st.button("Log in", key="identity_login", type="primary", on_click=st.login)
        st.stop()
    if not _verified(settings):
        st.button("Log out", key="identity_logout", on_click=st.logout)
        _refuse(
            f"Your identity provider did not verify the email {st.user.get('email')!r}, and roles are given by "
            "email: verify it with the provider, then log in again."
        )
    if account:
        me = current()
        st.sidebar.caption(f"Logged in as **{me.name}** · {', '.join(sorted(me.roles)) or 'read-only'}")
        st.sidebar.button("Log out", key="identity_logout", on_click=st.logout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
