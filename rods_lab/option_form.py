"""A benchmark's own options as form widgets, drawn from its entry's options model (the Launch page): a choice
for a Literal, a checkbox for a bool, a number for an int or float, a text field otherwise. The values go to the
run config's `benchmark_options`, which the entry validates (an out-of-range value is refused there, by field)."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel


def option_widgets(model: type[BaseModel], current: dict[str, Any], key: str, where: Any) -> dict[str, Any]:
    """One widget per field of `model` on `where` (streamlit or a column), set to `current` or the field's default;
    widget keys are `key` + the field's name. Returns the values entered."""
    values = {}
    for name, field in model.model_fields.items():
        kind, value = field.annotation, current.get(name, field.default)
        shown = dict(label=f"{name}", help=field.description, key=f"{key}_{name}")
        if get_origin(kind) is Literal:
            choices = list(get_args(kind))
            values[name] = where.selectbox(options=choices, index=choices.index(value), **shown)
        elif kind is bool:
            values[name] = where.checkbox(value=bool(value), **shown)
        elif kind is int:
            values[name] = int(where.number_input(value=int(value), step=1, **shown))
        elif kind is float:
            values[name] = float(where.number_input(value=float(value), **shown))
        else:
            values[name] = where.text_input(value="" if value is None else str(value), **shown)
    return values
