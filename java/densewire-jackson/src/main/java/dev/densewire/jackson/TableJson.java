package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import dev.densewire.Column;
import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.JsonEnvelope;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import dev.densewire.TableSchema;
import dev.densewire.Tables;
import java.io.CharConversionException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The three JSON layouts of tables (SPEC.md section 15.3) with Jackson's streaming parser: objects
 * ({@code application/json}, an array of one object a row, typed by {@code Densewire-Columns}), rows
 * ({@code application/vnd.densewire.rows+json}) and columns ({@code application/vnd.densewire.columns+json}).
 * Decoding checks the whole text first (every syntax error, {@code NaN} and {@code Infinity} included, is
 * {@code malformed} at its offset), then reads each value straight into its column's buffer.
 *
 * <pre>{@code
 * Table t = TableJson.decode(TableFormat.JSON_COLUMNS, body, null);
 * byte[] rows = TableJson.encode(t, TableFormat.JSON_ROWS);
 * }</pre>
 */
public final class TableJson {
    private static final JsonFactory FACTORY = DensewireJson.mapper().getFactory();

    private TableJson() {
    }

    // ------------------------------------------------------------------ decoding

    /**
     * Decodes a body of one of the JSON layouts. The objects layout takes its columns and name from
     * {@code schema} (the other layouts ignore it: pass null).
     *
     * @throws DensewireException invalid JSON: {@code malformed} at its offset; a value of the wrong kind or out
     *                            of range: {@code invalid_field} on its path; a missing or unknown key of a row
     *                            object: {@code invalid_field} on {@code [ROW].KEY}; a row of the wrong length:
     *                            {@code shape_mismatch} on {@code rows[ROW]}; a {@code values} array whose length
     *                            is not {@code rows}: {@code shape_mismatch} on {@code columns[COL].values}; an
     *                            unknown type: {@code unknown_dtype} on {@code columns[COL].type}
     */
    public static Table decode(TableFormat layout, byte[] body, TableSchema schema) {
        switch (layout) {
            case JSON:
                if (schema == null) {
                    throw new IllegalArgumentException("the JSON objects layout needs the columns (Densewire-Columns)");
                }
                return decodeObjects(body, schema.name(), schema.columns());
            case JSON_ROWS:
            case JSON_COLUMNS:
                return parse(body, p -> new TableJsonReader(p).described(layout));
            default:
                throw new IllegalArgumentException(layout + " is not a JSON layout");
        }
    }

    /** The objects layout, whose columns (names and types) come from the caller. */
    public static Table decodeObjects(byte[] body, String name, List<ColumnSpec> columns) {
        return parse(body, p -> new TableJsonReader(p).objects(name, columns));
    }

    /** The rows layout. */
    public static Table decodeRows(byte[] body) {
        return decode(TableFormat.JSON_ROWS, body, null);
    }

    /** The columns layout. */
    public static Table decodeColumns(byte[] body) {
        return decode(TableFormat.JSON_COLUMNS, body, null);
    }

    private interface Read {
        Table read(JsonParser p) throws IOException;
    }

