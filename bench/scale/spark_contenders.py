"""The ``pandas_udf`` s T3 (bench/scale/spark.py) puts beside ``densewire.spark.embed``: what a user
writes today, run in Spark's Python workers. This module is on the executors' PYTHONPATH, so the UDFs
reach them by reference and their clients and thread pools live as long as the worker process (Spark
reuses its Python workers), as densewire's own per-process state does."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import ArrayType, FloatType

__all__ = ["openai_float_udf", "client_tolist_udf"]


@functools.cache
def _pool(in_flight: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(in_flight)


@functools.cache
def _openai_clients(urls: tuple[str, ...]) -> list:
    import openai

    return [openai.OpenAI(base_url=u + "/v1", api_key="none", max_retries=2) for u in urls]


@functools.cache
def _densewire_clients(urls: tuple[str, ...]) -> list:
    import densewire

    return [densewire.Client(u) for u in urls]


def _rows(items: list[str], batch_size: int, in_flight: int, request: Callable[[int, list[str]], list]) -> pd.Series:
    """``request(k, texts)`` for the k-th run of ``batch_size`` texts, ``in_flight`` at a time; their rows
    in order, as the Series a ``pandas_udf`` returns."""
    spans = range(0, len(items), batch_size)
    parts = _pool(in_flight).map(lambda lo: request(lo // batch_size, items[lo:lo + batch_size]), spans)
    return pd.Series([row for part in parts for row in part])


def openai_float_udf(urls: list[str], model: str, batch_size: int, in_flight: int) -> Callable:
    """``encoding_format="float"`` through the OpenAI SDK: JSON floats, a Python list per row, requests
    of ``batch_size`` texts, ``in_flight`` at a time, alternating over ``urls``."""
    key = tuple(urls)

    @pandas_udf(ArrayType(FloatType(), containsNull=False))
    def openai_float(texts: pd.Series) -> pd.Series:
        clients = _openai_clients(key)

        def request(k: int, batch: list[str]) -> list[list[float]]:
            resp = clients[k % len(clients)].embeddings.create(input=batch, model=model, encoding_format="float")
            return [d.embedding for d in resp.data]

        return _rows(texts.tolist(), batch_size, in_flight, request)

    return openai_float


def client_tolist_udf(urls: list[str], batch_size: int, in_flight: int) -> Callable:
    """densewire's own client (raw float32 answers as one ndarray a request), then ``.tolist()`` per row
    for the ``pandas_udf``'s Series: the same wire as ``densewire.spark.embed``, with lists per row."""
    key = tuple(urls)

    @pandas_udf(ArrayType(FloatType(), containsNull=False))
    def client_tolist(texts: pd.Series) -> pd.Series:
        clients = _densewire_clients(key)
        return _rows(texts.tolist(), batch_size, in_flight,
                     lambda k, batch: [row.tolist() for row in clients[k % len(clients)].embed(batch)])

    return client_tolist
