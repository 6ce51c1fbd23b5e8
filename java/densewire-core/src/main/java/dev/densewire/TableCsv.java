package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * CSV tables (SPEC.md section 15.4): RFC 4180, a header line of the column names, CRLF after every line (LF also
 * read), fields quoted when needed with {@code ""} for a quote; non-finite floats as {@code NaN},
 * {@code Infinity}, {@code -Infinity}; vectors in pgvector's {@code [v1,v2,...]} text form. CSV carries no
 * types: the decoder takes the columns from the caller, usually from {@code Densewire-Columns}
 * ({@link TableSchema#fromHeaders}). A leading byte order mark is dropped.
 */
public final class TableCsv {
    public static final String MEDIA_TYPE = "text/csv; charset=utf-8; header=present";

    private TableCsv() {
    }

    // ------------------------------------------------------------------ decoding

    /**
     * Decodes a CSV table of the given columns.
     *
     * @throws DensewireException a header line other than the column names in order: {@code shape_mismatch} on
     *                            {@code header}; a line with another number of fields: {@code shape_mismatch} on
     *                            {@code line L} (the header is line 1, L counts records); a field that does not
     *                            parse as its type: {@code invalid_field} on {@code line L, COLUMN}; an unterminated
     *                            quoted field: {@code truncated} at the body's length; a quote inside an unquoted
     *                            field or a character after a closing quote, text that is not UTF-8:
     *                            {@code malformed} at its offset
     */
    public static Table decode(byte[] body, String name, List<ColumnSpec> columns) {
        Scanner s = new Scanner(body);
        if (body.length >= 3 && (body[0] & 0xFF) == 0xEF && (body[1] & 0xFF) == 0xBB && (body[2] & 0xFF) == 0xBF) {
            s.pos = 3;
        }
        List<String> header = s.record(columns.isEmpty());
        if (header == null) {
            header = List.of();
        }
        boolean same = header.size() == columns.size();
        for (int j = 0; same && j < columns.size(); j++) {
            same = header.get(j).equals(columns.get(j).name());
        }
        if (!same) {
            throw new DensewireException(Category.SHAPE_MISMATCH, "the header line names " + Tables.quote(String.join(",", header))
                    + ", the table's columns are " + Tables.quote(Tables.formatColumnsHeader(columns)), 0, "header");
        }
        int lines = 1;
        for (int i = s.pos; i < body.length; i++) {
            if (body[i] == '\n') {
                lines++;
            }
        }
        Builder[] cols = new Builder[columns.size()];
        for (int j = 0; j < cols.length; j++) {
            cols[j] = new Builder(columns.get(j), Math.min(lines, body.length));
        }
        int row = 0;
        while (true) {
            int line = row + 2;
            int lineStart = s.pos;
            List<String> fields = s.record(columns.isEmpty());
            if (fields == null) {
                break;
            }
            if (fields.size() != cols.length) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "has " + fields.size() + " fields, the table has "
                        + cols.length + " columns", lineStart, "line " + line);
            }
            for (int j = 0; j < cols.length; j++) {
                cols[j].put(fields.get(j), line);
            }
            row++;
        }
        List<Column> out = new ArrayList<>(cols.length);
        for (Builder b : cols) {
            out.add(b.build());
        }
        return new Table(name, row, out);
    }

    /** A cursor over the body's records. */
    private static final class Scanner {
        final byte[] b;
        int pos;
        private final ByteArrayOutputStream field = new ByteArrayOutputStream();

        Scanner(byte[] b) {
            this.b = b;
        }

        /**
         * The fields of the next record, null at the end of the body. With {@code noColumns}, an empty line is a
         * record of no fields (else it is one empty field).
         */
        List<String> record(boolean noColumns) {
            if (pos >= b.length) {
                return null;
            }
            List<String> fields = new ArrayList<>();
            boolean quotedAny = false;
            int i = pos;
            while (true) {
                field.reset();
                int fieldStart = i;
                if (i < b.length && b[i] == '"') {
                    quotedAny = true;
                    i++;
                    while (true) {
                        if (i >= b.length) {
                            throw new DensewireException(Category.TRUNCATED, "a quoted field starting at offset " + fieldStart
                                    + " is not terminated before the end of the body", b.length, null);
                        }
                        if (b[i] == '"') {
                            if (i + 1 < b.length && b[i + 1] == '"') {
                                field.write('"');
                                i += 2;
                                continue;
                            }
                            i++;
                            break;
                        }
                        field.write(b[i++]);
                    }
                    if (i < b.length && b[i] != ',' && b[i] != '\n' && !(b[i] == '\r' && i + 1 < b.length && b[i + 1] == '\n')) {
                        throw new DensewireException(Category.MALFORMED, "a character follows a closing quote", i, null);
                    }
                } else {
                    while (i < b.length && b[i] != ',' && b[i] != '\n' && !(b[i] == '\r' && i + 1 < b.length && b[i + 1] == '\n')) {
                        if (b[i] == '"') {
                            throw new DensewireException(Category.MALFORMED, "a quote inside an unquoted field", i, null);
                        }
                        field.write(b[i++]);
                    }
                }
                byte[] f = field.toByteArray();
                String text = Tables.utf8(f, 0, f.length);
                if (text == null) {
                    throw new DensewireException(Category.MALFORMED, "the CSV is not UTF-8", fieldStart, null);
                }
                fields.add(text);
                if (i < b.length && b[i] == ',') {
                    i++;
                    continue;
                }
                if (i < b.length) {
                    i += b[i] == '\r' ? 2 : 1;
                }
                break;
            }
            pos = i;
            if (noColumns && fields.size() == 1 && !quotedAny && fields.get(0).isEmpty()) {
                fields.clear();
            }
            return fields;
        }
    }

    /** The values of one column as they are read. */
    private static final class Builder {
        final ColumnSpec spec;
        final ColumnBuilder values;

        Builder(ColumnSpec spec, int rowsHint) {
            this.spec = spec;
            this.values = new ColumnBuilder(spec, rowsHint);
        }

        private DensewireException bad(String f, int line, String want) {
            String shown = f.length() > 40 ? f.substring(0, 37) + "..." : f;
            return new DensewireException(Category.INVALID_FIELD, Tables.quote(shown) + " is not " + want, -1,
                    "line " + line + ", " + spec.name());
        }

        void put(String f, int line) {
            switch (spec.type()) {
                case BOOL:
                    if (f.equals("true")) {
                        values.putBool(true);
                    } else if (f.equals("false")) {
                        values.putBool(false);
                    } else {
                        throw bad(f, line, "a bool (true or false)");
                    }
                    break;
                case INT32:
                case INT64: {
                    Long v = parseInteger(f);
                    if (v == null || spec.type() == ColumnType.INT32 && (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE)) {
                        throw bad(f, line, "an " + spec.type());
                    }
                    if (spec.type() == ColumnType.INT32) {
                        values.putInt32((int) (long) v);
                    } else {
                        values.putInt64(v);
                    }
                    break;
                }
                case FLOAT32: {
                    float v = parseFloat32(f);
                    if (v != v && !f.equals("NaN")) {
                        throw bad(f, line, Float.isInfinite(parseFloat32Loose(f)) ? "a number within the float32 range" : "a number");
                    }
                    values.putFloat32(v);
                    break;
                }
                case FLOAT64: {
                    double v = parseFloat64(f);
                    if (v != v && !f.equals("NaN")) {
                        throw bad(f, line, isDecimal(f) ? "a number within the float64 range" : "a number");
                    }
                    values.putFloat64(v);
                    break;
                }
                case STRING:
                    values.putString(f);
                    break;
                case UUID: {
                    if (!values.putUuid(f)) {
                        throw bad(f, line, "a uuid");
                    }
                    break;
                }
                default: { // float32[d]
                    int d = spec.dimensions();
                    String want = "a " + spec.typeName() + " vector [v1,...,v" + d + "]";
                    if (f.length() < 2 || f.charAt(0) != '[' || f.charAt(f.length() - 1) != ']') {
                        throw bad(f, line, want);
                    }
                    int at = 1;
                    for (int j = 0; j < d; j++) {
                        int comma = f.indexOf(',', at);
                        int end = j == d - 1 ? f.length() - 1 : comma;
                        if (end < 0 || j == d - 1 && comma >= 0) {
                            throw bad(f, line, want);
                        }
                        String item = f.substring(at, end).strip();
                        float v = parseFloat32(item);
                        if (v != v && !item.equals("NaN")) {
                            throw bad(f, line, want + (isDecimal(item) ? " within the float32 range" : "") + " (item " + j + ")");
                        }
                        values.putFloat32(v);
                        at = end + 1;
                    }
                }
            }
        }

        Column build() {
            return values.build();
        }
    }

    // ------------------------------------------------------------------ numbers

    /** A decimal integer of ASCII digits with an optional sign, or null (also beyond the range of a long). */
    static Long parseInteger(String f) {
        int i = f.startsWith("-") || f.startsWith("+") ? 1 : 0;
        if (i == f.length() || f.length() > 20) {
            return null;
        }
        for (int k = i; k < f.length(); k++) {
            if (f.charAt(k) < '0' || f.charAt(k) > '9') {
                return null;
            }
        }
        try {
            return Long.parseLong(f);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** {@code -?digits(.digits)?([eE][+-]?digits)?}. */
    static boolean isDecimal(String f) {
        int i = 0;
        int n = f.length();
        if (i < n && f.charAt(i) == '-') {
            i++;
        }
        int start = i;
        while (i < n && Character.isDigit(f.charAt(i)) && f.charAt(i) < 0x80) {
            i++;
        }
        if (i == start) {
            return false;
        }
        if (i < n && f.charAt(i) == '.') {
            int frac = ++i;
            while (i < n && f.charAt(i) >= '0' && f.charAt(i) <= '9') {
                i++;
            }
            if (i == frac) {
                return false;
            }
        }
        if (i < n && (f.charAt(i) == 'e' || f.charAt(i) == 'E')) {
            i++;
            if (i < n && (f.charAt(i) == '+' || f.charAt(i) == '-')) {
                i++;
            }
            int exp = i;
            while (i < n && f.charAt(i) >= '0' && f.charAt(i) <= '9') {
                i++;
            }
            if (i == exp) {
                return false;
            }
        }
        return i == n;
    }

    /** NaN, Infinity, -Infinity or a decimal within the float32 range; any other text is a NaN marker. */
    private static float parseFloat32(String f) {
        switch (f) {
            case "NaN":
                return Float.NaN;
            case "Infinity":
                return Float.POSITIVE_INFINITY;
            case "-Infinity":
                return Float.NEGATIVE_INFINITY;
            default:
                float v = parseFloat32Loose(f);
                return Float.isInfinite(v) ? Float.NaN : v;
        }
    }

    private static float parseFloat32Loose(String f) {
        return isDecimal(f) ? Float.parseFloat(f) : Float.NaN;
    }

    private static double parseFloat64(String f) {
        switch (f) {
            case "NaN":
                return Double.NaN;
            case "Infinity":
                return Double.POSITIVE_INFINITY;
            case "-Infinity":
                return Double.NEGATIVE_INFINITY;
            default:
                double v = isDecimal(f) ? Double.parseDouble(f) : Double.NaN;
                return Double.isInfinite(v) ? Double.NaN : v;
        }
    }

    // ------------------------------------------------------------------ encoding

    /**
     * The table as CSV: a header line, CRLF after every line, NaN and infinities as {@code NaN}, {@code Infinity},
     * {@code -Infinity}, vectors as quoted {@code "[v1,v2,...]"}.
     */
    public static byte[] encode(Table t) {
        t.validate();
        StringBuilder sb = new StringBuilder(64 + t.rows() * 16 * Math.max(1, t.columns().size()));
        List<Column> cols = t.columns();
        for (int j = 0; j < cols.size(); j++) {
            if (j > 0) {
                sb.append(',');
            }
            appendField(sb, cols.get(j).name());
        }
        sb.append("\r\n");
        for (int r = 0; r < t.rows(); r++) {
            for (int j = 0; j < cols.size(); j++) {
                if (j > 0) {
                    sb.append(',');
                }
                Column c = cols.get(j);
                ByteBuffer d = c.type() == ColumnType.STRING ? null : c.rawData();
                switch (c.type()) {
                    case BOOL:
                        sb.append(d.get(r) != 0 ? "true" : "false");
                        break;
                    case INT32:
                        sb.append(d.getInt(4 * r));
                        break;
                    case INT64:
                        sb.append(d.getLong(8 * r));
                        break;
                    case FLOAT32:
                        appendFloat(sb, d.getFloat(4 * r));
                        break;
                    case FLOAT64:
                        appendDouble(sb, d.getDouble(8 * r));
                        break;
                    case STRING:
                        appendField(sb, c.strings().get(r));
                        break;
                    case UUID:
                        sb.append(uuidText(d, r));
                        break;
                    default: {
                        int dims = c.dimensions();
                        sb.append("\"[");
                        for (int k = 0; k < dims; k++) {
                            if (k > 0) {
                                sb.append(',');
                            }
                            appendFloat(sb, d.getFloat(4 * (dims * r + k)));
                        }
                        sb.append("]\"");
                    }
                }
            }
            sb.append("\r\n");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static String uuidText(ByteBuffer d, int row) {
        byte[] u = new byte[16];
        d.get(16 * row, u);
        return Tables.formatUuid(u, 0);
    }

    private static void appendField(StringBuilder sb, String f) {
        boolean quote = f.isEmpty() || f.charAt(0) == ' ' || f.charAt(f.length() - 1) == ' ' || f.charAt(0) == '\uFEFF';
        for (int i = 0; !quote && i < f.length(); i++) {
            char c = f.charAt(i);
            quote = c == ',' || c == '"' || c == '\r' || c == '\n';
        }
        if (!quote) {
            sb.append(f);
            return;
        }
        sb.append('"');
        for (int i = 0; i < f.length(); i++) {
            char c = f.charAt(i);
            if (c == '"') {
                sb.append('"');
            }
            sb.append(c);
        }
        sb.append('"');
    }

    private static void appendFloat(StringBuilder sb, float v) {
        if (Float.isNaN(v)) {
            sb.append("NaN");
        } else {
            sb.append(Float.isInfinite(v) ? (v > 0 ? "Infinity" : "-Infinity") : Float.toString(v));
        }
    }

    private static void appendDouble(StringBuilder sb, double v) {
        if (Double.isNaN(v)) {
            sb.append("NaN");
        } else {
            sb.append(Double.isInfinite(v) ? (v > 0 ? "Infinity" : "-Infinity") : Double.toString(v));
        }
    }
}
