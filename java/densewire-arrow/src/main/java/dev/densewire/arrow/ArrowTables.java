package dev.densewire.arrow;

import dev.densewire.Column;
import dev.densewire.ColumnBuilder;
import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseLargeVariableWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Tables as Arrow IPC streams (SPEC.md section 15.7): one schema, record batches, end-of-stream marker; every
 * column non-nullable, its type in the field metadata {@code densewire.type}, the table's name in the schema
 * metadata {@code densewire.table}. uuid is {@code FixedSizeBinary(16)} with the canonical extension type
 * {@code arrow.uuid}; {@code float32[d]} is {@code FixedSizeList<item: Float32, d>}. Decoding copies each column's
 * buffers once into the table.
 */
public final class ArrowTables {
    public static final String MEDIA_TYPE = "application/vnd.apache.arrow.stream";

    private ArrowTables() {
    }

    // ------------------------------------------------------------------ decoding

    /**
     * Decodes a table stream.
     *
     * @throws DensewireException a stream without any record batch, or cut short: {@code truncated} at the body's
     *                            length; not an Arrow stream: {@code malformed}; a column whose Arrow type does not
     *                            match its {@code densewire.type}, or that has nulls: {@code invalid_field} on the
     *                            column name; an unknown {@code densewire.type}: {@code unknown_dtype} on it
     */
    public static Table decode(byte[] body) {
        ArrowFraming.check(body);
        ArrowCodec.EofTrackingStream in = new ArrowCodec.EofTrackingStream(body);
        try (BufferAllocator alloc = ArrowCodec.ROOT.newChildAllocator("densewire-table-decode", 0,
                ArrowCodec.decodeLimit(body));
             ArrowStreamReader reader = new ArrowStreamReader(in, alloc)) {
            VectorSchemaRoot root;
            try {
                root = reader.getVectorSchemaRoot();
            } catch (IOException | RuntimeException e) {
                throw ArrowCodec.failure(body, in, e, "cannot read the Arrow schema");
            }
            Schema schema = root.getSchema();
            List<Field> fields = schema.getFields();
            List<ColumnSpec> specs = new ArrayList<>(fields.size());
            Set<String> seen = new HashSet<>();
            for (int i = 0; i < fields.size(); i++) {
                ColumnSpec spec = spec(fields.get(i), i);
                if (!seen.add(spec.name())) {
                    throw new DensewireException(Category.INVALID_FIELD, "column " + spec.name() + " appears twice", -1,
                            "columns[" + i + "].name"); // SPEC.md 15.7
                }
                specs.add(spec);
            }
            ColumnBuilder[] cols = new ColumnBuilder[specs.size()];
            for (int j = 0; j < cols.length; j++) {
                cols[j] = new ColumnBuilder(specs.get(j), 1024);
            }
            long rows = 0;
            int batches = 0;
            while (true) {
                int messageStart = in.position();
                boolean loaded;
                try {
                    loaded = reader.loadNextBatch();
                } catch (IOException | RuntimeException e) {
                    throw ArrowCodec.failure(body, in, e, "cannot read an Arrow record batch");
                }
                if (!loaded) {
                    ArrowCodec.checkEndOfStream(body, messageStart);
                    break;
                }
                int n = root.getRowCount();
                for (int j = 0; j < cols.length; j++) {
                    append(cols[j], root.getVector(j), n);
                }
                rows += n;
                batches++;
            }
            if (batches == 0) {
                throw new DensewireException(Category.TRUNCATED, "the Arrow stream ends before its record batch",
                        body.length, null);
            }
            if (rows > Integer.MAX_VALUE - 8) {
                throw new DensewireException(Category.INVALID_FIELD, rows + " rows are more than a table holds", -1, null);
            }
            Map<String, String> meta = schema.getCustomMetadata() == null ? Map.of() : schema.getCustomMetadata();
            List<Column> out = new ArrayList<>(cols.length);
            for (ColumnBuilder b : cols) {
                out.add(b.build());
            }
            return new Table(meta.getOrDefault("densewire.table", ""), (int) rows, out);
        } catch (IOException e) {
            throw ArrowCodec.failure(body, in, e, "cannot read the Arrow stream");
        } catch (IndexOutOfBoundsException e) {
            throw ArrowCodec.shortBuffer(e);
        }
    }

    private static DensewireException mismatch(Field f, String detail) {
        return new DensewireException(Category.INVALID_FIELD, detail, -1, f.getName());
    }

