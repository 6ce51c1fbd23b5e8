package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/** The seven table body formats of SPEC.md section 15.9, in the server's order of preference at equal quality. */
public enum TableFormat {
    /** {@code application/json}: an array of one object a row (section 15.3); types from {@code Densewire-Columns}. */
    JSON("json", "application/json"),
    /** {@code application/vnd.densewire.rows+json}. */
    JSON_ROWS("json-rows", "application/vnd.densewire.rows+json"),
    /** {@code application/vnd.densewire.columns+json}. */
    JSON_COLUMNS("json-columns", "application/vnd.densewire.columns+json"),
    /** {@code text/csv} (section 15.4); types from {@code Densewire-Columns}. */
    CSV("csv", "text/csv"),
    /** Columnar MessagePack (section 15.5). */
    MSGPACK("msgpack", "application/vnd.msgpack", "application/msgpack", "application/x-msgpack"),
    /** {@code densewire.v1.Table} (section 15.6). */
    PROTOBUF("protobuf", "application/protobuf", "application/x-protobuf"),
    /** Arrow IPC stream (section 15.7), in densewire-arrow. */
    ARROW("arrow", "application/vnd.apache.arrow.stream");

    private final String paramName;
    private final List<String> mediaTypes;

    TableFormat(String paramName, String... mediaTypes) {
        this.paramName = paramName;
        this.mediaTypes = List.of(mediaTypes);
    }

    /** The value of the {@code format} query parameter: json, json-rows, json-columns, csv, msgpack, protobuf, arrow. */
    public String paramName() {
        return paramName;
    }

    /** The canonical media type. */
    public String mediaType() {
        return mediaTypes.get(0);
    }

    /** Whether a decoder needs the columns from outside the body (JSON objects and CSV carry no types). */
    public boolean needsSchema() {
        return this == JSON || this == CSV;
    }

    /** The format of a {@code Content-Type} value (parameters ignored, aliases accepted). */
    public static Optional<TableFormat> fromContentType(String contentType) {
        if (contentType == null) {
            return Optional.empty();
        }
        int semi = contentType.indexOf(';');
        String mt = (semi < 0 ? contentType : contentType.substring(0, semi)).trim().toLowerCase(Locale.ROOT);
        for (TableFormat f : values()) {
            if (f.mediaTypes.contains(mt)) {
                return Optional.of(f);
            }
        }
        return Optional.empty();
    }

    /** The format of a {@code format} query parameter value; {@code invalid_field} on {@code format} otherwise. */
    public static TableFormat fromParamName(String name) {
        for (TableFormat f : values()) {
            if (f.paramName.equals(name)) {
                return f;
            }
        }
        throw new DensewireException(Category.INVALID_FIELD, "unknown table format " + Tables.quote(name)
                + " (want json, json-rows, json-columns, csv, msgpack, protobuf or arrow)", -1, "format");
    }

    @Override
    public String toString() {
        return paramName;
    }
}
