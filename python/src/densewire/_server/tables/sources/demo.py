"""The demo tables: ``densewire.demo_table()`` with the options of a ``demo:`` source."""

from __future__ import annotations

from typing import Any

from densewire import demo_table

from ..coercion import Natural, build_table
from ..spec import TableSpec

__all__ = ["load_demo"]


def load_demo(spec: TableSpec) -> Any:
    opts = dict(item.split("=", 1) for item in spec.location.split(",") if item)
    kwargs: dict[str, Any] = {"name": spec.name, "coordinates": opts.get("coordinates", "float64")}
    if "rows" in opts:
        kwargs["rows"] = int(opts["rows"])
    if "seed" in opts:
        kwargs["seed"] = int(opts["seed"])
    table = demo_table(**kwargs)
    if spec.columns:
        naturals = [Natural(c.name, c.type, c.values) for c in table.columns]
        return build_table(spec.name, naturals, spec)
    return table