    private static Table parse(byte[] body, Read read) {
        DensewireJson.requireUtf8(body);
        try {
            try (JsonParser check = FACTORY.createParser(body)) { // every syntax error first, wherever it is
                if (check.nextToken() == null) {
                    throw new DensewireException(Category.MALFORMED, "an empty body is no JSON value", 0, null);
                }
                check.skipChildren();
                if (check.nextToken() != null) {
                    throw new DensewireException(Category.MALFORMED, "data after the JSON value",
                            check.currentTokenLocation().getByteOffset(), null);
                }
            }
            try (JsonParser p = FACTORY.createParser(body)) {
                p.nextToken();
                return read.read(p);
            }
        } catch (JsonProcessingException e) {
            throw DensewireJson.translate(e);
        } catch (CharConversionException e) {
            throw new DensewireException(Category.MALFORMED, "the JSON text is not UTF-8: " + e.getMessage(), -1, null, e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    // ------------------------------------------------------------------ encoding

    /**
     * The table in a JSON layout: compact, keys in spec order, floats as the shortest decimal that reads back to
     * the same bits, uuids in canonical lowercase text.
     *
     * @throws DensewireException {@code non_finite} on {@code COLUMN[ROW]} for a NaN or infinite value (JSON has no
     *                            form for it: use CSV or a binary format)
     */
    public static byte[] encode(Table t, TableFormat layout) {
        t.validate();
        List<Column> cols = t.columns();
        StringBuilder sb = new StringBuilder(64 + 16 * t.rows() * Math.max(1, cols.size()));
        switch (layout) {
            case JSON:
                sb.append('[');
                for (int r = 0; r < t.rows(); r++) {
                    sb.append(r == 0 ? "{" : ",{");
                    for (int j = 0; j < cols.size(); j++) {
                        if (j > 0) {
                            sb.append(',');
                        }
                        JsonEnvelope.appendString(sb, cols.get(j).name());
                        sb.append(':');
                        value(sb, cols.get(j), r);
                    }
                    sb.append('}');
                }
                sb.append(']');
                break;
            case JSON_ROWS:
                sb.append("{\"name\":");
                JsonEnvelope.appendString(sb, t.name());
                sb.append(",\"columns\":[");
                for (int j = 0; j < cols.size(); j++) {
                    sb.append(j == 0 ? "" : ",");
                    spec(sb, cols.get(j));
                    sb.append('}');
                }
                sb.append("],\"rows\":[");
                for (int r = 0; r < t.rows(); r++) {
                    sb.append(r == 0 ? "[" : ",[");
                    for (int j = 0; j < cols.size(); j++) {
                        if (j > 0) {
                            sb.append(',');
                        }
                        value(sb, cols.get(j), r);
                    }
                    sb.append(']');
                }
                sb.append("]}");
                break;
            case JSON_COLUMNS:
                sb.append("{\"name\":");
                JsonEnvelope.appendString(sb, t.name());
                sb.append(",\"rows\":").append(t.rows()).append(",\"columns\":[");
                for (int j = 0; j < cols.size(); j++) {
                    sb.append(j == 0 ? "" : ",");
                    spec(sb, cols.get(j));
                    sb.append(",\"values\":[");
                    for (int r = 0; r < t.rows(); r++) {
                        if (r > 0) {
                            sb.append(',');
                        }
                        value(sb, cols.get(j), r);
                    }
                    sb.append("]}");
                }
                sb.append("]}");
                break;
            default:
                throw new IllegalArgumentException(layout + " is not a JSON layout");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static void spec(StringBuilder sb, Column c) {
        sb.append("{\"name\":");
        JsonEnvelope.appendString(sb, c.name());
        sb.append(",\"type\":\"").append(c.spec().typeName()).append('"');
    }

    private static void value(StringBuilder sb, Column c, int r) {
        ColumnType type = c.type();
        if (type == ColumnType.STRING) {
            JsonEnvelope.appendString(sb, c.strings().get(r));
            return;
        }
        ByteBuffer d = c.data();
        switch (type) {
            case BOOL:
                sb.append(d.get(r) != 0);
                break;
            case INT32:
                sb.append(d.getInt(4 * r));
                break;
            case INT64:
                sb.append(d.getLong(8 * r));
                break;
            case FLOAT32:
                sb.append(Float.toString(finite(d.getFloat(4 * r), c, r)));
                break;
            case FLOAT64: {
                double v = d.getDouble(8 * r);
                if (Double.isNaN(v) || Double.isInfinite(v)) {
                    throw nonFinite(c, r, v);
                }
                sb.append(v);
                break;
            }
            case UUID: {
                byte[] u = new byte[16];
                d.get(16 * r, u);
                sb.append('"').append(Tables.formatUuid(u, 0)).append('"');
                break;
            }
            default: {
                int dims = c.dimensions();
                sb.append('[');
                for (int k = 0; k < dims; k++) {
                    if (k > 0) {
                        sb.append(',');
                    }
                    sb.append(Float.toString(finite(d.getFloat(4 * (dims * r + k)), c, r)));
                }
                sb.append(']');
            }
        }
    }

    private static float finite(float v, Column c, int r) {
        if (Float.isNaN(v) || Float.isInfinite(v)) {
            throw nonFinite(c, r, v);
        }
        return v;
    }

    private static DensewireException nonFinite(Column c, int r, double v) {
        return new DensewireException(Category.NON_FINITE, v + " has no JSON number form; use CSV or a binary format", -1,
                c.name() + "[" + r + "]");
    }
}
