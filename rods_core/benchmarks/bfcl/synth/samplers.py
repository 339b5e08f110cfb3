"""Argument-value samplers: another valid value for a user-stated argument, drawn from the live state.

Plan calls `sample_value` for each value the user states. Samplers read the environment as it is just
before the call (the files of the current directory, the stocks, the users of the message workspace,
the airports and cities the travel and vehicle classes know, the cards on file) or draw a fresh name or
sentence for things the call creates. Credentials and identifiers that must match the initial state
(tokens, passwords, ticket ids) are kept: resampling them would only make the call fail.
Departure from the paper: values come from the environment's own state and tables, not from an LLM.
"""

from __future__ import annotations

import inspect
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from rods_core.benchmarks.bfcl.environment import BfclEnvironment, api_class, function_docs

WORDS = (
    "alpha beta gamma delta orbit summit harbor meadow canyon river cedar maple falcon comet nebula quartz "
    "atlas vertex pixel signal vector lumen ember willow aspen coral tundra prairie lagoon glacier mosaic "
    "ledger draft budget sprint roadmap invoice payroll audit survey metrics archive backup notes report "
    "summary agenda minutes thesis outline review plan memo journal catalog inventory results dataset"
).split()
SENTENCES = (
    "Meeting moved to Thursday afternoon.",
    "Please review the attached figures before noon.",
    "The quarterly numbers look better than expected.",
    "Remember to back up the project folder tonight.",
    "Great progress on the prototype this week!",
    "Lunch is on me today.",
    "Server maintenance is scheduled for the weekend.",
    "The draft is ready for a second pass.",
    "Weather looks perfect for the trip.",
    "Inventory count finished without discrepancies.",
    "Client call confirmed for 10 am.",
    "New benchmark results are in and they are promising.",
    "Travel plans are finalized for next month.",
    "Kindly update the shared spreadsheet.",
    "All tests passed on the latest build.",
)
TITLES = (
    "Login failure",
    "Billing discrepancy",
    "Delayed shipment",
    "Account locked",
    "Refund request",
    "Broken dashboard",
    "Sync error",
    "Missing invoice",
    "Password reset",
    "Slow performance",
)
HANDLES = "dev_lead data_wiz travel_buddy market_watch green_thumb code_ninja road_rider bookworm".split()


@dataclass
class SampleContext:
    """What a sampler may look at: the call, the old value, the live state, what is already taken."""

    env: BfclEnvironment
    function: str
    param: str
    old: Any
    rng: random.Random
    taken: set = field(default_factory=set)
    chosen: list = field(default_factory=list)  # (old, new) values already decided in this plan

    def instance(self, cls: str) -> Any | None:
        return self.env.instances.get(cls)

    def pick(self, options: list, *, exclude_old: bool = True) -> Any | None:
        opts = [o for o in dict.fromkeys(options) if o not in self.taken and not (exclude_old and o == self.old)]
        return self.rng.choice(opts) if opts else None


Sampler = Callable[[SampleContext], Any]


# ----- documented choices ------------------------------------------------------------------------------
@cache
def documented_choices(function: str, param: str) -> tuple[str, ...]:
    """Enumerated values a parameter's doc lists ('[Enum]: [...]' or 'Options are: a, b, c.')."""
    doc = function_docs().get(function)
    desc = doc.params.get(param, {}).get("description", "") if doc else ""
    m = re.search(r"\[Enum\]:\s*(\[.*?\]|[^.\n]*)", desc) or re.search(r"options(?: are)?:\s*([^.\n]*)", desc, re.I)
    if not m:
        return ()
    raw = m.group(1).strip()
    if raw.startswith("["):
        try:
            return tuple(str(x) for x in json.loads(raw))
        except json.JSONDecodeError:
            return ()
    return tuple(x.strip() for x in raw.split(",") if x.strip())


# ----- file system -------------------------------------------------------------------------------------
def _cwd_entries(ctx: SampleContext, kind: str) -> list[str]:
    fs = ctx.instance("GorillaFileSystem")
    if fs is None:
        return []
    contents = fs._current_dir.contents
    return [n for n, item in contents.items() if type(item).__name__ == kind]


