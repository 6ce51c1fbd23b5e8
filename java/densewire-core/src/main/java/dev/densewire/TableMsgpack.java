package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Columnar MessagePack tables (SPEC.md section 15.5): {@code {"name": str, "rows": n, "columns": [{"name", "type",
 * "data"}, ...]}}, {@code data} a bin of {@code n * width} little-endian bytes or, for strings, an array of
 * {@code n} str. Fixed-width columns are views of the body (not copied). Written in the smallest encodings,
 * byte-exact with the golden vectors.
 */
public final class TableMsgpack {
    public static final String MEDIA_TYPE = "application/vnd.msgpack";

    private TableMsgpack() {
    }

    /**
     * Decodes a columnar MessagePack table. Keys may come in any order; unknown keys are skipped.
     *
     * @throws DensewireException the body is not a map, a key is not a str, bytes follow the map:
     *                            {@code malformed} at the offset; the body ends early: {@code truncated} at its
     *                            length; a missing or mistyped key: {@code invalid_field} on {@code rows},
     *                            {@code columns}, {@code columns[COL].name}, {@code .type} or {@code .data}; an
     *                            unknown type: {@code unknown_dtype} on {@code columns[COL].type}; a bin of the wrong
     *                            length: {@code length_mismatch} on {@code columns[COL].data} (offset
     *                            {@code min(actual, expected)}); a string array of the wrong length:
     *                            {@code shape_mismatch} on it; a bool byte other than 0 or 1: {@code invalid_field}
     *                            on {@code columns[COL].data[ROW]}
     */
    public static Table decode(byte[] body) {
        if (body.length == 0) {
            throw new DensewireException(Category.TRUNCATED, "empty body", 0, null);
        }
        int first = body[0] & 0xFF;
        if (!((first >= 0x80 && first <= 0x8F) || first == 0xDE || first == 0xDF)) {
            throw new DensewireException(Category.MALFORMED,
                    String.format("the body must be a MessagePack map, it starts with 0x%02x", first), 0, null);
        }
        MsgpackReader r = new MsgpackReader(body, 0, body.length);
        Map<?, ?> doc = (Map<?, ?>) r.value(0);
        if (r.pos != r.end) {
            throw new DensewireException(Category.MALFORMED, (r.end - r.pos) + " bytes after the map", r.pos, null);
        }
        Object name = doc.get("name");
        if (name != null && !(name instanceof String)) {
            throw new DensewireException(Category.INVALID_FIELD, "must be a str", -1, "name");
        }
        Object rowsValue = doc.get("rows");
        if (!(rowsValue instanceof Long) || (Long) rowsValue < 0) {
            throw new DensewireException(Category.INVALID_FIELD, rowsValue == null ? "missing key rows"
                    : "must be a non-negative integer", -1, "rows");
        }
        int n = Tables.rowCount((Long) rowsValue, "rows");
        Object columnsValue = doc.get("columns");
        if (!(columnsValue instanceof List)) {
            throw new DensewireException(Category.INVALID_FIELD, columnsValue == null ? "missing key columns"
                    : "must be an array", -1, "columns");
        }
        List<?> list = (List<?>) columnsValue;
        List<Column> columns = new ArrayList<>(list.size());
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < list.size(); i++) {
            columns.add(column(body, list.get(i), "columns[" + i + "]", n, seen));
        }
        return new Table(name == null ? "" : (String) name, n, columns);
    }

    private static Object key(Map<?, ?> m, String field, String key, Class<?> type, String what) {
        Object v = m.get(key);
        if (!type.isInstance(v)) {
            throw new DensewireException(Category.INVALID_FIELD, v == null ? "missing key " + field + "." + key
                    : "must be " + what, -1, field + "." + key);
        }
        return v;
    }

    private static Column column(byte[] body, Object value, String field, int n, Set<String> seen) {
        if (!(value instanceof Map)) {
            throw new DensewireException(Category.INVALID_FIELD, "must be a map", -1, field);
        }
        Map<?, ?> m = (Map<?, ?>) value;
        String name = (String) key(m, field, "name", String.class, "a str");
        String typeName = (String) key(m, field, "type", String.class, "a str");
        Tables.checkName(name, field, seen);
        ColumnSpec spec = Tables.parseSpec(name, typeName, field + ".type", -1);
        String dataField = field + ".data";
        if (spec.type() == ColumnType.STRING) {
            List<?> values = (List<?>) key(m, field, "data", List.class, "an array of str (a string column)");
            if (values.size() != n) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "has " + values.size() + " strings for " + n + " rows",
                        -1, dataField);
            }
            String[] out = new String[n];
            for (int j = 0; j < n; j++) {
                if (!(values.get(j) instanceof String)) {
                    throw new DensewireException(Category.INVALID_FIELD, "must be a str", -1, dataField + "[" + j + "]");
                }
                out[j] = (String) values.get(j);
            }
            return Column.stringsUnchecked(spec, List.of(out));
        }
        MsgpackReader.Bin bin = (MsgpackReader.Bin) key(m, field, "data", MsgpackReader.Bin.class,
                "a bin (a " + spec.typeName() + " column)");
        Tables.checkFixedLength(bin.length(), n, spec, dataField);
        Column c = Column.fixed(spec, ByteBuffer.wrap(body, bin.offset(), bin.length()));
        if (spec.type() == ColumnType.BOOL) {
            Tables.checkBools(c.rawData(), dataField);
        }
        return c;
    }

    // ------------------------------------------------------------------ encoding

    /** The table as columnar MessagePack in the smallest encodings. */
    public static byte[] encode(Table t) {
        t.validate();
        Writer w = new Writer();
        w.mapHeader(3);
        w.str("name");
        w.str(t.name());
        w.str("rows");
        w.uint(t.rows());
        w.str("columns");
        w.arrayHeader(t.columns().size());
        for (Column c : t.columns()) {
            w.mapHeader(3);
            w.str("name");
            w.str(c.name());
            w.str("type");
            w.str(c.spec().typeName());
            w.str("data");
            if (c.type() == ColumnType.STRING) {
                w.arrayHeader(c.strings().size());
                for (String s : c.strings()) {
                    w.str(s);
                }
            } else {
                ByteBuffer d = c.rawData();
                w.bin(d.duplicate().clear());
            }
        }
        return w.toByteArray();
    }

    /** The smallest encodings of section 8. */
    private static final class Writer extends ByteArrayOutputStream {
        Writer() {
            super(256);
        }

        private void be(long v, int bytes) {
            for (int i = bytes - 1; i >= 0; i--) {
                write((int) (v >>> (8 * i)));
            }
        }

        void mapHeader(int n) {
            if (n < 16) {
                write(0x80 | n);
            } else if (n < 0x10000) {
                write(0xDE);
                be(n, 2);
            } else {
                write(0xDF);
                be(n, 4);
            }
        }

        void arrayHeader(int n) {
            if (n < 16) {
                write(0x90 | n);
            } else if (n < 0x10000) {
                write(0xDC);
                be(n, 2);
            } else {
                write(0xDD);
                be(n, 4);
            }
        }

        void str(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            int n = b.length;
            if (n < 32) {
                write(0xA0 | n);
            } else if (n < 0x100) {
                write(0xD9);
                be(n, 1);
            } else if (n < 0x10000) {
                write(0xDA);
                be(n, 2);
            } else {
                write(0xDB);
                be(n, 4);
            }
            write(b, 0, n);
        }

        void uint(long v) {
            if (v < 0x80) {
                write((int) v);
            } else if (v < 0x100) {
                write(0xCC);
                be(v, 1);
            } else if (v < 0x10000) {
                write(0xCD);
                be(v, 2);
            } else if (v < 0x100000000L) {
                write(0xCE);
                be(v, 4);
            } else {
                write(0xCF);
                be(v, 8);
            }
        }

        void bin(ByteBuffer data) {
            int n = data.remaining();
            if (n < 0x100) {
                write(0xC4);
                be(n, 1);
            } else if (n < 0x10000) {
                write(0xC5);
                be(n, 2);
            } else {
                write(0xC6);
                be(n, 4);
            }
            if (data.hasArray()) {
                write(data.array(), data.arrayOffset() + data.position(), n);
            } else {
                byte[] copy = new byte[n];
                data.get(copy);
                write(copy, 0, n);
            }
        }
    }
}
