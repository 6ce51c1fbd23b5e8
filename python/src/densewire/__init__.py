"""densewire: embeddings and numeric data between services at memory speed.

One wire spec (SPEC.md) for float32/float16/bfloat16/float64/int8/uint8/binary tensors as strict
Base64 inside OpenAI-compatible JSON, raw bodies, MessagePack, Protobuf and Arrow; numpy codecs that
decode without copying the vector data where the buffer allows; int8/uint8 quantization with
published per-dimension ranges (``Quantization``, ``quantize``, ``dequantize``).

>>> import numpy as np, densewire
>>> emb = densewire.Embeddings(densewire.Tensor.from_array(np.array([[1.0, -2.5, 0.1]], dtype=np.float32)), "m")
>>> body, headers = densewire.encode(emb, "msgpack")
>>> headers["Content-Type"]
'application/vnd.msgpack'
>>> densewire.decode(body, "msgpack").tensor.array
array([[ 1. , -2.5,  0.1]], dtype=float32)
"""

from ._arrow import decode_arrow, encode_arrow
from ._base64 import decode_base64, encode_base64
from ._client import (DEFAULT_ACCEPT, APIConnectionError, APIError, APITimeoutError, AsyncClient, AsyncTablesClient,
                      BadRequestError, Client, FetchedTable, NotModified, RateLimitError, ServiceUnavailableError,
                      TableInfo, TablesClient)
from ._convert import convert
from ._errors import (DensewireError, InvalidBase64Error, InvalidFieldError, LengthMismatchError, MalformedError,
                      MethodNotAllowedError, NonFiniteError, NotAcceptableError, NotFoundError, PayloadTooLargeError, ShapeMismatchError,
                      TruncatedError, UnauthorizedError, UnavailableError, RateLimitedError, UnknownDtypeError,
                      UnsupportedMediaTypeError, error_class)
from ._formats import FORMATS, MEDIA_TYPES, decode, detect_format, encode, format_for_media_type
from ._json import decode_json, encode_json, from_openai
from ._kserve import KServeOutput, KServeResponse, decode_kserve, encode_kserve
from ._msgpack import decode_msgpack, encode_msgpack
from ._protobuf import decode_protobuf, encode_protobuf
from ._quantize import Quantization, cohere_binary, dequantize, from_cohere_binary, quantization_id, quantize
from ._raw import decode_raw, encode_raw
from ._ragged import RaggedTensor, SparseVectors, maxsim
from ._ragged_protobuf import decode_protobuf_kind, encode_protobuf_kind
from ._tensor import DTYPES, Embeddings, Tensor, Usage, row_bytes
from . import pgvector
from ._tables import (DEMO_SEED, TABLE_FORMATS, TABLE_MEDIA_TYPES, Column, Table, columns_header, decode_table,
                      demo_table, encode_table, parse_columns_header, table_headers)

__version__ = "0.1.0"
SPEC_VERSION = "1.4"

__all__ = [
    "DTYPES", "FORMATS", "MEDIA_TYPES", "SPEC_VERSION",
    "Tensor", "Usage", "Embeddings", "row_bytes", "convert", "RaggedTensor", "SparseVectors", "maxsim",
    "Quantization", "quantize", "dequantize", "quantization_id", "cohere_binary", "from_cohere_binary",
    "encode", "decode", "detect_format", "format_for_media_type",
    "encode_base64", "decode_base64", "encode_json", "decode_json", "from_openai", "encode_raw", "decode_raw",
    "encode_kserve", "decode_kserve", "KServeOutput", "KServeResponse",
    "encode_msgpack", "decode_msgpack", "encode_protobuf", "decode_protobuf", "encode_protobuf_kind", "decode_protobuf_kind", "encode_arrow", "decode_arrow",
    "DensewireError", "InvalidBase64Error", "LengthMismatchError", "ShapeMismatchError", "UnknownDtypeError",
    "TruncatedError", "MalformedError", "InvalidFieldError", "NonFiniteError", "UnauthorizedError",
    "NotFoundError", "PayloadTooLargeError", "UnsupportedMediaTypeError", "NotAcceptableError", "MethodNotAllowedError",
    "UnavailableError", "RateLimitedError", "error_class",
    "Client", "AsyncClient", "APIError", "DEFAULT_ACCEPT", "BadRequestError", "RateLimitError",
    "ServiceUnavailableError", "APIConnectionError", "APITimeoutError",
    "TablesClient", "AsyncTablesClient", "TableInfo", "FetchedTable", "NotModified",
    "Table", "Column", "TABLE_FORMATS", "TABLE_MEDIA_TYPES", "encode_table", "decode_table", "demo_table", "DEMO_SEED",
    "columns_header", "parse_columns_header", "table_headers",
    "pgvector",
]
