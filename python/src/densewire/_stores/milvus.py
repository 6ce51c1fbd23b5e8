"""Milvus (and Milvus Lite 2.5 standalone): the collection a sink upserts into, and upserts as binary.

pymilvus builds a float vector column from Python floats (``np.asarray(row).tolist()`` a row, then a
protobuf ``repeated float`` extended value by value). Here the request is pymilvus' own protobuf
(``milvus_pb2.UpsertRequest``), its vector column filled from the numpy buffer: a ``FLOAT_VECTOR``'s
packed ``FloatArray`` is parsed from the little-endian float32 bytes (``MergeFromString``: one copy in
C), a ``FLOAT16_VECTOR`` or ``BFLOAT16_VECTOR`` column is its ``bytes`` field as it is; the request goes
through the connection pymilvus opened (its gRPC stub, its authentication). Upsert by primary key: a
block written again replaces its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._optional import require

__all__ = ["MilvusCollectionError", "pymilvus", "check_collection", "upsert_request", "send_upsert",
           "VECTOR_TYPES"]


def pymilvus() -> Any:
    return require("pymilvus", extra="stores", feature="writing to Milvus")


class MilvusCollectionError(ValueError):
    pass


#: numpy dtype of the vectors -> the Milvus vector type they go in as
VECTOR_TYPES = {"float32": "FLOAT_VECTOR", "float16": "FLOAT16_VECTOR", "bfloat16": "BFLOAT16_VECTOR"}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def check_collection(client: Any, name: str, id_field: str, field: str, dims: int, vector_type: str, *,
                     create: bool = False, metric: str = "L2", string_ids: bool = False) -> dict[str, Any]:
    """The description of collection ``name`` (made with ``create`` when missing: ``id_field`` its INT64 or
    VARCHAR primary key, ``field`` a ``vector_type`` of ``dims``, an AUTOINDEX on it (FLAT on Milvus Lite),
    loaded), checked."""
    pm = pymilvus()
    DataType = pm.DataType
    if not client.has_collection(name):
        if not create:
            raise MilvusCollectionError(f"no collection {name!r} in Milvus (create it, or pass create_collection=True "
                                        f"/ --create-index to have one of {dims}-value vectors made)")
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        if string_ids:
            schema.add_field(id_field, DataType.VARCHAR, is_primary=True, max_length=512)
        else:
            schema.add_field(id_field, DataType.INT64, is_primary=True)
        schema.add_field(field, getattr(DataType, vector_type), dim=dims)
        client.create_collection(name, schema=schema)
        for index_type in ("AUTOINDEX", "FLAT"):  # Milvus Lite indexes FLAT only (float16 fields refuse AUTOINDEX)
            index = client.prepare_index_params()
            index.add_index(field_name=field, index_type=index_type, metric_type=metric)
            try:
                client.create_index(name, index)
                break
            except pm.MilvusException as exc:
                if "only support FLAT" not in str(exc):
                    raise
        client.load_collection(name)
    desc = client.describe_collection(name)
    fields = {f["name"]: f for f in desc["fields"]}
    if field not in fields:
        raise MilvusCollectionError(f"collection {name!r} has no field {field!r} (its fields: {sorted(fields)})")
    if id_field not in fields or not fields[id_field].get("is_primary"):
        raise MilvusCollectionError(f"{name}.{id_field} is not the collection's primary key: upserts by id need it")
    vt = fields[field]["type"]
    if vt not in (DataType.FLOAT_VECTOR, DataType.FLOAT16_VECTOR, DataType.BFLOAT16_VECTOR):
        raise MilvusCollectionError(f"{name}.{field} is a {vt.name}, not a float vector field")
    have = int(fields[field].get("params", {}).get("dim", -1))
    if have != dims:
        raise MilvusCollectionError(f"vectors of {dims} dimensions for {name}.{field}, a {vt.name} of {have}")
    return {"vector_type": vt.name, "id_type": fields[id_field]["type"].name}


def upsert_request(name: str, id_field: str, ids: Sequence[Any] | np.ndarray, field: str, a: np.ndarray,
                   vector_type: str, id_type: str = "INT64") -> Any:
    """pymilvus' ``UpsertRequest`` of the rows of ``a`` (float32, or float16/bfloat16 bits as ``uint16``)."""
    pm = pymilvus()
    from_pb = pm.grpc_gen
    milvus_pb2, schema_pb2 = from_pb.milvus_pb2, from_pb.schema_pb2
    DataType = pm.DataType
    n, d = a.shape
    req = milvus_pb2.UpsertRequest(collection_name=name, num_rows=n)
    key = req.fields_data.add(field_name=id_field)
    if id_type == "VARCHAR":
        key.type = DataType.VARCHAR
        key.scalars.string_data.data.extend(str(i) for i in ids)
    else:
        key.type = DataType.INT64
        key.scalars.long_data.data.extend(np.asarray(ids, dtype=np.int64).tolist())
    vec = req.fields_data.add(field_name=field, type=getattr(DataType, vector_type))
    vec.vectors.dim = d
    if vector_type == "FLOAT_VECTOR":
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        vec.vectors.float_vector.MergeFromString(b"\x0a" + _varint(len(raw)) + raw)  # FloatArray.data, packed
    elif vector_type == "FLOAT16_VECTOR":
        vec.vectors.float16_vector = np.ascontiguousarray(a, dtype="<f2").tobytes()
    else:
        vec.vectors.bfloat16_vector = np.ascontiguousarray(a, dtype="<u2").tobytes()
    return req


def send_upsert(client: Any, request: Any, timeout: float) -> int:
    """``request`` through ``client``'s connection; the rows the server upserted."""
    handler = client._get_connection()
    response = handler._stub.Upsert(request, timeout=timeout)
    status = response.status
    if status.code != 0 or status.error_code != 0:
        raise MilvusCollectionError(f"Milvus refused the upsert: {status.reason or status.detail} (code {status.code})")
    return int(response.upsert_cnt)
