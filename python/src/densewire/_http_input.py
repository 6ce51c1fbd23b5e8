"""What ``densewire inspect`` and ``convert`` read besides a bare body: an HTTP answer as ``curl -i``
or ``curl -D -`` prints it (status line and headers, then the body), and the OpenAI error envelope
a server answers with (SPEC.md section 11), which is shown as an error, never decoded as data.

>>> answer = parse_http_answer(b'HTTP/1.1 415 Unsupported Media Type\\r\\ncontent-type: application/json\\r\\n\\r\\n'
...                            b'{"error": {"message": "not JSON", "type": "invalid_request_error", '
...                            b'"param": "Content-Type", "code": "unsupported_media_type", "offset": null}}')
>>> answer.status, answer.headers["content-type"]
(415, 'application/json')
>>> print(http_error(answer.status, answer.body))
HTTP 415 unsupported_media_type: not JSON (param Content-Type)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

from ._errors import error_class

__all__ = ["HttpAnswer", "HttpErrorAnswer", "parse_http_answer", "error_envelope", "http_error", "answer_body"]


class HttpErrorAnswer(Exception):
    """The input is a server's error answer; ``str()`` is the line to show."""

_STATUS_LINE = re.compile(rb"HTTP/\d(?:\.\d)? (\d{3})(?: [^\r\n]*)?\r?\n")
_BLANK = re.compile(rb"\r?\n\r?\n")


@dataclass
class HttpAnswer:
    status: int | None  # None: the input was a body alone
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    body: bytes = b""


def parse_http_answer(data: bytes) -> HttpAnswer:
    """Status, headers and body when ``data`` starts with an HTTP status line (the last one wins:
    ``curl -i`` also prints interim ``100 Continue`` answers and those of redirects); else the body."""
    if not data.startswith(b"HTTP/"):
        return HttpAnswer(None, {}, data)
    status: int | None = None
    headers: dict[str, str] = {}
    rest = data
    while True:
        m = _STATUS_LINE.match(rest)
        if m is None:
            break
        end = _BLANK.search(rest, m.end() - 2)
        head, rest = (rest, b"") if end is None else (rest[:end.start()], rest[end.end():])
        status, headers = int(m.group(1)), {}
        for line in head[m.end():].splitlines():
            name, colon, value = line.decode("latin-1").partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
    return HttpAnswer(status, headers, rest)


def error_envelope(body: bytes) -> dict | None:
    """The ``error`` object of an OpenAI error envelope, or None when ``body`` is not one."""
    text = body.strip()
    if not text.startswith(b"{") or b'"error"' not in text[:4096]:
        return None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict) and ("message" in err or "code" in err):
        return err
    if isinstance(err, str):  # some servers answer {"error": "message"}
        return {"message": err}
    return None


def http_error(status: int | None, body: bytes) -> str | None:
    """One line for an error answer (``HTTP 415 unsupported_media_type: message (param X)``), or None
    when it is not one. Without a status line the status is the one SPEC.md 11 gives the code."""
    err = error_envelope(body)
    if err is None and (status is None or status < 400):
        return None
    if err is None:
        text = body.decode("utf-8", "replace").strip()
        return f"HTTP {status}: {text[:500] or '(empty body)'}"
    code = err.get("code") or err.get("type") or "error"
    if status is None:
        cls = error_class(str(code))
        status = cls.http_status if cls.category == code else None
    where = [f"param {err['param']}"] if err.get("param") else []
    if err.get("offset") is not None:
        where.append(f"offset {err['offset']}")
    line = f"HTTP {status} {code}" if status is not None else f"error {code}"
    return f"{line}: {err.get('message', '')}" + (f" ({', '.join(where)})" if where else "")


def answer_body(data: bytes) -> tuple[bytes, dict[str, str]]:
    """The body of ``data`` and its headers (lower-case names; none for a bare body), or
    :class:`HttpErrorAnswer` when it is an error answer."""
    answer = parse_http_answer(data)
    problem = http_error(answer.status, answer.body)
    if problem is not None:
        raise HttpErrorAnswer(problem)
    return answer.body, answer.headers
