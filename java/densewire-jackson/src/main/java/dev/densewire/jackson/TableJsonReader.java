package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.util.TokenBuffer;
import dev.densewire.Column;
import dev.densewire.ColumnBuilder;
import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads the three JSON layouts of SPEC.md section 15.3 from a Jackson parser, each value straight into its
 * column's buffer ({@link ColumnBuilder}). Errors: a value of the wrong kind or out of range is
 * {@code invalid_field} on its path ({@code rows[3][1]}, {@code columns[2].values[5]}, {@code [3].status}); the
 * layouts' shape errors as the spec gives them. Syntax errors surface as Jackson exceptions for the caller to
 * translate ({@code malformed}).
 */
final class TableJsonReader {
    private final JsonParser p;

    TableJsonReader(JsonParser p) {
        this.p = p;
    }

    private long offset() {
        var loc = p.currentTokenLocation();
        return loc.getCharOffset() >= 0 ? loc.getCharOffset() : loc.getByteOffset();
    }

    private DensewireException fail(Category c, String field, String detail) {
        return new DensewireException(c, detail, offset(), field);
    }

    private String tokenText() throws IOException {
        JsonToken t = p.currentToken();
        String s = t == JsonToken.START_ARRAY ? "an array" : t == JsonToken.START_OBJECT ? "an object"
                : t == JsonToken.VALUE_STRING ? "\"" + p.getText() + "\"" : p.getText();
        return s.length() > 40 ? s.substring(0, 37) + "..." : s;
    }

    private DensewireException wrongKind(String field, String want) throws IOException {
        return fail(Category.INVALID_FIELD, field, tokenText() + " is not " + want);
    }

    // ------------------------------------------------------------------ values

