"""PostgreSQL + pgvector: binary COPY streams written from one ``(n, d)`` array and read back into one
(SPEC.md section 16), and loading/reading over psycopg 3.

>>> import numpy as np
>>> from densewire import pgvector
>>> vectors = np.array([[1.0, -2.5, 0.1], [0.0, -0.0, 2.0]], dtype=np.float32)
>>> body = pgvector.encode_copy(vectors, ids=np.array([1, 2]), id_type="int8")   # COPY t (id, embedding) FROM STDIN (FORMAT BINARY)
>>> body[:11]
b'PGCOPY\\n\\xff\\r\\n\\x00'
>>> back = pgvector.decode_copy(body, id_type="int8")
>>> bool(np.array_equal(back.tensor.array, vectors)), back.ids.tolist()
(True, [1, 2])
>>> pgvector.decode_copy(pgvector.encode_copy(vectors, pg_type="halfvec"), pg_type="halfvec").tensor.array.dtype
dtype('float16')

With a database (psycopg 3; the column types are read from the catalog):

.. code-block:: python

    import psycopg
    from densewire import pgvector

    with psycopg.connect("postgresql://localhost/app") as conn:
        pgvector.copy_vectors(conn, "items", ("id", "embedding"), vectors, ids)   # vector, halfvec, bit or sparsevec
        got = pgvector.read_vectors(conn, "items", ("id", "embedding"), order_by="id")
        got.tensor.array, got.ids                                                 # (n, d) array, ids

``copy_vectors`` hands each chunk to libpq; ``direct=True`` writes the CopyData messages on the
connection's socket itself (a tenth less client CPU, but slower on an idle machine; not on TLS or
GSS-encrypted connections: ``direct_socket_reason(conn)`` says why not); libpq ends the COPY and reports
its errors either way.
"""

from ._stores._pgcopy import (HEADER, ID_TYPES, SIGNATURE, TRAILER, VECTOR_TYPES, CopyColumns, CopyData, encode_copy,
                      encode_tuples, iter_copy)
from ._stores._pgcopy_read import decode_copy
from ._stores._pgvector import CopyStats, column_types, copy_vectors, direct_socket_reason, read_vectors

__all__ = ["copy_vectors", "direct_socket_reason", "read_vectors", "encode_copy", "decode_copy", "iter_copy", "encode_tuples", "column_types",
           "CopyColumns", "CopyData", "CopyStats", "VECTOR_TYPES", "ID_TYPES", "SIGNATURE", "HEADER", "TRAILER"]