    /** The column's spec from {@code densewire.type} (else from its Arrow type), checked against its Arrow type. */
    private static ColumnSpec spec(Field f, int i) {
        if (f.getName() == null || f.getName().isEmpty()) { // a field without a name (found by TableArrowFuzzTest)
            throw new DensewireException(Category.INVALID_FIELD, "a column needs a non-empty name", -1, "columns[" + i + "].name");
        }
        String typeName = f.getMetadata() == null ? null : f.getMetadata().get("densewire.type");
        ColumnSpec spec;
        if (typeName != null) {
            try {
                spec = ColumnSpec.parse(f.getName(), typeName);
            } catch (DensewireException e) {
                throw new DensewireException(e.category(), e.detail(), -1, f.getName());
            }
        } else {
            spec = inferred(f);
        }
        if (!arrowTypeMatches(spec, f)) {
            throw mismatch(f, "the Arrow type " + f.getType() + " is not that of " + spec.typeName());
        }
        return spec;
    }

    private static ColumnSpec inferred(Field f) {
        ArrowType t = f.getType();
        for (ColumnType c : ColumnType.values()) {
            if (c == ColumnType.FLOAT32_VECTOR) {
                if (t instanceof ArrowType.FixedSizeList && ((ArrowType.FixedSizeList) t).getListSize() >= 1
                        && ((ArrowType.FixedSizeList) t).getListSize() <= ColumnType.MAX_DIMENSIONS) {
                    return ColumnSpec.vector(f.getName(), ((ArrowType.FixedSizeList) t).getListSize());
                }
            } else if (c == ColumnType.STRING && t instanceof ArrowType.LargeUtf8 || arrowType(c, 0).equals(t)) {
                return ColumnSpec.of(f.getName(), c);
            }
        }
        throw mismatch(f, "no densewire.type and no column type for the Arrow type " + t);
    }

