"""Tables in ``densewire serve`` (SPEC.md 15.9), by responsibility:

* :mod:`.spec`: what a served table is (``TableSpec``) and ``TableLoadError``;
* :mod:`.config`: ``--table``, ``--tables-config`` (TOML), the demo tables, ``--table-compression``
  (standard library only: the flags are checked before anything heavy loads);
* :mod:`.coercion`: a source's columns to a ``densewire.Table``; the declared-type conversions are
  one table of (from type, to type) rules, ``coercion.RULES``;
* :mod:`.sources`: one module per source kind (CSV/JSON Lines, Parquet/Arrow IPC, SQLite,
  PostgreSQL, demo) and ``load_table``;
* :mod:`.build`: the build process's work: load, serialize in every format, compress;
* :mod:`.lanes`: the background builder (priority queues feeding the build processes);
* :mod:`.snapshot`, :mod:`.registry`: a table's prepared versions, and the registry that loads,
  refreshes and pre-warms them;
* :mod:`.routes`: ``GET /v1/tables``, ``GET``/``HEAD /v1/tables/{name}`` and ``/demo``.

This package imports none of them, so that importing ``.config`` (from the server's flag checks)
stays light: import what you need from its module.
"""
