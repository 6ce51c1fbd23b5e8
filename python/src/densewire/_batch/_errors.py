"""``BatchError``: what went wrong in a batch job, and where (column, row, block).

It is a :class:`~densewire.DensewireError` whose category is one of SPEC.md section 11's: bad input
in the table is ``invalid_field`` (a missing or non-string column, a null or empty text, a null id),
a vector column or server of another dimension is ``shape_mismatch``, a replica fleet with no replica
answering is ``unavailable``, and the error of a sink's store is ``internal_error`` (its cause
chained). Where it is known the message and the attributes name the ``column``, the ``row`` (index
in the block) and its ``row_id`` (the value of the id column), and the ``block``.
"""

from __future__ import annotations

from typing import Any

from .._errors import DensewireError, error_class

__all__ = ["BatchError"]


class BatchError(DensewireError):
    """A batch job's error, with ``category`` (SPEC.md section 11), ``column``, ``row``, ``row_id`` and
    ``block`` (each None where it does not apply)."""

    def __init__(self, message: str, *, category: str = "invalid_field", column: str | None = None,
                 row: int | None = None, row_id: Any = None, block: str | None = None) -> None:
        self.category = category  # an instance's category: one class for every category of a batch job
        self.http_status = error_class(category).http_status
        self.column, self.row, self.row_id, self.block = column, row, row_id, block
        field = column
        if field is not None and row is not None:
            field = f"{column}[{row}]"
        super().__init__(message, field=field)

    def __str__(self) -> str:
        where = []
        if self.column is not None:
            where.append(f"column {self.column!r}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.row_id is not None:
            where.append(f"id {self.row_id!r}")
        if self.block is not None:
            where.append(f"block {self.block!r}")
        return f"{self.category}: {self.message}" + (f" ({', '.join(where)})" if where else "")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (Ray, Spark) whole
        return (_rebuild, (self.message, self.category, self.column, self.row, self.row_id, self.block))

    def in_block(self, block: str) -> "BatchError":
        """This error, naming ``block`` if it names none yet."""
        if self.block is None:
            self.block = block
            self.args = (str(self),)
        return self


def store_check_error(exc: Exception, *, column: str | None, block: str | None) -> BatchError:
    """A sink's store refusing its collection, index or table: ``shape_mismatch`` where that holds vectors of
    other dimensions (the stores' message says "vectors of D dimensions for ..."), ``invalid_field`` else."""
    return BatchError(str(exc), category="shape_mismatch" if "dimensions for" in str(exc) else "invalid_field",
                      column=column, block=block)


def _rebuild(message: str, category: str, column: str | None, row: int | None, row_id: Any,
             block: str | None) -> BatchError:
    return BatchError(message, category=category, column=column, row=row, row_id=row_id, block=block)
