"""Error categories of SPEC.md section 11: one exception class per category.

Every error carries the category, a message saying what was wrong, and where: ``offset``
(characters of a Base64 string, bytes of a binary body) and/or ``field`` (a JSON path such as
``data[3].embedding``, a MessagePack/Protobuf field name or an HTTP header name).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "DensewireError",
    "InvalidBase64Error",
    "LengthMismatchError",
    "ShapeMismatchError",
    "UnknownDtypeError",
    "TruncatedError",
    "MalformedError",
    "InvalidFieldError",
    "NonFiniteError",
    "UnauthorizedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "NotAcceptableError",
    "MethodNotAllowedError",
    "UnavailableError",
    "RateLimitedError",
    "error_class",
]


class DensewireError(ValueError):
    """Base class: ``category`` and ``http_status`` are fixed per subclass (SPEC.md section 11)."""

    category: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, offset: int | None = None, field: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.field is not None:
            where.append(self.field)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.category}: {self.message}" + (f" ({', '.join(where)})" if where else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, offset={self.offset!r}, field={self.field!r})"

    def located(self, field: str) -> "DensewireError":
        """The same error placed inside an enclosing field (used by envelope decoders)."""
        return type(self)(self.message, offset=self.offset, field=field if self.field is None else f"{field}.{self.field}")

    def to_envelope(self) -> dict[str, Any]:
        """The OpenAI error envelope, with densewire's ``offset``."""
        message = f"{self.field}: {self.message}" if self.field else self.message
        return {"error": {
            "message": message,
            "type": "invalid_request_error" if self.http_status < 500 else "server_error",
            "param": self.field,
            "code": self.category,
            "offset": self.offset,
        }}


def _category(name: str, status: int, doc: str) -> type[DensewireError]:
    cls = type("".join(p.title() for p in name.split("_")) + "Error", (DensewireError,),
               {"category": name, "http_status": status, "__doc__": doc, "__module__": __name__})
    return cls


InvalidBase64Error = _category("invalid_base64", 400, "A character outside the alphabet, bad padding or a dangling character.")
LengthMismatchError = _category("length_mismatch", 400, "The data's byte length is not n * row_bytes(dtype, d).")
ShapeMismatchError = _category("shape_mismatch", 400, "Rows of different lengths, or a row count or index that disagrees with the shape.")
UnknownDtypeError = _category("unknown_dtype", 400, "A dtype name or enum value that SPEC.md does not define.")
TruncatedError = _category("truncated", 400, "A structured body ended before it was complete.")
MalformedError = _category("malformed", 400, "The body is not valid in its format.")
InvalidFieldError = _category("invalid_field", 422, "A field or header is missing, of the wrong type or out of range.")
NonFiniteError = _category("non_finite", 422, "NaN or infinity cannot be written as a JSON number.")
UnauthorizedError = _category("unauthorized", 401, "Missing or wrong API key.")
NotFoundError = _category("not_found", 404, "Unknown route, model or table.")
PayloadTooLargeError = _category("payload_too_large", 413, "The request body, or its decompressed size, is over the limit.")
UnsupportedMediaTypeError = _category("unsupported_media_type", 415, "Request Content-Type or Content-Encoding not supported.")
NotAcceptableError = _category("not_acceptable", 406, "Nothing in Accept can be served.")
MethodNotAllowedError = _category("method_not_allowed", 405, "A route called with another HTTP method.")
UnavailableError = _category("unavailable", 503, "The model or an upstream is not ready or failed.")
RateLimitedError = _category("rate_limited", 429, "The server cannot take the request now (at its limit of concurrent requests); retry after Retry-After.")

_BY_CATEGORY = {cls.category: cls for cls in DensewireError.__subclasses__()}


def error_class(category: str) -> type[DensewireError]:
    """The exception class of a category name (``DensewireError`` itself for unknown names)."""
    return _BY_CATEGORY.get(category, DensewireError)
