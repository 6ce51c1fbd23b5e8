"""OpenSearch with the k-NN plugin: the ``knn_vector`` index a sink writes into.

OpenSearch takes vectors only as JSON float arrays, so the bodies are :func:`densewire._stores._esbulk.bulk_lines`'
``vector_format="floats"`` (each row's float32 values written by orjson straight from the numpy buffer:
no Python float per value, the shortest decimal that reads back as the same float32). Before a sink
sends anything the index is checked: ``GET <index>/_mapping`` must show ``field`` as a ``knn_vector`` of
the vectors' dimension (through the :class:`~densewire._stores._es.EsConnection` the bulk requests use:
an API key, basic auth and TLS with a CA file as for Elasticsearch); a missing index is made when asked (``index.knn: true``, an HNSW ``method`` on
the ``lucene`` engine, the one the k-NN plugin runs without its native libraries) and is an error
otherwise.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ._es import EsConnection, EsError, _reason

__all__ = ["SPACE_TYPES", "ENGINES", "KnnIndexError", "knn_index_body", "ensure_knn_index"]

SPACE_TYPES = ("l2", "cosinesimil", "innerproduct", "l1", "linf")
ENGINES = ("lucene", "faiss")


def knn_index_body(field: str, dims: int, *, space_type: str = "l2", engine: str = "lucene",
                   m: int = 16, ef_construction: int = 100, shards: int = 1, replicas: int = 0) -> dict[str, Any]:
    """The ``PUT <index>`` body of a k-NN index with one ``knn_vector`` field of ``dims`` float32s."""
    return {
        "settings": {"index": {"knn": True, "number_of_shards": shards, "number_of_replicas": replicas}},
        "mappings": {"properties": {field: {
            "type": "knn_vector", "dimension": dims, "data_type": "float",
            "method": {"name": "hnsw", "engine": engine, "space_type": space_type,
                       "parameters": {"m": m, "ef_construction": ef_construction}}}}},
    }


class KnnIndexError(ValueError):
    """The index is missing (and was not to be made) or its field is not a ``knn_vector`` of ``dims``."""


def ensure_knn_index(conn: EsConnection, index: str, field: str, dims: int, *, create: bool = False,
                     space_type: str = "l2", engine: str = "lucene") -> str:
    """Check (or with ``create`` make) ``index`` on the node ``conn`` talks to (its API key, basic auth and
    CA file: the connection the ``_bulk`` requests use); "checked" or "created"."""
    if space_type not in SPACE_TYPES:
        raise KnnIndexError(f"space_type must be one of {', '.join(SPACE_TYPES)}, not {space_type!r}")
    if engine not in ENGINES:
        raise KnnIndexError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    where = "/" + quote(index, safe="")
    status, mapping = conn.request("GET", f"{where}/_mapping")
    if status == 404:
        if not create:
            raise KnnIndexError(f"no index {index!r} at {conn.url} (create it, or pass create_index=True / "
                                f"--create-index to have a knn_vector index of {dims} dimensions made)")
        status, answer = conn.request("PUT", where, knn_index_body(field, dims, space_type=space_type, engine=engine),
                                      ok=(200, 201, 400))
        if status == 200:
            return "created"
        if "resource_already_exists_exception" not in str(answer):  # made meanwhile by another task: check it
            raise EsError(f"PUT {conn.url}{where} answered HTTP {status}: {_reason(answer)}",
                          category="invalid_field", status=status, field="index")
        status, mapping = conn.request("GET", f"{where}/_mapping")
    (_name, body), = mapping.items()  # an alias answers with its one index
    props = body.get("mappings", {}).get("properties", {})
    spec = props.get(field)
    if spec is None:
        raise KnnIndexError(f"index {index!r} has no field {field!r} (its fields: {sorted(props)})")
    if spec.get("type") != "knn_vector":
        raise KnnIndexError(f"{index}.{field} is a {spec.get('type')!r}, not a knn_vector")
    if spec.get("data_type", "float") != "float":
        raise KnnIndexError(f"{index}.{field} holds {spec['data_type']} values; densewire writes float vectors")
    if int(spec.get("dimension", -1)) != dims:
        raise KnnIndexError(f"vectors of {dims} dimensions for {index}.{field}, a knn_vector of "
                            f"{spec.get('dimension')} dimensions")
    return "checked"