    /** Reads the value at the current token into {@code b}; {@code field} names it. */
    void value(ColumnBuilder b, String field) throws IOException {
        JsonToken t = p.currentToken();
        ColumnSpec spec = b.spec();
        switch (spec.type()) {
            case BOOL:
                if (t != JsonToken.VALUE_TRUE && t != JsonToken.VALUE_FALSE) {
                    throw wrongKind(field, "a bool");
                }
                b.putBool(t == JsonToken.VALUE_TRUE);
                break;
            case INT32:
            case INT64: {
                String what = spec.type() == ColumnType.INT32 ? "an int32" : "an int64";
                if (t != JsonToken.VALUE_NUMBER_INT) {
                    throw wrongKind(field, what);
                }
                String text = p.getText();
                long v;
                try {
                    v = text.length() > 20 ? Long.MAX_VALUE : Long.parseLong(text);
                    if (text.length() > 20 || spec.type() == ColumnType.INT32 && (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE)) {
                        throw new NumberFormatException();
                    }
                } catch (NumberFormatException e) {
                    throw wrongKind(field, what + " (out of range)");
                }
                if (spec.type() == ColumnType.INT32) {
                    b.putInt32((int) v);
                } else {
                    b.putInt64(v);
                }
                break;
            }
            case FLOAT32:
                b.putFloat32(float32(field));
                break;
            case FLOAT64: {
                if (t != JsonToken.VALUE_NUMBER_INT && t != JsonToken.VALUE_NUMBER_FLOAT) {
                    throw wrongKind(field, "a number");
                }
                double v = Double.parseDouble(p.getText());
                if (Double.isInfinite(v)) { // JSON has no infinities (SPEC.md 15.3)
                    throw wrongKind(field, "a number within the float64 range");
                }
                b.putFloat64(v);
                break;
            }
            case STRING:
                if (t != JsonToken.VALUE_STRING) {
                    throw wrongKind(field, "a string");
                }
                b.putString(p.getText());
                break;
            case UUID:
                if (t != JsonToken.VALUE_STRING || !b.putUuid(p.getText())) {
                    throw wrongKind(field, "a uuid (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
                }
                break;
            default: { // float32[d]
                if (t != JsonToken.START_ARRAY) {
                    throw wrongKind(field, "an array of " + spec.dimensions() + " numbers");
                }
                int d = spec.dimensions();
                int j = 0;
                while (p.nextToken() != JsonToken.END_ARRAY) {
                    if (j == d) {
                        throw fail(Category.SHAPE_MISMATCH, field, "a " + spec.typeName() + " value has more than " + d + " items");
                    }
                    b.putFloat32(float32(field + "[" + j + "]"));
                    j++;
                }
                if (j != d) {
                    throw fail(Category.SHAPE_MISMATCH, field, "a " + spec.typeName() + " value has " + j + " items");
                }
            }
        }
    }

    private float float32(String field) throws IOException {
        JsonToken t = p.currentToken();
        if (t != JsonToken.VALUE_NUMBER_INT && t != JsonToken.VALUE_NUMBER_FLOAT) {
            throw wrongKind(field, "a number");
        }
        float v = Float.parseFloat(p.getText()); // rounded once, from the decimal (SPEC.md 3.5)
        if (Float.isInfinite(v)) {
            throw wrongKind(field, "a number within the float32 range (largest finite 3.4028235e38)");
        }
        return v;
    }

    // ------------------------------------------------------------------ objects layout

    /** An array of one object a row, keys the column names; the parser is at its start. */
    Table objects(String name, List<ColumnSpec> columns) throws IOException {
        if (p.currentToken() != JsonToken.START_ARRAY) {
            throw fail(Category.MALFORMED, null, "a JSON objects table is an array of objects, one a row");
        }
        Map<String, Integer> index = new HashMap<>();
        ColumnBuilder[] cols = new ColumnBuilder[columns.size()];
        for (int j = 0; j < cols.length; j++) {
            index.put(columns.get(j).name(), j);
            cols[j] = new ColumnBuilder(columns.get(j), 1024);
        }
        int[] seen = new int[cols.length]; // the row + 1 at which each key was last seen
        int row = 0;
        while (p.nextToken() != JsonToken.END_ARRAY) {
            if (p.currentToken() != JsonToken.START_OBJECT) {
                throw fail(Category.INVALID_FIELD, "[" + row + "]", "is not an object");
            }
            int next = 0;
            for (String key = p.nextFieldName(); key != null; key = p.nextFieldName()) {
                int j = next < cols.length && columns.get(next).name().equals(key) ? next : index.getOrDefault(key, -1);
                String field = "[" + row + "]." + key;
                p.nextToken();
                if (j < 0) {
                    throw fail(Category.INVALID_FIELD, field, "is not a column of the table");
                }
                if (seen[j] == row + 1) {
                    throw fail(Category.INVALID_FIELD, field, "appears twice");
                }
                seen[j] = row + 1;
                next = j + 1;
                value(cols[j], field);
            }
            for (int j = 0; j < cols.length; j++) {
                if (seen[j] != row + 1) {
                    throw fail(Category.INVALID_FIELD, "[" + row + "]." + columns.get(j).name(), "is missing");
                }
            }
            row++;
        }
        return build(name, row, cols);
    }

    private static Table build(String name, int rows, ColumnBuilder[] cols) {
        List<Column> out = new ArrayList<>(cols.length);
        for (ColumnBuilder b : cols) {
            out.add(b.build());
        }
        return new Table(name, rows, out);
    }

    // ------------------------------------------------------------------ rows and columns layouts

    /**
     * {@code {"name", "columns": [{"name", "type"}...], "rows": [[...]...]}} or {@code {"name", "rows": n,
     * "columns": [{"name", "type", "values"}...]}}; the parser is at its start. {@code layout} null takes
     * whichever the text is (by {@code rows}: an array or a number).
     */
    Table described(TableFormat layout) throws IOException {
        if (p.currentToken() != JsonToken.START_OBJECT) {
            throw fail(Category.MALFORMED, null, "a " + (layout == null ? "JSON" : layout.paramName()) + " table is a JSON object");
        }
        String name = "";
        Long rowCount = null;
        boolean rowsArray = false;
        TokenBuffer pendingRows = null;
        int rows = -1;
        List<ColumnSpec> specs = null;
        ColumnBuilder[] cols = null;
        boolean[] hasValues = null;
        int[] valueCounts = null;
        for (String key = p.nextFieldName(); key != null; key = p.nextFieldName()) {
            JsonToken t = p.nextToken();
            switch (key) {
                case "name":
                    if (t != JsonToken.VALUE_STRING) {
                        throw wrongKind("name", "a string");
                    }
                    name = p.getText();
                    break;
                case "rows":
                    if (t == JsonToken.VALUE_NUMBER_INT && layout != TableFormat.JSON_ROWS) {
                        if (p.getNumberType() != JsonParser.NumberType.INT && p.getNumberType() != JsonParser.NumberType.LONG
                                || p.getLongValue() < 0 || p.getLongValue() > Integer.MAX_VALUE - 8) {
                            throw wrongKind("rows", "a row count");
                        }
                        rowCount = p.getLongValue();
                    } else if (t == JsonToken.START_ARRAY && layout != TableFormat.JSON_COLUMNS) {
                        rowsArray = true;
                        if (specs == null) {
                            pendingRows = TokenBuffer.asCopyOfValue(p);
                        } else {
                            cols = builders(specs);
                            rows = rowsArray(cols);
                        }
                    } else {
                        throw wrongKind("rows", layout == TableFormat.JSON_ROWS ? "an array of rows"
                                : layout == TableFormat.JSON_COLUMNS ? "a row count" : "a row count or an array of rows");
                    }
                    break;
                case "columns": {
                    if (t != JsonToken.START_ARRAY) {
                        throw wrongKind("columns", "an array");
                    }
                    specs = new ArrayList<>();
                    List<ColumnBuilder> built = new ArrayList<>();
                    List<Boolean> valued = new ArrayList<>();
                    List<Integer> counts = new ArrayList<>();
                    Set<String> seen = new HashSet<>();
                    boolean values = layout == TableFormat.JSON_COLUMNS || layout == null && !rowsArray;
                    for (int i = 0; p.nextToken() != JsonToken.END_ARRAY; i++) {
                        ColumnBuilder[] holder = new ColumnBuilder[1];
                        int[] count = {-1};
                        specs.add(columnEntry(i, seen, values, holder, count));
                        built.add(holder[0]);
                        valued.add(count[0] >= 0);
                        counts.add(count[0]);
                    }
                    if (values) {
                        cols = built.toArray(new ColumnBuilder[0]);
                        hasValues = new boolean[cols.length];
                        valueCounts = new int[cols.length];
                        for (int i = 0; i < cols.length; i++) {
                            hasValues[i] = valued.get(i);
                            valueCounts[i] = counts.get(i);
                        }
                    }
                    break;
                }
                default:
                    p.skipChildren(); // unknown top-level keys are ignored
            }
        }
        if (specs == null) {
            throw fail(Category.INVALID_FIELD, "columns", "missing key columns");
        }
        if (rowsArray) {
            if (pendingRows != null) {
                cols = builders(specs);
                try (JsonParser replay = pendingRows.asParser(p.getCodec())) {
                    replay.nextToken();
                    rows = new TableJsonReader(replay).rowsArray(cols);
                }
            }
            return build(name, rows, cols);
        }
        if (rowCount == null) {
            throw fail(Category.INVALID_FIELD, "rows", "missing key rows");
        }
        rows = (int) (long) rowCount;
        for (int i = 0; i < cols.length; i++) {
            String field = "columns[" + i + "].values";
            if (!hasValues[i]) {
                throw fail(Category.INVALID_FIELD, field, "missing key " + field);
            }
            if (valueCounts[i] != rows) {
                throw fail(Category.SHAPE_MISMATCH, field, "has " + valueCounts[i] + " values for " + rows + " rows");
            }
        }
        return build(name, rows, cols);
    }

    private static ColumnBuilder[] builders(List<ColumnSpec> specs) {
        ColumnBuilder[] cols = new ColumnBuilder[specs.size()];
        for (int j = 0; j < cols.length; j++) {
            cols[j] = new ColumnBuilder(specs.get(j), 1024);
        }
        return cols;
    }

    /** The rows array (the parser at its start): one array a row, values in column order. */
    private int rowsArray(ColumnBuilder[] cols) throws IOException {
        int row = 0;
        while (p.nextToken() != JsonToken.END_ARRAY) {
            String field = "rows[" + row + "]";
            if (p.currentToken() != JsonToken.START_ARRAY) {
                throw wrongKind(field, "an array");
            }
            int j = 0;
            while (p.nextToken() != JsonToken.END_ARRAY) {
                if (j == cols.length) {
                    throw fail(Category.SHAPE_MISMATCH, field, "has more than " + cols.length + " values, one for each column");
                }
                value(cols[j], field + "[" + j + "]");
                j++;
            }
            if (j != cols.length) {
                throw fail(Category.SHAPE_MISMATCH, field, "has " + j + " values for " + cols.length + " columns");
            }
            row++;
        }
        return row;
    }

    /**
     * One entry of {@code columns} (the parser at its start): its spec; with {@code values}, its values go into
     * {@code holder[0]} and their count into {@code count[0]} (-1 when the entry has none).
     */
    private ColumnSpec columnEntry(int i, Set<String> seen, boolean values, ColumnBuilder[] holder, int[] count)
            throws IOException {
        String field = "columns[" + i + "]";
        if (p.currentToken() != JsonToken.START_OBJECT) {
            throw wrongKind(field, "an object");
        }
        String name = null;
        String type = null;
        long typeAt = -1;
        TokenBuffer pending = null;
        ColumnSpec spec = null;
        for (String key = p.nextFieldName(); key != null; key = p.nextFieldName()) {
            JsonToken t = p.nextToken();
            if (key.equals("name") || key.equals("type")) {
                if (t != JsonToken.VALUE_STRING) {
                    throw wrongKind(field + "." + key, "a string");
                }
                if (key.equals("name")) {
                    name = p.getText();
                } else {
                    type = p.getText();
                    typeAt = offset();
                }
            } else if (key.equals("values") && values) {
                if (t != JsonToken.START_ARRAY) {
                    throw wrongKind(field + ".values", "an array");
                }
                if (name != null && type != null) {
                    spec = spec(field, name, type, typeAt, seen);
                    holder[0] = new ColumnBuilder(spec, 1024);
                    count[0] = valuesArray(holder[0], field);
                } else {
                    pending = TokenBuffer.asCopyOfValue(p);
                }
            } else {
                p.skipChildren();
            }
        }
        if (name == null) {
            throw fail(Category.INVALID_FIELD, field + ".name", "missing key " + field + ".name");
        }
        if (type == null) {
            throw fail(Category.INVALID_FIELD, field + ".type", "missing key " + field + ".type");
        }
        if (spec == null) {
            spec = spec(field, name, type, typeAt, seen);
            holder[0] = new ColumnBuilder(spec, 1024);
            if (pending != null) {
                try (JsonParser replay = pending.asParser(p.getCodec())) {
                    replay.nextToken();
                    count[0] = new TableJsonReader(replay).valuesArray(holder[0], field);
                }
            }
        }
        return spec;
    }

    private static ColumnSpec spec(String field, String name, String type, long typeAt, Set<String> seen) {
        if (name.isEmpty() || !seen.add(name)) {
            throw new DensewireException(Category.INVALID_FIELD, name.isEmpty() ? "is not a non-empty string"
                    : "column \"" + name + "\" appears twice", -1, field + ".name");
        }
        try {
            return ColumnSpec.parse(name, type);
        } catch (DensewireException e) {
            throw new DensewireException(e.category(), e.detail(), typeAt, field + ".type");
        }
    }

    private int valuesArray(ColumnBuilder b, String field) throws IOException {
        int row = 0;
        while (p.nextToken() != JsonToken.END_ARRAY) {
            value(b, field + ".values[" + row + "]");
            row++;
        }
        return row;
    }
}
