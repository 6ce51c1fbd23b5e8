"""PostgreSQL, through psycopg 3, in a read-only transaction; pgvector and arrays become vectors."""

from __future__ import annotations

from typing import Any

import numpy as np

from densewire._optional import require

from ..coercion import Natural, build_table, null_error, parse_vectors_text, vectors
from ..spec import TableLoadError, TableSpec

__all__ = ["load_postgresql"]

#: type OID -> how the column is read (SPEC.md 15.1 type, or a source kind needing care)
_PG_OIDS = {16: "bool", 21: "int32", 23: "int32", 20: "int64", 700: "float32", 701: "float64",
            25: "string", 1043: "string", 1042: "string", 19: "string", 2950: "uuid",
            1021: "vector", 1022: "vector", 1700: "decimal", 17: "binary"}


def load_postgresql(spec: TableSpec) -> Any:
    psycopg = require("psycopg", extra="serve", feature="PostgreSQL tables")

    try:
        with psycopg.connect(spec.location, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")
            cur = conn.execute(spec.query or f'SELECT * FROM "{spec.name}"')
            desc = list(cur.description or ())
            rows = cur.fetchall()
            unknown = sorted({d.type_code for d in desc if d.type_code not in _PG_OIDS})
            typnames: dict[int, str] = {}
            if unknown:
                for oid, typname in conn.execute("SELECT oid::int, typname FROM pg_type WHERE oid = ANY(%s)",
                                                 (unknown,)).fetchall():
                    typnames[oid] = typname
    except psycopg.Error as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TableLoadError(f"PostgreSQL {spec.safe_location}: {type(exc).__name__}: {msg}") from None
    cols = list(zip(*rows)) if rows else [() for _ in desc]
    naturals = []
    for d, values in zip(desc, cols):
        kind = _PG_OIDS.get(d.type_code)
        if kind is None:
            typname = typnames.get(d.type_code, str(d.type_code))
            if typname in ("vector", "halfvec"):
                kind = "vector"
            elif typname in ("citext", "bpchar", "varchar"):
                kind = "string"
            else:
                raise TableLoadError(f"column {d.name!r}: PostgreSQL type {typname} is not supported; cast it "
                                     "in the query (::text, ::float8, ::int8, ...)")
        naturals.append(_pg_column(d.name, list(values), kind))
    return build_table(spec.name, naturals, spec)


def _pg_column(name: str, values: list[Any], kind: str) -> Natural:
    for i, v in enumerate(values):
        if v is None:
            raise null_error(name, i)
    if kind == "vector":
        if not values:
            return Natural(name, "vector", np.empty((0, 0)))
        if isinstance(values[0], str):
            return Natural(name, "vector", parse_vectors_text(name, values))
        if hasattr(values[0], "tolist") and not isinstance(values[0], list):
            values = [v.tolist() for v in values]
        return Natural(name, "vector", vectors(name, values))
    if kind == "uuid":
        return Natural(name, "uuid", np.frombuffer(b"".join(v.bytes for v in values), np.uint8).reshape(-1, 16)
                       if values else np.empty((0, 16), np.uint8))
    if kind == "binary":
        return Natural(name, "binary", [bytes(v) for v in values])
    if kind == "decimal":
        return Natural(name, "decimal", values)
    if kind == "string":
        return Natural(name, "string", [str(v) for v in values])
    if kind == "bool":
        return Natural(name, "bool", np.array(values, dtype=np.bool_))
    if kind in ("int32", "int64"):
        return Natural(name, kind, np.array(values, dtype="<i4" if kind == "int32" else "<i8"))
    return Natural(name, kind, np.array(values, dtype="<f8").astype("<f4" if kind == "float32" else "<f8"))
