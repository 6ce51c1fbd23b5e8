"""The capabilities matrix (testdata/capabilities.toml), used by generate.py.

From the matrix and the golden cases it derives what every golden case needs (capabilities.json, read
by each language's golden runner), renders the README's table, and finds every place that states a
spec version other than SPEC.md's.
"""

from __future__ import annotations

import re
import string
import tomllib
from pathlib import Path

README_START = "<!-- capabilities:start -->"
README_END = "<!-- capabilities:end -->"
SPEC_HEADER = re.compile(r"^Version \*\*([0-9]+\.[0-9]+)\*\*", re.MULTILINE)


def load(path: Path) -> dict:
    """The matrix, checked: every claim names a language, every derivation rule a feature."""
    with open(path, "rb") as f:
        caps = tomllib.load(f)
    languages, features = caps["languages"], caps["features"]
    for name, feature in features.items():
        unknown = set(feature["claimed"]) - set(languages)
        if unknown:
            raise SystemExit(f"{path.name}: feature {name} is claimed by unknown languages {sorted(unknown)}")
        if len(set(feature["claimed"])) != len(feature["claimed"]):
            raise SystemExit(f"{path.name}: feature {name} names a language twice")
    rules = caps["derive"]
    for table in [rules["formats"]] + [p["formats"] for p in rules["prefix"]]:
        for key, needs in table.items():
            for need in needs:
                if need not in features:
                    raise SystemExit(f"{path.name}: [derive] maps the format {key} to {need}, which is no feature")
    for p in rules["prefix"]:
        for need in p["needs"]:
            if need not in features:
                raise SystemExit(f"{path.name}: [derive] prefix {p['prefix']} needs {need}, which is no feature")
    return caps


def case_needs(case: dict, caps: dict) -> list[str]:
    """The features a golden case needs, from its fields and its id prefix (the rules of [derive])."""
    rules, features = caps["derive"], caps["features"]
    invalid = "error" in case
    needs: set[str] = set()

    def add(name: str) -> None:
        if name in features:
            needs.add(name)
        elif not invalid:  # only an invalid case may carry a name the spec does not know
            raise SystemExit(f"{case['id']}: derives {name}, which is no feature of capabilities.toml")

    for template in rules["templates"]:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
        if all(f in case for f in fields):
            add(template.format_map({f: case[f] for f in fields}))
    formats = rules["formats"]
    for p in rules["prefix"]:
        if case["id"].startswith(p["prefix"]):
            formats = p["formats"]
            for need in p["needs"]:
                add(need)
            break
    if "format" in case:
        keys = ([f"{case['format']}+{case['encoding_format']}"] if "encoding_format" in case else []) + [case["format"]]
        key = next((k for k in keys if k in formats), None)
        if key is None:
            raise SystemExit(f"{case['id']}: no [derive] formats entry for {keys[0]}")
        for need in formats[key]:
            add(need)
    return sorted(needs)


def golden_json(caps: dict, spec_version: str, golden: dict[str, list[dict]]) -> dict:
    """capabilities.json: the claims by language, and the features each case of each golden file needs."""
    return {
        "spec_version": spec_version,
        "generated_by": "testdata/generate.py from testdata/capabilities.toml and testdata/cases/*.toml; do not edit",
        "languages": caps["languages"],
        "features": {name: {"spec": f["spec"], "about": f["about"]} for name, f in caps["features"].items()},
        "claims": {lang: [name for name, f in caps["features"].items() if lang in f["claimed"]]
                   for lang in caps["languages"]},
        "cases": {name: {c["id"]: case_needs(c, caps) for c in cases} for name, cases in golden.items()},
    }


def readme_table(doc: dict) -> str:
    """The Markdown matrix: one row a feature, one column a language, and how many golden cases need it."""
    counts = {name: 0 for name in doc["features"]}
    for cases in doc["cases"].values():
        for needs in cases.values():
            for need in needs:
                counts[need] += 1
    langs = doc["languages"]
    lines = ["| feature | SPEC | " + " | ".join(langs) + " | golden cases |",
             "|---|---|" + "---|" * len(langs) + "---:|"]
    for name, f in doc["features"].items():
        cells = ["✓" if name in doc["claims"][lang] else "–" for lang in langs]
        lines.append(f"| `{name}` {f['about']} | {f['spec']} | " + " | ".join(cells)
                     + f" | {counts[name] or 'none'} |")
    return "\n".join(lines) + "\n"


def with_readme_table(readme: str, table: str) -> str:
    """The README with the text between the capabilities markers replaced by the table."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md: the markers {README_START} and {README_END} are missing")
    return readme[:start + len(README_START)] + "\n" + table + readme[end:]


def spec_version(spec_text: str) -> str:
    m = SPEC_HEADER.search(spec_text)
    if not m:
        raise SystemExit("SPEC.md: no 'Version **X.Y**' line in its header")
    return m.group(1)


def version_mismatches(root: Path, caps: dict, version: str) -> list[str]:
    """Every [[version]] place of the matrix that states another version than SPEC.md's, or none."""
    problems = []
    for place in caps.get("version", []):
        path = root / place["file"]
        if not path.exists():
            problems.append(f"{place['file']}: missing (listed in capabilities.toml [[version]])")
            continue
        matches = list(re.finditer(place["pattern"], path.read_text(), re.MULTILINE))
        if not matches:
            problems.append(f"{place['file']}: states no spec version matching {place['pattern']!r}")
        for m in matches:
            if m.group(1) != version:
                line = path.read_text().count("\n", 0, m.start(1)) + 1
                problems.append(f"{place['file']}:{line}: says spec version {m.group(1)}, SPEC.md is {version}")
    return problems
