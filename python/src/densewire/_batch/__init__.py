"""Engine-neutral batch embedding and block-wise sinks (the public module is :mod:`densewire.batch`)."""

from ._embedder import BatchEmbedder
from ._engine import worker_cpus
from ._errors import BatchError
from ._chromasink import ChromaSink
from ._essink import EsBulkSink
from ._esmulti import EsRankVectorsSink, EsSparseVectorSink
from ._fleet import Fleet, Replica
from ._lancesink import LanceDBSink
from ._milvussink import MilvusSink
from ._ossink import OpenSearchSink
from ._pgsink import PgvectorSink
from ._pgtokens import PgvectorTokensSink

__all__ = ["BatchEmbedder", "BatchError", "ChromaSink", "EsBulkSink", "EsRankVectorsSink", "EsSparseVectorSink", "Fleet", "LanceDBSink", "MilvusSink",
           "OpenSearchSink", "PgvectorSink", "PgvectorTokensSink", "Replica", "worker_cpus"]
