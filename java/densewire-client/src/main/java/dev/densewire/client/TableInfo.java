package dev.densewire.client;

import dev.densewire.ColumnSpec;
import java.time.OffsetDateTime;
import java.util.List;

/**
 * One table of {@code GET /v1/tables} (SPEC.md section 15.9).
 *
 * @param name        the table name
 * @param rows        its row count
 * @param columns     its columns' names and types
 * @param version     an opaque string that changes when the data does
 * @param refreshedAt when the server last loaded it (null when it sent none)
 * @param formats     the format names it is served in (json, json-rows, ..., arrow)
 */
public record TableInfo(String name, long rows, List<ColumnSpec> columns, String version, OffsetDateTime refreshedAt,
        List<String> formats) {
    public TableInfo {
        columns = List.copyOf(columns);
        formats = List.copyOf(formats);
    }
}
