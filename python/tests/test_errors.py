"""The error categories and statuses are exactly SPEC.md section 11's table."""

from __future__ import annotations

import re
from pathlib import Path

import densewire
from densewire import DensewireError

SPEC = (Path(__file__).resolve().parents[2] / "SPEC.md").read_text()


def spec_table() -> dict[str, int]:
    section = SPEC.split("## 11. Errors", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| `(\w+)` \| (\d{3}) \|", section, re.M)}


def test_one_class_per_spec_category_with_its_status() -> None:
    classes = {cls.category: cls.http_status for cls in (DensewireError, *DensewireError.__subclasses__())}
    assert classes == spec_table()
    for category in classes:
        assert densewire.error_class(category).category == category


def test_envelope_type_follows_the_status() -> None:
    assert DensewireError("boom").to_envelope()["error"] == {
        "message": "boom", "type": "server_error", "param": None, "code": "internal_error", "offset": None}
    err = densewire.InvalidBase64Error("bad", offset=3, field="data[0].embedding")
    assert err.to_envelope()["error"]["type"] == "invalid_request_error"
    assert err.located("x").field == "x.data[0].embedding"
