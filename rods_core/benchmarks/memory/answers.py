"""BFCL's final-answer check for agentic categories (eval_checker/agentic_eval/agentic_checker.py), as a
pure function: an accepted answer must appear as whole words in the reply, ignoring case, whitespace around
it and the characters `,./-_*^()`; single quotes count as double quotes."""

from __future__ import annotations

import re

_IGNORED = re.compile(r"[\,\.\/\-\_\*\^\(\)]")


def standardize(text: str) -> str:
    """BFCL's standardize_string: drop `,./-_*^()`, lower-case, single quotes to double."""
    return _IGNORED.sub("", text).lower().replace("'", '"')


def answer_matches(reply: str, answers: list[str]) -> bool:
    """True when one accepted answer occurs in the reply on word boundaries, after standardizing both."""
    said = standardize(reply)
    return any(re.search(rf"\b{re.escape(standardize(a))}\b", said) for a in answers)


def blank_answers(answers: list[str]) -> str | None:
    """Why a list of accepted answers accepts any reply (an answer empty or blank once standardized matches
    every reply), or None."""
    blank = [a for a in answers if not standardize(a).strip()]
    if not blank:
        return None
    return (
        f"accepted answer(s) {blank} are empty or blank after BFCL's standardization, so any reply would pass; "
        "give every accepted answer words or digits of its own"
    )
