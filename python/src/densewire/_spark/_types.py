"""The Spark side of a vector column: its Spark type per dtype, the checks the driver makes from the
schema alone (before any task runs), and the metadata that carries the dimension along the plan.

A vector column made by :func:`densewire.spark.embed` is a non-null ``array<float>`` (``array<double>``,
``array<tinyint>``) whose element is non-null, with the field metadata ``densewire.dimensions`` and
``densewire.dtype``; Spark keeps a field's metadata through ``select``, ``filter``, ``withColumn`` of
other columns..., so :func:`densewire.spark.write_pgvector` can compare the dimension with the target
column's before the job starts.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types

from .._batch import BatchError

__all__ = ["SPARK_DTYPES", "element_type", "check_text_column", "check_vector_column", "check_id_column",
           "check_new_column", "check_tokens_column", "check_sparse_column", "vocabulary_of", "dimensions_of",
           "field_of", "DIMENSIONS_KEY", "DTYPE_KEY", "OUTPUT_KEY",
           "VOCABULARY_KEY"]

DIMENSIONS_KEY, DTYPE_KEY = "densewire.dimensions", "densewire.dtype"
#: the output kind of an embedded column (dense, tokens, sparse) and a sparse column's vocabulary size
OUTPUT_KEY, VOCABULARY_KEY = "densewire.output", "densewire.vocabulary_size"

#: densewire dtype -> the Spark type name of the array's elements (Spark has no float16, bfloat16 or
#: unsigned byte: those dtypes would need a widening copy per value, so they are refused)
SPARK_DTYPES = {"float32": "FloatType", "float64": "DoubleType", "int8": "ByteType"}


def element_type(dtype: str) -> Any:
    """The Spark type of one value of a ``dtype`` vector."""
    if dtype not in SPARK_DTYPES:
        raise BatchError(f"a Spark vector column holds float32, float64 or int8 values (array<float>, array<double>, "
                         f"array<tinyint>), not {dtype}: Spark has no type for it")
    return getattr(types, SPARK_DTYPES[dtype])()


def field_of(df: Any, name: str, what: str) -> Any:
    """The StructField ``name`` of ``df``'s schema, or a BatchError naming the columns there are."""
    schema = df.schema
    if name not in schema.names:
        raise BatchError(f"no {what} column {name!r}; the columns are {schema.names}", column=name)
    return schema[name]


def check_text_column(df: Any, name: str) -> None:
    field = field_of(df, name, "text")
    if not isinstance(field.dataType, (types.StringType, types.VarcharType, types.CharType)):
        raise BatchError(f"the text column is of type {field.dataType.simpleString()}, not a string", column=name)


def check_new_column(df: Any, name: str) -> None:
    if name in df.schema.names:
        raise BatchError("the output column is already in the DataFrame", column=name)


def check_id_column(df: Any, name: str) -> None:
    field = field_of(df, name, "id")
    if not isinstance(field.dataType, (types.LongType, types.IntegerType, types.ShortType, types.ByteType, types.StringType,
                                       types.VarcharType, types.CharType)):
        raise BatchError(f"the id column is of type {field.dataType.simpleString()}: ids are integers or strings",
                         column=name)


def check_vector_column(df: Any, name: str) -> Any:
    """The vector column's field, checked to be an array of numbers."""
    field = field_of(df, name, "vector")
    typ = field.dataType
    numeric = (types.FloatType, types.DoubleType, types.ByteType, types.ShortType, types.IntegerType, types.LongType)
    if not (isinstance(typ, types.ArrayType) and isinstance(typ.elementType, numeric)):
        raise BatchError(f"the vector column is of type {typ.simpleString()}, not an array of numbers", column=name)
    return field


def check_tokens_column(df: Any, name: str) -> Any:
    """A per-token column's field (``array<array<float>>``, what ``embed(..., output="tokens")`` makes)."""
    field = field_of(df, name, "per-token")
    typ = field.dataType
    if not (isinstance(typ, types.ArrayType) and isinstance(typ.elementType, types.ArrayType)
            and isinstance(typ.elementType.elementType, (types.FloatType, types.DoubleType))):
        raise BatchError(f"the per-token column is of type {typ.simpleString()}, not array<array<float>> (what "
                         f"embed(..., output='tokens') makes)", column=name)
    return field


def check_sparse_column(df: Any, name: str) -> Any:
    """A sparse column's field (``struct<indices: array<int>, values: array<float>>``, what ``embed(...,
    output="sparse")`` makes)."""
    field = field_of(df, name, "sparse")
    typ = field.dataType
    ok = isinstance(typ, types.StructType) and [f.name for f in typ.fields] == ["indices", "values"]
    if ok:
        idx, val = typ.fields[0].dataType, typ.fields[1].dataType
        ok = (isinstance(idx, types.ArrayType) and isinstance(idx.elementType, (types.IntegerType, types.LongType))
              and isinstance(val, types.ArrayType) and isinstance(val.elementType, (types.FloatType, types.DoubleType)))
    if not ok:
        raise BatchError(f"the sparse column is of type {typ.simpleString()}, not struct<indices: array<int>, values: "
                         f"array<float>> (what embed(..., output='sparse') makes)", column=name)
    return field


def vocabulary_of(field: Any) -> int | None:
    """The vocabulary size a sparse column's metadata states (None when it states none)."""
    value = (field.metadata or {}).get(VOCABULARY_KEY)
    return int(value) if isinstance(value, int) and value > 0 else None


def dimensions_of(field: Any) -> int | None:
    """The dimension a vector column's metadata states (None when it states none)."""
    value = (field.metadata or {}).get(DIMENSIONS_KEY)
    return int(value) if isinstance(value, int) and value >= 0 else None
