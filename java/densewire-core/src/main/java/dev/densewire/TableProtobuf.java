package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Columnar Protobuf tables (SPEC.md section 15.6): the message {@code densewire.v1.Table} of
 * {@code proto/densewire/v1/table.proto}, read and written on the wire format directly like the tensor messages
 * ({@link ProtobufCodec}). Plain fixed-width columns are views of the body; byte-stream-split ones are joined into
 * a new array; the output is byte-exact with the official serializers.
 */
public final class TableProtobuf {
    public static final String MEDIA_TYPE = "application/protobuf";

    /** The layout of a fixed-width column's data ({@code ColumnEncoding} of table.proto). */
    public enum Encoding {
        /** Value after value, little-endian. */
        PLAIN,
        /** Parquet's BYTE_STREAM_SPLIT: byte k of item i at {@code data[k * m + i]}. */
        BYTE_STREAM_SPLIT
    }

    private TableProtobuf() {
    }

    // ------------------------------------------------------------------ decoding

    /**
     * Decodes a {@code densewire.v1.Table} body.
     *
     * @throws DensewireException the wire-format errors of {@link ProtobufCodec} ({@code malformed} at the tag,
     *                            {@code truncated} at the body's length); on {@code columns[COL]}: type absent or
     *                            0 {@code invalid_field} on {@code .type}, an unknown enum value
     *                            {@code unknown_dtype} on it; dimensions 0 on a vector or set on another type
     *                            {@code invalid_field} on {@code .dimensions}; an unknown encoding or
     *                            byte-stream-split on bool or string {@code invalid_field} on {@code .encoding};
     *                            data of the wrong length {@code length_mismatch} on {@code .data} (offset
     *                            {@code min(actual, expected)}); lengths with other than rows entries
     *                            {@code shape_mismatch} on {@code .lengths}, or whose sum is not the data's length
     *                            {@code length_mismatch} on {@code .data}; invalid UTF-8 {@code malformed} on
     *                            {@code .data}; a bool byte other than 0 or 1 {@code invalid_field} on
     *                            {@code .data[ROW]}
     */
    public static Table decode(byte[] body) {
        ProtoReader r = new ProtoReader(body, 0, 0, body.length, false);
        String name = "";
        long rows = 0;
        List<Raw> raws = new ArrayList<>();
        while (r.more()) {
            int tagAt = r.pos;
            long tag = r.tag();
            long number = tag >>> 3;
            int wire = (int) (tag & 7);
            if (number == 1 || number == 3) {
                r.expect(wire, 2, tagAt, number == 1 ? "name" : "columns");
                int len = r.lengthDelimited();
                int from = r.pos;
                r.pos += len;
                if (number == 1) {
                    name = Tables.utf8(body, from, len);
                    if (name == null) {
                        throw new DensewireException(Category.MALFORMED, "the table name is not UTF-8", tagAt, "name");
                    }
                } else {
                    raws.add(column(new ProtoReader(body, 0, from, from + len, true)));
                }
            } else if (number == 2) {
                r.expect(wire, 0, tagAt, "rows");
                rows = r.varint();
            } else {
                r.skip(tag, tagAt);
            }
        }
        int n = Tables.rowCount(rows, "rows");
        List<Column> columns = new ArrayList<>(raws.size());
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < raws.size(); i++) {
            columns.add(raws.get(i).build(body, "columns[" + i + "]", n, seen));
        }
        return new Table(name, n, columns);
    }

    /** A Column message as read. */
    private static final class Raw {
        String name = "";
        long type;
        long dims;
        long encoding;
        int dataFrom;
        int dataLen;
        long[] lengths = new long[0];
        int lengthCount;

        void addLength(long v) {
            if (lengthCount == lengths.length) {
                lengths = java.util.Arrays.copyOf(lengths, Math.max(8, lengthCount * 2));
            }
            lengths[lengthCount++] = v & 0xFFFFFFFFL; // uint32 on the wire: the low 32 bits, as official parsers
        }

        Column build(byte[] body, String field, int n, Set<String> seen) {
            Tables.checkName(name, field, seen);
            int t = (int) type; // enums are int32 on the wire: the low 32 bits
            ColumnType ct;
            try {
                ct = ColumnType.fromProtoValue(t);
            } catch (DensewireException e) {
                throw new DensewireException(e.category(), e.detail(), -1, field + ".type");
            }
            int d = (int) dims; // uint32
            if (ct == ColumnType.FLOAT32_VECTOR ? d <= 0 || d > ColumnType.MAX_DIMENSIONS : d != 0) {
                throw new DensewireException(Category.INVALID_FIELD, ct == ColumnType.FLOAT32_VECTOR
                        ? "dimensions " + Integer.toUnsignedString(d) + " is out of range for float32[d]"
                        : "dimensions is set on a " + ct + " column", -1, field + ".dimensions");
            }
            ColumnSpec spec = new ColumnSpec(name, ct, ct == ColumnType.FLOAT32_VECTOR ? d : 0);
            int enc = (int) encoding;
            if (enc != 0 && enc != 1) {
                throw new DensewireException(Category.INVALID_FIELD, "unknown column encoding " + enc, -1, field + ".encoding");
            }
            if (enc == 1 && (ct == ColumnType.BOOL || ct == ColumnType.STRING)) {
                throw new DensewireException(Category.INVALID_FIELD, "byte-stream-split is not allowed on " + ct, -1,
                        field + ".encoding");
            }
            if (ct == ColumnType.STRING) {
                return Column.stringsUnchecked(spec, strings(body, field, n));
            }
            if (lengthCount > 0) {
                throw new DensewireException(Category.INVALID_FIELD, "lengths is set on a " + ct + " column", -1,
                        field + ".lengths");
            }
            Tables.checkFixedLength(dataLen, n, spec, field + ".data");
            ByteBuffer data = enc == 1
                    ? ByteBuffer.wrap(Tables.joinByteStreams(body, dataFrom, dataLen, ct.itemWidth()))
                    : ByteBuffer.wrap(body, dataFrom, dataLen);
            Column c = Column.fixed(spec, data);
            if (ct == ColumnType.BOOL) {
                Tables.checkBools(c.rawData(), field + ".data");
            }
            return c;
        }

        private List<String> strings(byte[] body, String field, int n) {
            if (lengthCount != n) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "has " + lengthCount + " entries for " + n + " rows",
                        -1, field + ".lengths");
            }
            long sum = 0;
            for (int i = 0; i < n && sum <= dataLen; i++) {
                sum += lengths[i];
            }
            if (sum != dataLen) {
                throw new DensewireException(Category.LENGTH_MISMATCH, sum > dataLen
                        ? "the lengths add up to more than the " + dataLen + " bytes of data"
                        : "the lengths add up to " + sum + " bytes, data has " + dataLen, Math.min(sum, dataLen), field + ".data");
            }
            if (Tables.utf8(body, dataFrom, dataLen) == null) {
                throw new DensewireException(Category.MALFORMED, "is not valid UTF-8", dataFrom, field + ".data");
            }
            String[] out = new String[n];
            int off = dataFrom;
            for (int i = 0; i < n; i++) {
                int len = (int) lengths[i];
                // valid as a whole: a value is valid too unless it starts or ends inside a character
                if (len > 0 && (body[off] & 0xC0) == 0x80 || off + len < dataFrom + dataLen && (body[off + len] & 0xC0) == 0x80) {
                    throw new DensewireException(Category.MALFORMED, "value " + i + " is not valid UTF-8", off, field + ".data");
                }
                out[i] = new String(body, off, len, StandardCharsets.UTF_8);
                off += len;
            }
            return List.of(out);
        }
    }

    private static Raw column(ProtoReader r) {
        Raw c = new Raw();
        while (r.more()) {
            int tagAt = r.pos;
            try {
                long tag = r.tag();
                long number = tag >>> 3;
                int wire = (int) (tag & 7);
                if (number == 1 || number == 5 || number == 6 && wire == 2) {
                    r.expect(wire, 2, tagAt, number == 1 ? "name" : number == 5 ? "data" : "lengths");
                    int len = r.lengthDelimited();
                    int from = r.pos;
                    r.pos += len;
                    if (number == 1) {
                        c.name = Tables.utf8(r.b, from, len);
                        if (c.name == null) {
                            throw new DensewireException(Category.MALFORMED, "a column name is not UTF-8", tagAt, "name");
                        }
                    } else if (number == 5) {
                        c.dataFrom = from;
                        c.dataLen = len;
                    } else {
                        ProtoReader packed = new ProtoReader(r.b, r.base, from, from + len, true);
                        while (packed.more()) {
                            try {
                                c.addLength(packed.varint());
                            } catch (DensewireException e) {
                                throw new DensewireException(Category.MALFORMED, "packed lengths end inside a varint", tagAt,
                                        "lengths");
                            }
                        }
                    }
                } else if (number >= 2 && number <= 4 || number == 6) {
                    r.expect(wire, 0, tagAt, number == 2 ? "type" : number == 3 ? "dimensions" : number == 4 ? "encoding" : "lengths");
                    long v = r.varint();
                    if (number == 2) {
                        c.type = v;
                    } else if (number == 3) {
                        c.dims = v;
                    } else if (number == 4) {
                        c.encoding = v;
                    } else {
                        c.addLength(v);
                    }
                } else {
                    r.skip(tag, tagAt);
                }
            } catch (DensewireException e) {
                throw r.pastEnd(e, tagAt);
            }
        }
        return c;
    }

    // ------------------------------------------------------------------ encoding

    /** The table as {@code densewire.v1.Table}, every fixed-width column but bool plain. */
    public static byte[] encode(Table t) {
        return encode(t, Encoding.PLAIN);
    }

    /**
     * The table as {@code densewire.v1.Table}: fields in number order, proto3 defaults omitted. With
     * {@link Encoding#BYTE_STREAM_SPLIT} every fixed-width column but bool is split.
     */
    public static byte[] encode(Table t, Encoding encoding) {
        t.validate();
        Out out = new Out(64);
        if (!t.name().isEmpty()) {
            out.bytesField(1, t.name().getBytes(StandardCharsets.UTF_8));
        }
        if (t.rows() != 0) {
            out.tag(2, 0);
            out.varint(t.rows());
        }
        for (Column c : t.columns()) {
            Out col = new Out(32 + (c.type() == ColumnType.STRING ? 0 : c.rawData().capacity()));
            col.bytesField(1, c.name().getBytes(StandardCharsets.UTF_8));
            col.tag(2, 0);
            col.varint(c.type().protoValue());
            if (c.type() == ColumnType.FLOAT32_VECTOR) {
                col.tag(3, 0);
                col.varint(c.dimensions());
            }
            boolean split = encoding == Encoding.BYTE_STREAM_SPLIT && c.type() != ColumnType.BOOL && c.type() != ColumnType.STRING;
            if (split) {
                col.tag(4, 0);
                col.varint(1);
            }
            if (c.type() == ColumnType.STRING) {
                Out lengths = new Out(c.strings().size());
                ByteArrayOutputStream data = new ByteArrayOutputStream();
                for (String s : c.strings()) {
                    byte[] b = s.getBytes(StandardCharsets.UTF_8);
                    data.write(b, 0, b.length);
                    lengths.varint(b.length);
                }
                if (data.size() > 0) {
                    col.bytesField(5, data.toByteArray());
                }
                if (!c.strings().isEmpty()) {
                    col.bytesField(6, lengths.toByteArray());
                }
            } else {
                ByteBuffer d = c.rawData();
                if (d.capacity() > 0) {
                    byte[] b = new byte[d.capacity()];
                    if (split) {
                        Tables.splitByteStreams(d, b, 0, c.type().itemWidth());
                    } else {
                        d.get(0, b);
                    }
                    col.bytesField(5, b);
                }
            }
            out.tag(3, 2);
            out.varint(col.size());
            col.writeTo(out);
        }
        return out.toByteArray();
    }

    private static final class Out extends ByteArrayOutputStream {
        Out(int size) {
            super(size);
        }

        void tag(int number, int wire) {
            varint((long) number << 3 | wire);
        }

        void varint(long v) {
            while ((v & ~0x7FL) != 0) {
                write((int) ((v & 0x7F) | 0x80));
                v >>>= 7;
            }
            write((int) v);
        }

        void bytesField(int number, byte[] b) {
            tag(number, 2);
            varint(b.length);
            write(b, 0, b.length);
        }

        void writeTo(ByteArrayOutputStream o) {
            o.write(buf, 0, count);
        }
    }
}
