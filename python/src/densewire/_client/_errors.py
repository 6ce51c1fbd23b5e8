"""The client's typed errors: what the server said (by status), or why no answer came."""

from __future__ import annotations

__all__ = ["APIError", "BadRequestError", "RateLimitError", "ServiceUnavailableError", "APIConnectionError",
           "APITimeoutError", "status_error"]


class APIError(Exception):
    """The server answered with an error: its status and the fields of its OpenAI error envelope.
    ``attempts`` is how many requests were sent before giving up (1 when nothing was retried)."""

    def __init__(self, status_code: int, message: str, code: str | None = None, param: str | None = None,
                 offset: int | None = None, *, attempts: int = 1, retry_after: float | None = None) -> None:
        self.status_code, self.message, self.code, self.param, self.offset = status_code, message, code, param, offset
        self.attempts, self.retry_after = attempts, retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"HTTP {self.status_code}" + (f" {self.code}" if self.code else "") + f": {self.message}"
        return text + (f" (after {self.attempts} attempts)" if self.attempts > 1 else "")

    def __str__(self) -> str:  # attempts is set after construction by the retry loop
        return self._text()


class BadRequestError(APIError):
    """A 4xx that is the caller's fault (never retried)."""


class RateLimitError(APIError):
    """429: the server is at its admission limit (retried with backoff, honouring ``Retry-After``)."""


class ServiceUnavailableError(APIError):
    """503: the server is loading, draining or full (retried with backoff, honouring ``Retry-After``)."""


class APIConnectionError(Exception):
    """No HTTP answer: the connection could not be made, or broke before or while the answer came."""

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        self.message, self.attempts = message, attempts
        super().__init__(message)

    def __str__(self) -> str:
        return self.message + (f" (after {self.attempts} attempts)" if self.attempts > 1 else "")


class APITimeoutError(APIConnectionError):
    """The request took longer than the client's ``timeout``."""


def status_error(status: int) -> type[APIError]:
    """The error class for an HTTP status."""
    if status == 429:
        return RateLimitError
    if status == 503:
        return ServiceUnavailableError
    if 400 <= status < 500:
        return BadRequestError
    return APIError
