"""Structural signature of a task: classes, functions and skills per turn, data-dependency DAG, depth.

Synthesis must produce tasks "of the same structure" as a boundary task; this module says what that
means. Two tasks share a topology hash when they involve the same API classes, have the same number
of turns and calls per turn, the same skill at each call position, and the same dependency edges.
Function names are left out of the hash on purpose: a variant may swap `cat` for `tail` (both `read`).

A dependency edge i -> j means an argument of call j carries a value that call i returned and that
the user never said (BFCL's "the agent must use an earlier result", ~21% of base calls). Depth is the
number of calls on the longest such chain (1 = no dependencies).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property

from rods_core.benchmarks.bfcl.environment import BfclEnvironment, function_docs
from rods_core.benchmarks.bfcl.tasks import Task

# Skill of each function: a documented grouping shared across classes.
#   navigate: move or look around (no change); read: return stored data; write: create or change state;
#   delete: remove state; auth: log in / out / status; compute: pure computation or lookup tables;
#   communicate: send to another party (messages, tweets, comments, support).
SKILLS: dict[str, str] = {}
_SKILL_GROUPS = {
    "navigate": "cd ls pwd find du list_users list_all_following list_all_airports get_available_stocks "
    "get_current_time get_nearest_airport_by_city get_zipcode_based_on_city find_nearest_tire_shop "
    "get_symbol_by_name filter_stocks_by_price",
    "read": "cat grep tail wc diff sort get_message_stats get_user_id search_messages view_messages_sent "
    "get_tweet get_tweet_comments get_user_stats get_user_tweets search_tweets get_ticket get_user_tickets "
    "get_account_info get_order_details get_order_history get_stock_info get_transaction_history "
    "get_watchlist get_all_credit_cards get_booking_history get_budget_fiscal_year get_credit_card_balance "
    "get_flight_cost retrieve_invoice check_tire_pressure displayCarStatus display_log get_current_speed "
    "get_outside_temperature_from_google get_outside_temperature_from_weather_com "
    "estimate_drive_feasibility_by_mileage",
    "write": "cp echo mkdir mv touch add_contact follow_user create_ticket edit_ticket close_ticket resolve_ticket "
    "add_to_watchlist fund_account place_order withdraw_funds book_flight purchase_insurance "
    "register_credit_card set_budget_limit verify_traveler_information activateParkingBrake "
    "adjustClimateControl fillFuelTank lockDoors pressBrakePedal releaseBrakePedal setCruiseControl "
    "setHeadlights set_navigation startEngine notify_price_change",
    "delete": "rm rmdir delete_message unfollow_user cancel_order remove_stock_from_watchlist cancel_booking",
    "auth": "message_login message_get_login_status authenticate_twitter posting_get_login_status ticket_login "
    "logout ticket_get_login_status trading_login trading_logout trading_get_login_status "
    "authenticate_travel travel_get_login_status",
    "compute": "absolute_value add divide imperial_si_conversion logarithm max_value mean min_value multiply "
    "percentage power round_number si_unit_conversion square_root standard_deviation subtract sum_values "
    "compute_exchange_rate estimate_distance gallon_to_liter liter_to_gallon",
    "communicate": "send_message post_tweet comment mention retweet contact_customer_support",
}
for _skill, _names in _SKILL_GROUPS.items():
    for _n in _names.split():
        SKILLS[_n] = _skill


def skill_of(function: str) -> str:
    return SKILLS.get(function, "unknown")


@dataclass(frozen=True)
class CallNode:
    index: int  # position over the whole task
    turn: int
    function: str
    cls: str
    skill: str


@dataclass(frozen=True)
class Signature:
    classes: tuple[str, ...]
    calls: tuple[CallNode, ...]
    calls_per_turn: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]  # (producer index, consumer index)

    @cached_property
    def depth(self) -> int:
        longest = [1] * len(self.calls)
        for i, j in sorted(self.edges, key=lambda e: e[1]):
            longest[j] = max(longest[j], longest[i] + 1)
        return max(longest, default=0)

    @property
    def functions_per_turn(self) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in self.calls_per_turn]
        for c in self.calls:
            out[c.turn].append(c.function)
        return out

    @property
    def skills(self) -> tuple[str, ...]:
        return tuple(c.skill for c in self.calls)

    @cached_property
    def topology_hash(self) -> str:
        key = {
            "classes": sorted(self.classes),
            "per_turn": list(self.calls_per_turn),
            "skills": list(self.skills),
            "edges": sorted(self.edges),
        }
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    def summary(self) -> dict:
        return {
            "classes": list(self.classes),
            "class_combo": "+".join(sorted(self.classes)),
            "turns": len(self.calls_per_turn),
            "calls": len(self.calls),
            "calls_per_turn": list(self.calls_per_turn),
            "skills": list(self.skills),
            "edges": [list(e) for e in self.edges],
            "depth": self.depth,
            "topology_hash": self.topology_hash,
        }

    def to_dict(self) -> dict:
        return {**self.summary(), "nodes": [asdict(c) for c in self.calls]}


def _values(v) -> list[str]:
    """Argument values worth tracing: strings of 2+ characters and numbers other than 0/1."""
    if isinstance(v, bool) or v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [x for e in v for x in _values(e)]
    if isinstance(v, dict):
        return [x for e in v.values() for x in _values(e)]
    if isinstance(v, (int, float)):
        return [] if v in (0, 1) else [repr(v), str(v)]
    s = str(v).strip()
    return [s] if len(s) >= 2 else []


def signature(task: Task) -> Signature:
    """Compute the signature by replaying the ground truth in a fresh environment (~1 ms)."""
    env = BfclEnvironment(task)
    docs = function_docs()
    nodes: list[CallNode] = []
    results: list[str] = []
    edges: set[tuple[int, int]] = set()
    said = ""
    per_turn = []
    for turn, calls in enumerate(task.ground_truth):
        env.start_turn(turn)
        said += " " + task.user_texts[turn].lower()
        per_turn.append(0)
        for text in calls:
            for obs in env.execute(text):
                if obs.call is None:
                    continue
                fn = obs.call.name
                i = len(nodes)
                for value in [x for a in (*obs.call.args, *obs.call.kwargs.values()) for x in _values(a)]:
                    if value.lower() in said:
                        continue
                    producers = [k for k in range(i) if value in results[k]]
                    if producers:
                        edges.add((producers[-1], i))
                doc = docs.get(fn)
                nodes.append(CallNode(i, turn, fn, doc.cls if doc else "?", skill_of(fn)))
                results.append(obs.result)
                per_turn[-1] += 1
    return Signature(tuple(sorted(task.involved_classes)), tuple(nodes), tuple(per_turn), tuple(sorted(edges)))