    private static boolean arrowTypeMatches(ColumnSpec spec, Field f) {
        ArrowType t = f.getType();
        if (spec.type() == ColumnType.STRING) {
            return t instanceof ArrowType.Utf8 || t instanceof ArrowType.LargeUtf8;
        }
        if (!arrowType(spec.type(), spec.dimensions()).equals(t)) {
            return false;
        }
        return spec.type() != ColumnType.FLOAT32_VECTOR || f.getChildren().size() == 1
                && f.getChildren().get(0).getType().equals(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE));
    }

    static ArrowType arrowType(ColumnType type, int d) {
        switch (type) {
            case BOOL:
                return ArrowType.Bool.INSTANCE;
            case INT32:
                return new ArrowType.Int(32, true);
            case INT64:
                return new ArrowType.Int(64, true);
            case FLOAT32:
                return new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE);
            case FLOAT64:
                return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
            case STRING:
                return ArrowType.Utf8.INSTANCE;
            case UUID:
                return new ArrowType.FixedSizeBinary(16);
            default:
                return new ArrowType.FixedSizeList(d);
        }
    }

    /** Appends the {@code n} values of one batch's column. */
    private static void append(ColumnBuilder b, FieldVector v, int n) {
        ColumnSpec spec = b.spec();
        if (v.getNullCount() != 0) {
            throw new DensewireException(Category.INVALID_FIELD, "the column holds nulls", -1, spec.name());
        }
        switch (spec.type()) {
            case BOOL: {
                BitVector bits = (BitVector) v;
                for (int i = 0; i < n; i++) {
                    b.putBool(bits.get(i) != 0);
                }
                break;
            }
            case STRING:
                strings(b, v, n);
                break;
            case FLOAT32_VECTOR: {
                FieldVector items = ((FixedSizeListVector) v).getDataVector();
                if (items.getNullCount() != 0) {
                    throw new DensewireException(Category.INVALID_FIELD, "the vector items hold nulls", -1, spec.name());
                }
                copy(b, ((BaseFixedWidthVector) items).getDataBuffer(), (long) n * spec.width());
                break;
            }
            case UUID:
                copy(b, ((FixedSizeBinaryVector) v).getDataBuffer(), (long) n * 16);
                break;
            default:
                copy(b, ((BaseFixedWidthVector) v).getDataBuffer(), (long) n * spec.width());
        }
    }

    private static void copy(ColumnBuilder b, ArrowBuf buf, long len) {
        if (buf.capacity() < len) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the value buffer holds " + buf.capacity() + " bytes, "
                    + len + " needed", buf.capacity(), b.spec().name());
        }
        byte[] chunk = new byte[(int) len];
        buf.getBytes(0, chunk);
        b.putRaw(chunk, 0, chunk.length);
    }

    private static void strings(ColumnBuilder b, FieldVector v, int n) {
        ArrowBuf offsets = v.getOffsetBuffer();
        ArrowBuf data = v.getDataBuffer();
        boolean large = v instanceof BaseLargeVariableWidthVector;
        int width = large ? BaseLargeVariableWidthVector.OFFSET_WIDTH : BaseVariableWidthVector.OFFSET_WIDTH;
        var decoder = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        for (int i = 0; i < n; i++) {
            long start = large ? offsets.getLong((long) i * width) : offsets.getInt((long) i * width);
            long end = large ? offsets.getLong((long) (i + 1) * width) : offsets.getInt((long) (i + 1) * width);
            if (start < 0 || end < start || end > data.capacity() || end - start > Integer.MAX_VALUE) {
                throw new DensewireException(Category.MALFORMED, "string offsets out of bounds at row " + i, -1, b.spec().name());
            }
            byte[] bytes = new byte[(int) (end - start)];
            data.getBytes(start, bytes);
            try {
                b.putString(decoder.decode(ByteBuffer.wrap(bytes)).toString());
            } catch (CharacterCodingException e) {
                throw new DensewireException(Category.MALFORMED, "value " + i + " is not valid UTF-8", -1, b.spec().name());
            }
        }
    }

    // ------------------------------------------------------------------ encoding

    /** The table as an Arrow IPC stream: schema with densewire metadata, one record batch, end-of-stream marker. */
    public static byte[] encode(Table t) {
        t.validate();
        List<Field> fields = new ArrayList<>();
        for (Column c : t.columns()) {
            Map<String, String> meta = new LinkedHashMap<>();
            meta.put("densewire.type", c.spec().typeName());
            if (c.type() == ColumnType.UUID) {
                meta.put("ARROW:extension:name", "arrow.uuid");
                meta.put("ARROW:extension:metadata", "");
            }
            FieldType ft = new FieldType(false, arrowType(c.type(), c.dimensions()), null, meta);
            List<Field> children = c.type() == ColumnType.FLOAT32_VECTOR
                    ? List.of(new Field("item", new FieldType(false, arrowType(ColumnType.FLOAT32, 0), null), null))
                    : null;
            fields.add(new Field(c.name(), ft, children));
        }
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("densewire.version", "1");
        meta.put("densewire.table", t.name());
        Schema schema = new Schema(fields, meta);
        ByteArrayOutputStream out = new ByteArrayOutputStream(1024);
        try (BufferAllocator alloc = ArrowCodec.ROOT.newChildAllocator("densewire-table-encode", 0, Long.MAX_VALUE);
             VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc)) {
            int n = t.rows();
            for (int j = 0; j < t.columns().size(); j++) {
                fill(root.getVector(j), t.columns().get(j), n);
            }
            root.setRowCount(n);
            try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, out)) {
                writer.start();
                writer.writeBatch();
                writer.end();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toByteArray();
    }

    private static byte[] bytes(ByteBuffer d) {
        byte[] out = new byte[d.remaining()];
        d.duplicate().get(out);
        return out;
    }

    private static void fill(FieldVector v, Column c, int n) {
        ByteBuffer d = c.type() == ColumnType.STRING ? null : c.data().order(ByteOrder.LITTLE_ENDIAN);
        switch (c.type()) {
            case BOOL: {
                BitVector bits = (BitVector) v;
                bits.allocateNew(n);
                for (int i = 0; i < n; i++) {
                    bits.set(i, d.get(i));
                }
                break;
            }
            case INT32:
            case INT64:
            case FLOAT32:
            case FLOAT64:
            case UUID: { // the bytes as they are: every bit of a float (NaN payloads) kept
                BaseFixedWidthVector x = (BaseFixedWidthVector) v;
                x.allocateNew(n);
                ArrowCodec.fill(x.getDataBuffer(), x.getValidityBuffer(), bytes(d), n);
                break;
            }
            case STRING: {
                VarCharVector x = (VarCharVector) v;
                x.allocateNew(n);
                for (int i = 0; i < n; i++) {
                    x.setSafe(i, c.strings().get(i).getBytes(StandardCharsets.UTF_8));
                }
                break;
            }
            default: {
                FixedSizeListVector list = (FixedSizeListVector) v;
                list.allocateNew();
                Float4Vector items = (Float4Vector) list.getDataVector();
                int count = n * c.dimensions();
                items.allocateNew(count);
                ArrowCodec.fill(items.getDataBuffer(), items.getValidityBuffer(), bytes(d), count);
                items.setValueCount(count);
                for (int i = 0; i < n; i++) {
                    list.setNotNull(i);
                }
            }
        }
        v.setValueCount(n);
    }
}
