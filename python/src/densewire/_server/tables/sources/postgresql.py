"""PostgreSQL, through psycopg 3, in a read-only transaction; pgvector and arrays become vectors.

A query whose result has a pgvector ``vector`` or ``halfvec`` column is read with one binary COPY
(``COPY (query) TO STDOUT (FORMAT BINARY)``, SPEC.md section 16): the vectors arrive in pgvector's
binary form and become one float32 ``(n, d)`` array in a single numpy pass (``halfvec`` widened
exactly), with no float printed by the server or parsed here; the other columns come through psycopg's
binary loaders in the same stream, so every row's values stay together.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from densewire._errors import DensewireError
from densewire._optional import require
from densewire._stores._pgcopy_read import decode_values

from ..coercion import Natural, build_table, null_error, parse_vectors_text, vectors
from ..spec import TableLoadError, TableSpec

__all__ = ["load_postgresql"]

#: type OID -> how the column is read (SPEC.md 15.1 type, or a source kind needing care)
_PG_OIDS = {16: "bool", 21: "int32", 23: "int32", 20: "int64", 700: "float32", 701: "float64",
            25: "string", 1043: "string", 1042: "string", 19: "string", 2950: "uuid",
            1021: "vector", 1022: "vector", 1700: "decimal", 17: "binary"}
_TEXT_TYPES = ("citext", "bpchar", "varchar")


def load_postgresql(spec: TableSpec) -> Any:
    psycopg = require("psycopg", extra="serve", feature="PostgreSQL tables")

    query = (spec.query or f'SELECT * FROM "{spec.name}"').strip().rstrip(";").rstrip()
    try:
        with psycopg.connect(spec.location, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")
            desc = list(conn.execute(f"SELECT * FROM ({query}\n) AS densewire_q LIMIT 0").description or ())
            unknown = sorted({d.type_code for d in desc if d.type_code not in _PG_OIDS})
            typnames: dict[int, str] = {}
            if unknown:
                for oid, typname in conn.execute("SELECT oid::int, typname FROM pg_type WHERE oid = ANY(%s)",
                                                 (unknown,)).fetchall():
                    typnames[oid] = typname
            pgvector = {i: typnames[d.type_code] for i, d in enumerate(desc)
                        if typnames.get(d.type_code) in ("vector", "halfvec")}
            if pgvector:
                rows = _binary_copy(conn, query, desc, pgvector, typnames)
            else:
                rows = conn.execute(query).fetchall()
    except psycopg.Error as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TableLoadError(f"PostgreSQL {spec.safe_location}: {type(exc).__name__}: {msg}") from None
    cols = list(zip(*rows)) if rows else [() for _ in desc]
    naturals = []
    for i, (d, values) in enumerate(zip(desc, cols)):
        kind = _PG_OIDS.get(d.type_code)
        if i in pgvector:
            naturals.append(_pgvector_column(d.name, list(values), pgvector[i]))
            continue
        if kind is None:
            typname = typnames.get(d.type_code, str(d.type_code))
            if typname in _TEXT_TYPES:
                kind = "string"
            else:
                raise TableLoadError(f"column {d.name!r}: PostgreSQL type {typname} is not supported; cast it "
                                     "in the query (::text, ::float8, ::int8, ...)")
        naturals.append(_pg_column(d.name, list(values), kind))
    return build_table(spec.name, naturals, spec)


def _binary_copy(conn: Any, query: str, desc: list[Any], pgvector: dict[int, str], typnames: dict[int, str]) -> list:
    """The rows of the query from one binary COPY: pgvector columns as their binary bytes (read as bytea),
    the others by psycopg's binary loaders (text-like types as text)."""
    for i, d in enumerate(desc):
        if i not in pgvector and d.type_code not in _PG_OIDS and typnames.get(d.type_code) not in _TEXT_TYPES:
            raise TableLoadError(f"column {d.name!r}: PostgreSQL type {typnames.get(d.type_code, d.type_code)} is "
                                 "not supported; cast it in the query (::text, ::float8, ::int8, ...)")
    types = ["bytea" if i in pgvector else "text" if d.type_code not in _PG_OIDS else d.type_code
             for i, d in enumerate(desc)]
    with conn.cursor() as cur, cur.copy(f"COPY ({query}\n) TO STDOUT (FORMAT BINARY)") as copy:
        copy.set_types(types)
        return list(copy.rows())


def _pgvector_column(name: str, values: list[Any], typname: str) -> Natural:
    null = next((i for i, v in enumerate(values) if v is None), None)
    if null is not None:
        raise null_error(name, null)
    try:
        tensor = decode_values(values, typname, name)
    except DensewireError as exc:
        raise TableLoadError(f"column {name!r}: {exc.message}") from None
    if tensor.n == 0:
        return Natural(name, "vector", np.empty((0, 0)))
    return Natural(name, "vector", tensor.array.astype(np.float32))  # halfvec widens exactly


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
