"""The OpenAPI part of the tables routes (routes.py, SPEC.md 15.9); openapi.py assembles the document."""

from __future__ import annotations

from typing import Any

from densewire import TABLE_FORMATS, TABLE_MEDIA_TYPES
from densewire._tables import TABLE_MEDIA_TYPE_ALIASES

from ..openapi_parts import BINARY, error_response

__all__ = ["table_paths"]


def table_paths(tables: list[str], security: list[Any], auth_errors: dict[str, Any]) -> dict[str, Any]:
    str_schema = {"schema": {"type": "string"}}
    headers = {
        "Vary": {"description": "always 'Accept, Accept-Encoding'", "schema": {"type": "string"}},
        "ETag": {"description": "strong; differs per format and content coding", "schema": {"type": "string"}},
        "Last-Modified": {"description": "when this version of the data was loaded", **str_schema},
        "Cache-Control": {"description": "server configuration (default no-cache)", **str_schema},
        "Densewire-Version": {"description": "1", **str_schema},
        "Densewire-Table": {"description": "the table name", **str_schema},
        "Densewire-Rows": {"description": "n in decimal", **str_schema},
        "Densewire-Columns": {"description": "name=type,... (SPEC.md 15.2)", **str_schema},
    }
    value = {"description": "a cell: boolean, integer, number, string (text, uuid) or array of numbers"}
    content: dict[str, Any] = {
        "application/json": {"schema": {"type": "array", "items": {"type": "object", "additionalProperties": value}}},
        TABLE_MEDIA_TYPES["json-rows"]: {"schema": {"type": "object", "required": ["name", "columns", "rows"]}},
        TABLE_MEDIA_TYPES["json-columns"]: {"schema": {"type": "object", "required": ["name", "rows", "columns"]}},
        "text/csv": str_schema,
    }
    for fmt in ("msgpack", "protobuf", "arrow"):
        content[TABLE_MEDIA_TYPES[fmt]] = BINARY
    for alias in TABLE_MEDIA_TYPE_ALIASES:
        content[alias] = BINARY
    column = {"type": "object", "required": ["name", "type"],
              "properties": {"name": {"type": "string"}, "type": {"type": "string"}}}
    table_card = {
        "type": "object",
        "required": ["object", "name", "rows", "columns", "version", "refreshed_at", "formats", "status"],
        "properties": {
            "object": {"type": "string", "enum": ["table"]},
            "name": {"type": "string"},
            "rows": {"type": "integer", "minimum": 0, "nullable": True},
            "columns": {"type": "array", "items": column, "nullable": True},
            "version": {"type": "string", "nullable": True,
                        "description": "opaque; changes when the data does"},
            "refreshed_at": {"type": "string", "format": "date-time", "nullable": True,
                             "description": "the last successful load"},
            "formats": {"type": "array", "items": {"type": "string", "enum": list(TABLE_FORMATS)}},
            "status": {"type": "string", "enum": ["loading", "warming", "ready", "stale", "failed"]},
            "refresh_error": {"type": "string", "nullable": True,
                              "description": "why the last load failed (the last good version is served)"},
        },
    }
    name_param = {"name": "name", "in": "path", "required": True,
                  "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
                  **({"example": tables[0]} if tables else {})}
    return {
        "/v1/tables": {"get": {
            "operationId": "listTables",
            "security": security,
            "responses": {
                "200": {"description": "the served tables", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["object", "data"],
                    "properties": {"object": {"type": "string", "enum": ["list"]},
                                   "data": {"type": "array", "items": table_card}}}}}},
                **auth_errors,
            },
        }},
        "/v1/tables/{name}": {"get": {
            "operationId": "getTable",
            "description": "The table in the format that Accept or ?format= asks for (SPEC.md 15.9), from "
                           "bodies serialized and compressed before the request; 304 on If-None-Match.",
            "security": security,
            "parameters": [
                name_param,
                {"name": "format", "in": "query", "required": False, "description": "overrides Accept",
                 "schema": {"type": "string", "enum": list(TABLE_FORMATS)}},
            ],
            "responses": {
                "200": {"description": "the table", "headers": headers, "content": content},
                "304": {"description": "not modified (If-None-Match named the current ETag, or *)",
                        "headers": {"ETag": headers["ETag"], "Vary": headers["Vary"]}},
                **auth_errors,
                "404": error_response("unknown table"),
                "406": error_response("no acceptable media type (the message lists the table media types)"),
                "422": error_response("the data cannot be written in this format (JSON and NaN)"),
                "503": error_response("the table is still loading or its first load failed (Retry-After)"),
            },
        }},
        "/demo/": {"get": {
            "operationId": "demoPage",
            "security": [],
            "responses": {
                "200": {"description": "the demo page", "content": {"text/html": str_schema}},
                "404": error_response("the demo page is not built"),
            },
        }},
    }
