package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.util.List;
import java.util.function.Function;

/**
 * What the headers of a table response say about it (SPEC.md section 15.2): the JSON objects and CSV decoders
 * take its columns (and name); the other formats carry their own.
 *
 * @param name    {@code Densewire-Table} ("" when absent)
 * @param rows    {@code Densewire-Rows}, -1 when absent
 * @param columns {@code Densewire-Columns}
 */
public record TableSchema(String name, long rows, List<ColumnSpec> columns) {
    public TableSchema {
        columns = List.copyOf(columns);
    }

    /**
     * Reads {@code Densewire-Table}, {@code Densewire-Rows} and {@code Densewire-Columns} through {@code header}
     * (a header name to its value, null when absent).
     *
     * @throws DensewireException {@code invalid_field} on {@code Densewire-Columns} (missing or malformed) or
     *                            {@code Densewire-Rows} (not a row count); {@code unknown_dtype} on
     *                            {@code Densewire-Columns} for an unknown type
     */
    public static TableSchema fromHeaders(Function<String, String> header) {
        String name = header.apply(Tables.HEADER_TABLE);
        String rowsValue = header.apply(Tables.HEADER_ROWS);
        long rows = -1;
        if (rowsValue != null) {
            String v = rowsValue.trim();
            if (v.isEmpty() || v.length() > 18 || !v.chars().allMatch(c -> c >= '0' && c <= '9')) {
                throw new DensewireException(Category.INVALID_FIELD, Tables.quote(rowsValue) + " is not a row count", -1,
                        Tables.HEADER_ROWS);
            }
            rows = Long.parseLong(v);
        }
        String columns = header.apply(Tables.HEADER_COLUMNS);
        if (columns == null) {
            throw new DensewireException(Category.INVALID_FIELD, "missing header", -1, Tables.HEADER_COLUMNS);
        }
        return new TableSchema(name == null ? "" : name, rows, Tables.parseColumnsHeader(columns.trim()));
    }
}
