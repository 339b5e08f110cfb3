"""Request phrasings for the most used BFCL functions, for the template rewriter's composed turns.

Each function has a few imperative phrasings with `{param}` slots. A phrasing is used only when its
slots are exactly the values the user must state for that call (values read from earlier results or
withheld for miss_param never fill a slot); otherwise the rewriter falls back to a phrase built from
the tool's doc. These cover ~85% of the calls in the train seeds; the docs cover the rest.
"""

from __future__ import annotations

import re

PHRASES: dict[str, tuple[str, ...]] = {
    # file system
    "cd": ("go to the {folder} folder", "move into {folder}", "switch to the {folder} directory"),
    "ls": ("list what is in the current directory", "show me the contents of this folder"),
    "ls:a=True": (
        "list everything in the current directory, hidden files included",
        "show all files here, even hidden ones",
    ),
    "pwd": ("tell me which directory I am in",),
    "touch": ("create a file named {file_name}", "make a new file called {file_name}"),
    "mkdir": ("create a directory called {dir_name}", "make a new folder named {dir_name}"),
    "echo": ("write {content} into {file_name}", "put the text {content} in {file_name}"),
    "cat": ("show me what is inside {file_name}", "display the contents of {file_name}", "open {file_name} for me"),
    "wc": ("count the lines of {file_name}", "tell me how many lines {file_name} has"),
    "wc:mode=l": ("count the lines of {file_name}", "tell me how many lines {file_name} has"),
    "wc:mode=w": ("count the words in {file_name}", "tell me how many words {file_name} contains"),
    "wc:mode=c": ("count the characters in {file_name}", "tell me how many characters {file_name} has"),
    "tail": ("show the last lines of {file_name}", "print the end of {file_name}"),
    "tail:lines": ("show the last {lines} lines of {file_name}", "print the final {lines} lines of {file_name}"),
    "sort": ("sort the lines of {file_name}", "put the lines in {file_name} in order"),
    "grep": ("search {file_name} for {pattern}", "find the lines in {file_name} that mention {pattern}"),
    "diff": ("compare {file_name1} with {file_name2}", "show the differences between {file_name1} and {file_name2}"),
    "cp": ("copy {source} to {destination}", "make a copy of {source} in {destination}"),
    "mv": ("move {source} to {destination}", "move {source} over to {destination}"),
    "rm": ("delete {file_name}", "remove {file_name}"),
    "rmdir": ("remove the directory {dir_name}", "delete the {dir_name} folder"),
    "find": ("look for anything named {name} under {path}", "search {path} for files matching {name}"),
    "find:name": ("find every file with {name} in its name", "look for files whose name contains {name}"),
    # vehicle
    "startEngine": ("start the engine in {ignitionMode} mode", "get the engine running ({ignitionMode})"),
    "pressBrakePedal": ("press the brake pedal to position {pedalPosition}", "push the brake pedal to {pedalPosition}"),
    "lockDoors:unlock=False": ("lock the {door} doors", "make sure the {door} doors are locked"),
    "lockDoors:unlock=True": ("unlock the {door} doors",),
    "fillFuelTank": ("add {fuelAmount} gallons of fuel", "fill the tank with {fuelAmount} gallons"),
    "check_tire_pressure": ("check the tire pressure", "tell me how the tires are inflated"),
    "displayCarStatus": ("show me the car's {option} status", "report the {option} status of the car"),
    "activateParkingBrake": ("set the parking brake to {mode}", "{mode} the parking brake"),
    "set_navigation": ("navigate to {destination}", "set the GPS for {destination}"),
    "get_zipcode_based_on_city": ("look up the zipcode of {city}", "find the postal code for {city}"),
    "estimate_drive_feasibility_by_mileage": (
        "check whether I can drive {distance} miles",
        "tell me if the car can make {distance} miles",
    ),
    "liter_to_gallon": ("convert {liter} liters to gallons", "tell me how many gallons {liter} liters is"),
    "gallon_to_liter": ("convert {gallon} gallons to liters",),
    "find_nearest_tire_shop": ("find the nearest tire shop",),
    # travel
    "get_flight_cost": (
        "check the {travel_class} fare from {travel_from} to {travel_to} on {travel_date}",
        "tell me what a {travel_class} flight from {travel_from} to {travel_to} costs on {travel_date}",
    ),
    "book_flight": (
        "book a {travel_class} flight from {travel_from} to {travel_to} on {travel_date} with card {card_id} "
        "and access token {access_token}",
    ),
    "get_nearest_airport_by_city": (
        "find the airport closest to {location}",
        "tell me the nearest airport to {location}",
    ),
    "list_all_airports": ("list all the airports you can book", "show me every available airport"),
    "set_budget_limit": ("set my budget limit to {budget_limit} using access token {access_token}",),
    "compute_exchange_rate": ("convert {value} {base_currency} to {target_currency}",),
    # trading
    "get_stock_info": ("get the details of {symbol}", "look up the stock {symbol}", "show me how {symbol} is doing"),
    "add_to_watchlist": ("add {stock} to my watchlist", "put {stock} on my watchlist"),
    "remove_stock_from_watchlist": ("take {symbol} off my watchlist", "remove {symbol} from my watchlist"),
    "get_watchlist": ("show me my watchlist", "list the stocks I am watching"),
    "place_order": ("place a {order_type} order for {amount} shares of {symbol} at {price}",),
    "get_available_stocks": ("list the stocks in the {sector} sector", "show me what {sector} stocks are available"),
    "get_account_info": ("show my account details", "tell me about my trading account"),
    # messages and social
    "send_message": ("send {message} to {receiver_id}", "message {receiver_id} saying {message}"),
    "message_login": ("log me in as {user_id}", "sign in to messaging with {user_id}"),
    "view_messages_sent": ("show me the messages I have sent", "list my sent messages"),
    "post_tweet": ("post a tweet saying {content}", "tweet {content}"),
    "post_tweet:tags": ("post a tweet saying {content} with the tags {tags}",),
    "post_tweet:mentions": ("post a tweet saying {content}, mentioning {mentions}",),
    "post_tweet:tags:mentions": ("post a tweet saying {content} with the tags {tags}, mentioning {mentions}",),
    "authenticate_twitter": ("log in to Twitter as {username} with password {password}",),
    "create_ticket": ("open a ticket titled {title}", "file a support ticket called {title}"),
    "create_ticket:description": ("open a ticket titled {title} describing {description}",),
    "create_ticket:description:priority": (
        "open a priority {priority} ticket titled {title} describing {description}",
    ),
    "create_ticket:priority": ("open a priority {priority} ticket titled {title}",),
    "ticket_login": ("log in to the ticket system as {username} with password {password}",),
}

_SLOT = re.compile(r"\{(\w+)\}")


def phrasings(function: str, stated: dict) -> list[str]:
    """The phrasings of `function` that state exactly the `stated` parameters.

    A key `fn:param=value` covers `param` without a slot when the call's value is `value` (`ls:a=True`);
    a key `fn:param` only marks which variant of the phrasing carries that parameter's slot.
    """
    out = []
    for key, templates in PHRASES.items():
        name, *conds = key.split(":")
        if name != function:
            continue
        covered, ok = set(), True
        for cond in conds:
            param, eq, value = cond.partition("=")
            if eq:
                ok = ok and param in stated and str(stated[param]) == value
                covered.add(param)
        if not ok:
            continue
        for template in templates:
            if covered | set(_SLOT.findall(template)) == set(stated):
                out.append(template)
    return out


def fill(template: str, rendered: dict[str, str]) -> str:
    return _SLOT.sub(lambda m: rendered[m.group(1)], template)