def _fresh_name(ctx: SampleContext) -> str:
    """A new name shaped like the old one: same extension, same separator style."""
    old = str(ctx.old)
    ext = "." + old.rsplit(".", 1)[1] if "." in old.strip(".") else ""
    sep = "_" if "_" in old or not any(c.isupper() for c in old) else ""
    existing = set(_cwd_entries(ctx, "File")) | set(_cwd_entries(ctx, "Directory"))
    for _ in range(20):
        words = ctx.rng.sample(WORDS, ctx.rng.choice((1, 2)))
        if sep == "":
            words = [w.capitalize() for w in words]
        name = sep.join(words) + (str(ctx.rng.randint(1, 2030)) if ctx.rng.random() < 0.3 else "") + ext
        if name not in existing and name not in ctx.taken:
            return name
    return ""


def existing_file(ctx: SampleContext) -> Any:
    files = _cwd_entries(ctx, "File")
    if ctx.old not in files:
        return _fresh_name(ctx)  # the call creates it (echo/touch into a new file)
    hidden = str(ctx.old).startswith(".")
    return ctx.pick([f for f in files if f.startswith(".") == hidden])


def existing_dir(ctx: SampleContext) -> Any:
    return ctx.pick(_cwd_entries(ctx, "Directory"))


def file_or_dir(ctx: SampleContext) -> Any:
    if ctx.old in _cwd_entries(ctx, "Directory"):
        return existing_dir(ctx)
    if ctx.old in _cwd_entries(ctx, "File"):
        return existing_file(ctx)
    return _fresh_name(ctx)


def new_name(ctx: SampleContext) -> Any:
    return _fresh_name(ctx)


def name_fragment(ctx: SampleContext) -> Any:
    """A search string: a word that occurs in some file name of the current directory tree."""
    fs = ctx.instance("GorillaFileSystem")
    names: list[str] = []
    stack = [fs._current_dir] if fs is not None else []
    while stack:
        d = stack.pop()
        for n, item in d.contents.items():
            names.append(n)
            if type(item).__name__ == "Directory":
                stack.append(item)
    frags = [w for n in names for w in re.split(r"[_.\-\s]", n) if len(w) >= 3 and not w.isdigit()]
    return ctx.pick(frags)


def content_word(ctx: SampleContext) -> Any:
    """A search pattern: a word of a file in the current directory, so the grep finds something
    (a random word mostly finds nothing, and Execute rejects a read that returns nothing)."""
    fs = ctx.instance("GorillaFileSystem")
    texts = [str(getattr(f, "content", "")) for f in fs._current_dir.contents.values()] if fs is not None else []
    words = [w for t in texts for w in re.findall(r"[A-Za-z]{4,}", t)]
    return ctx.pick(words) if words else word(ctx)


