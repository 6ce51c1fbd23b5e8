"""HTTP clients of a densewire server: embeddings (:class:`Client`, :class:`AsyncClient`) and tables
(:class:`TablesClient`, :class:`AsyncTablesClient`), on aiohttp, with retries and typed errors."""

from ._embeddings import DEFAULT_ACCEPT, AsyncClient, Client
from ._errors import (APIConnectionError, APIError, APITimeoutError, BadRequestError, RateLimitError,
                      ServiceUnavailableError)
from ._retry import RetryPolicy, parse_retry_after
from ._tables import AsyncTablesClient, FetchedTable, NotModified, TableInfo, TablesClient, table_accept

__all__ = [
    "Client", "AsyncClient", "DEFAULT_ACCEPT", "TablesClient", "AsyncTablesClient", "TableInfo", "FetchedTable",
    "NotModified", "table_accept", "APIError", "BadRequestError", "RateLimitError", "ServiceUnavailableError",
    "APIConnectionError", "APITimeoutError", "RetryPolicy", "parse_retry_after",
]
