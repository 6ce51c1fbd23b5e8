"""The golden runners' use of capabilities.json (golden_capabilities.py): unclaimed cases are listed, not run."""

from __future__ import annotations

import copy
import json

import pytest

from golden_capabilities import GOLDEN, load_capabilities, plan


def _cases(name: str) -> list[dict]:
    return json.loads((GOLDEN / name).read_text())["cases"]


def test_a_planted_unclaimed_feature_lists_its_cases_and_runs_none() -> None:
    doc = copy.deepcopy(load_capabilities())
    doc["claims"]["python"].remove("dtype.bfloat16")
    cases = _cases("tensors.json")
    p = plan({"tensors.json": cases}, doc=doc)
    bf16 = [c["id"] for c in cases if c["dtype"] == "bfloat16"]
    assert bf16 and p.not_claimed == {"dtype.bfloat16": bf16}
    assert not {c["id"] for c in p.run} & set(bf16)
    assert len(p.run) == len(cases) - len(bf16)
    lines = p.lines()
    assert f"not claimed by python: {len(bf16)} cases: dtype.bfloat16 ({', '.join(bf16)})" in lines
    assert lines[0] == f"capabilities of python: {len(cases) - len(bf16)} of {len(cases)} golden cases of tensors.json claimed and run"


def test_an_unclaimed_table_format_lists_its_valid_and_invalid_cases() -> None:
    doc = copy.deepcopy(load_capabilities())
    doc["claims"]["python"].remove("table.csv")
    p = plan({"tables.json": _cases("tables.json")}, doc=doc)
    ids = p.not_claimed["table.csv"]
    assert any(i.startswith("table.csv.") for i in ids) and any(i.startswith("invalid.table.csv.") for i in ids)
    assert all(c["format"] != "csv" for c in p.run)


def test_a_claimed_feature_no_golden_case_needs_is_reported() -> None:
    doc = copy.deepcopy(load_capabilities())
    doc["claims"]["python"].append("planted.feature")
    p = plan({"conversions.json": _cases("conversions.json")}, doc=doc)
    assert "planted.feature" in p.unexercised
    assert any(line.startswith("claimed by python but exercised by no golden case: ") and "planted.feature" in line
               for line in p.lines())


def test_a_case_missing_from_capabilities_fails_the_runner() -> None:
    doc = copy.deepcopy(load_capabilities())
    del doc["cases"]["interop.json"]["interop.openai.response_float"]
    with pytest.raises(AssertionError, match="interop.openai.response_float is not in capabilities.json"):
        plan({"interop.json": _cases("interop.json")}, doc=doc)


def test_every_golden_file_has_the_needs_of_each_of_its_cases() -> None:
    doc = load_capabilities()
    for name, needs in doc["cases"].items():
        assert [c["id"] for c in _cases(name)] == list(needs), name
        assert all(set(n) <= set(doc["features"]) for n in needs.values()), name