# ----- free text ---------------------------------------------------------------------------------------
SUBJECTS = (
    "The quarterly report",
    "Our new prototype",
    "The client meeting",
    "Tomorrow's workshop",
    "The server upgrade",
    "My travel plan",
    "The budget review",
    "The team offsite",
    "This week's sprint",
    "The product launch",
    "The design draft",
    "Our weekly sync",
)
PREDICATES = (
    "is scheduled for {day}",
    "went better than expected",
    "needs one more review",
    "is ready to share",
    "was moved to {day}",
    "looks great so far",
    "is delayed until {day}",
    "starts at {hour} on {day}",
    "has been approved",
    "needs your input by {day}",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
HOURS = ("9 am", "10:30 am", "noon", "3 pm", "6 pm")
ISSUE_KINDS = ("Urgent", "Minor", "Recurring", "Critical", "Unexpected")


def sentence(ctx: SampleContext) -> Any:
    """A short message: a stock sentence, or one generated from a small grammar (hundreds of forms)."""
    for _ in range(10):
        if ctx.rng.random() < 0.3:
            text = ctx.rng.choice(SENTENCES)
        else:
            pred = ctx.rng.choice(PREDICATES).format(day=ctx.rng.choice(DAYS), hour=ctx.rng.choice(HOURS))
            text = f"{ctx.rng.choice(SUBJECTS)} {pred}."
        if text not in ctx.taken and text != ctx.old:
            return text
    return None


def title(ctx: SampleContext) -> Any:
    t = ctx.rng.choice(TITLES)
    return f"{ctx.rng.choice(ISSUE_KINDS)} {t[0].lower()}{t[1:]}" if ctx.rng.random() < 0.6 else ctx.pick(list(TITLES))


def word(ctx: SampleContext) -> Any:
    w = ctx.rng.choice(WORDS)
    return w.capitalize() if str(ctx.old)[:1].isupper() else w


def tag(ctx: SampleContext) -> Any:
    return "#" + "".join(x.capitalize() for x in ctx.rng.sample(WORDS, 2))


def handle(ctx: SampleContext) -> Any:
    return ctx.pick(["@" + h for h in HANDLES])


def date(ctx: SampleContext) -> Any:
    old = str(ctx.old)
    year = old[:4] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", old) else "2026"
    return f"{year}-{ctx.rng.randint(1, 12):02d}-{ctx.rng.randint(1, 28):02d}"


def number(ctx: SampleContext) -> Any:
    """A nearby number of the same type and a similar roundness (100 -> 150, 12.5 -> 17.5)."""
    old = ctx.old
    if isinstance(old, bool) or not isinstance(old, (int, float)) or old == 0:
        return None
    mag = abs(old)
    step = 10 ** max(0, len(str(int(mag))) - 2) if mag >= 10 else (1 if float(mag).is_integer() else 0.5)
    for _ in range(10):
        new = old * ctx.rng.uniform(0.5, 1.8)
        new = round(new / step) * step
        if new and new != old and new not in ctx.taken:
            if isinstance(old, int):
                return int(new)
            return round(float(new), 2)
    return None


def small_int(ctx: SampleContext) -> Any:
    return ctx.pick(list(range(1, 6))) if isinstance(ctx.old, int) else None


def choice_from_doc(ctx: SampleContext) -> Any:
    return ctx.pick(list(documented_choices(ctx.function, ctx.param)))


# ----- class state -------------------------------------------------------------------------------------
def stock_symbol(ctx: SampleContext) -> Any:
    bot = ctx.instance("TradingBot")
    return ctx.pick(list(bot.stocks)) if bot is not None else None


def user_name(ctx: SampleContext) -> Any:
    msg = ctx.instance("MessageAPI")
    return ctx.pick(list(msg.user_map)) if msg is not None else None


def user_id(ctx: SampleContext) -> Any:
    msg = ctx.instance("MessageAPI")
    return ctx.pick(list(msg.user_map.values())) if msg is not None else None


def airport(ctx: SampleContext) -> Any:
    travel = ctx.instance("TravelAPI")
    return ctx.pick(list(travel.list_all_airports())) if travel is not None else None


def airport_city(ctx: SampleContext) -> Any:
    return ctx.pick(list(documented_choices("get_nearest_airport_by_city", "location")))


@cache
def _distance_table() -> tuple[dict[str, str], frozenset[frozenset[str]]]:
    """City -> zipcode and the zipcode pairs `estimate_distance` knows, read from the class source."""
    cls = api_class("VehicleControlAPI")
    zips = dict(
        re.findall(
            r'city == "([^"]+)":\s*return \{"zipcode": "(\d+)"\}', inspect.getsource(cls.get_zipcode_based_on_city)
        )
    )
    pairs = re.findall(r'cityA == "(\d+)" and cityB == "(\d+)"', inspect.getsource(cls.estimate_distance))
    return zips, frozenset(frozenset(p) for p in pairs)


def zip_city(ctx: SampleContext) -> Any:
    """A city the vehicle class knows; paired like the parent's: if the parent's two cities have a known
    distance, the new city has a known distance to the other city's replacement."""
    zips, pairs = _distance_table()
    linked = [c for c, z in zips.items() if any(z in p for p in pairs)]
    old_zip = zips.get(str(ctx.old))
    for old_other, new_other in ctx.chosen:
        if old_other == ctx.old or old_other not in zips or new_other not in zips:
            continue
        if frozenset((zips[old_other], old_zip)) in pairs:
            return ctx.pick([c for c in linked if frozenset((zips[c], zips[new_other])) in pairs])
    return ctx.pick(linked or list(zips))


def sector(ctx: SampleContext) -> Any:
    """A sector the trading class lists stocks for (the keys of its `sector_map`)."""
    src = inspect.getsource(api_class("TradingBot").get_available_stocks)
    return ctx.pick(re.findall(r'"(\w+)":\s*\[', src))


def card_id(ctx: SampleContext) -> Any:
    travel = ctx.instance("TravelAPI")
    return ctx.pick(list(travel.credit_card_list)) if travel is not None else None


# Choices that are everyday words in the user's sentence ("How much fuel do I have?"): swapping them
# inside the parent's words reads wrong ("How much engine..."), so only composed turns change them.
WORDLIKE_CHOICES: frozenset[tuple[str, str]] = frozenset({("displayCarStatus", "option")})

# (function, param) first, then the param alone; anything not listed is kept as it is.
BY_CALL: dict[tuple[str, str], Sampler] = {
    ("cd", "folder"): existing_dir,
    ("rmdir", "dir_name"): existing_dir,
    ("mkdir", "dir_name"): new_name,
    ("touch", "file_name"): new_name,
    ("echo", "file_name"): existing_file,
    ("cp", "source"): file_or_dir,
    ("mv", "source"): file_or_dir,
    ("cp", "destination"): file_or_dir,
    ("mv", "destination"): file_or_dir,
    ("rm", "file_name"): file_or_dir,
    ("find", "name"): name_fragment,
    ("find", "path"): existing_dir,
    ("grep", "pattern"): content_word,
    ("create_ticket", "title"): title,
    ("create_ticket", "priority"): small_int,
    ("get_user_id", "user"): user_name,
    ("add_contact", "user_name"): word,
    ("get_nearest_airport_by_city", "location"): airport_city,
    ("get_zipcode_based_on_city", "city"): zip_city,
    ("tail", "lines"): small_int,
}
BY_PARAM: dict[str, Sampler] = {
    "file_name": existing_file,
    "file_name1": existing_file,
    "file_name2": existing_file,
    "content": sentence,
    "message": sentence,
    "description": sentence,
    "resolution": sentence,
    "comment_content": sentence,
    "tags": tag,
    "mentions": handle,
    "mentioned_usernames": handle,
    "symbol": stock_symbol,
    "sector": sector,
    "stock": stock_symbol,
    "receiver_id": user_id,
    "travel_from": airport,
    "travel_to": airport,
    "travel_date": date,
    "card_id": card_id,
    "amount": number,
    "price": number,
    "budget_limit": number,
    "value": number,
    "liter": number,
    "gallon": number,
    "fuelAmount": number,
    "distance": number,
    "numbers": number,
    "a": number,
    "b": number,
    "number": number,
    "temperature": number,
}


def sampler_for(function: str, param: str) -> Sampler | None:
    if (function, param) in BY_CALL:
        return BY_CALL[(function, param)]
    if documented_choices(function, param):
        return choice_from_doc
    return BY_PARAM.get(param)


def sample_value(ctx: SampleContext) -> Any | None:
    """Another valid value for a stated argument, or None when it must stay as it is."""
    fn = sampler_for(ctx.function, ctx.param)
    if fn is None:
        return None
    value = fn(ctx)
    if value in (None, "") or value == ctx.old:
        return None
    # A value must keep its JSON type: an int amount stays an int, a string stays a string.
    if isinstance(ctx.old, str) != isinstance(value, str):
        return None
    return value
