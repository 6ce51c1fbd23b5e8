package dev.densewire.arrow;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Ragged;
import dev.densewire.Tensor;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
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
 * Arrow IPC stream bodies (SPEC.md section 10): one non-nullable column {@code embedding} of
 * {@code FixedSizeList<item, d>} (or {@code FixedSizeBinary(ceil(d / 8))} for binary), with densewire's schema
 * metadata. Decoding copies the column's value buffer once into the tensor.
 *
 * <p>On Java 17 Arrow's memory module needs {@code --add-opens=java.base/java.nio=ALL-UNNAMED}.
 */
public final class ArrowCodec {
    public static final String MEDIA_TYPE = "application/vnd.apache.arrow.stream";
    static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);

    private ArrowCodec() {
    }

    // ------------------------------------------------------------------ decoding

    /** Decodes an Arrow IPC stream into the tensor and, when the metadata carries them, model and usage. */
    public static Embeddings decode(byte[] body) {
        ArrowFraming.check(body);
        EofTrackingStream in = new EofTrackingStream(body);
        try (BufferAllocator alloc = ROOT.newChildAllocator("densewire-decode", 0, decodeLimit(body));
             ArrowStreamReader reader = new ArrowStreamReader(in, alloc)) {
            VectorSchemaRoot root;
            try {
                root = reader.getVectorSchemaRoot();
            } catch (IOException | RuntimeException e) {
                throw failure(body, in, e, "cannot read the Arrow schema");
            }
            Schema schema = root.getSchema();
            Map<String, String> meta = schema.getCustomMetadata() == null ? Map.of() : schema.getCustomMetadata();
            Ragged.checkNoKind(meta.containsKey("densewire.kind"), meta.get("densewire.kind"), "densewire.kind");
            Field field = schema.getFields().stream().filter(f -> "embedding".equals(f.getName())).findFirst()
                    .orElseThrow(() -> new DensewireException(Category.INVALID_FIELD, "no column named embedding", -1, "embedding"));
            Dtype dtype = dtypeOf(field, meta);
            long d = dimsOf(field, meta, dtype);
            int rowBytes = (int) dtype.rowBytes(d);
            ByteArrayOutputStream data = new ByteArrayOutputStream();
            int rows = 0;
            int batches = 0;
            while (true) {
                boolean loaded;
                int messageStart = in.position();
                try {
                    loaded = reader.loadNextBatch();
                } catch (IOException | RuntimeException e) {
                    throw failure(body, in, e, "cannot read an Arrow record batch");
                }
                if (!loaded) {
                    checkEndOfStream(body, messageStart);
                    break;
                }
                FieldVector column = root.getVector("embedding");
                int n = root.getRowCount();
                if (column.getNullCount() != 0) {
                    throw new DensewireException(Category.INVALID_FIELD, "the embedding column holds nulls", -1, "embedding");
                }
                ArrowBuf values = valueBuffer(column, dtype);
                long len = (long) n * rowBytes;
                if (values.capacity() < len) {
                    throw new DensewireException(Category.LENGTH_MISMATCH, "the value buffer holds " + values.capacity()
                            + " bytes, " + n + " rows need " + len, values.capacity(), "embedding");
                }
                byte[] chunk = new byte[(int) len];
                values.getBytes(0, chunk);
                data.writeBytes(chunk);
                rows += n;
                batches++;
            }
            if (batches == 0) {
                throw new DensewireException(Category.TRUNCATED, "the Arrow stream ends before its record batch",
                        body.length, null);
            }
            String model = meta.get("densewire.model");
            Embeddings.Usage usage = null;
            if (meta.containsKey("densewire.prompt_tokens") || meta.containsKey("densewire.total_tokens")) {
                usage = new Embeddings.Usage(count(meta, "densewire.prompt_tokens"), count(meta, "densewire.total_tokens"));
            }
            return new Embeddings(Tensor.of(dtype, rows, (int) d, data.toByteArray()), model, usage,
                    meta.get("densewire.quantization"));
        } catch (IOException e) {
            throw failure(body, in, e, "cannot read the Arrow stream");
        } catch (IndexOutOfBoundsException e) { // found by TensorArrowFuzzTest
            throw shortBuffer(e);
        }
    }

    /** A buffer shorter than its batch's row count needs (Arrow's bounds check, reading validity or values). */
    static DensewireException shortBuffer(IndexOutOfBoundsException e) {
        return new DensewireException(Category.MALFORMED, "a buffer of a record batch is shorter than its row count needs: "
                + e.getMessage(), -1, null, e);
    }

    private static final byte[] END_OF_STREAM = {-1, -1, -1, -1, 0, 0, 0, 0};

    /**
     * The stream may simply end, or end with the 8-byte end-of-stream marker (or the legacy 4 zero bytes);
     * a body that stops inside the marker was cut short (SPEC.md section 10), which Arrow's reader does not
     * report by itself.
     */
    static void checkEndOfStream(byte[] body, int start) {
        int tail = body.length - start;
        if (tail <= 0 || tail >= END_OF_STREAM.length) {
            return;
        }
        boolean legacy = tail == 4 && body[start] == 0 && body[start + 1] == 0 && body[start + 2] == 0 && body[start + 3] == 0;
        if (!legacy && Arrays.equals(body, start, body.length, END_OF_STREAM, 0, tail)) {
            throw new DensewireException(Category.TRUNCATED, "the Arrow stream ends inside its end-of-stream marker ("
                    + tail + " of 8 bytes)", body.length, null);
        }
    }

    /**
     * What a decoder may allocate: the vectors of a valid stream are slices of its body, so a stream whose record
     * batch declares far more rows than its buffers hold (Arrow then reallocates them to that size) is refused
     * here instead of running the JVM out of memory (found by the Jazzer target TensorArrowFuzzTest).
     */
    static long decodeLimit(byte[] body) {
        return (1L << 20) + 8L * body.length;
    }

    /** A failure is truncation when the reader ran into the end of the body, else a malformed stream. */
    static DensewireException failure(byte[] body, EofTrackingStream in, Exception e, String what) {
        if (e instanceof DensewireException) {
            return (DensewireException) e;
        }
        if (e instanceof org.apache.arrow.memory.OutOfMemoryException) {
            return new DensewireException(Category.MALFORMED, what + ": the stream declares more values than its body holds",
                    -1, null, e);
        }
        boolean eof = in.hitEnd || e instanceof EOFException;
        return new DensewireException(eof ? Category.TRUNCATED : Category.MALFORMED, what + ": " + e.getMessage(),
                eof ? body.length : -1, null, e);
    }

    /** Remembers whether a read asked for bytes past the end of the body. */
    static final class EofTrackingStream extends ByteArrayInputStream {
        boolean hitEnd;

        EofTrackingStream(byte[] body) {
            super(body);
        }

        int position() {
            return pos;
        }

        @Override
        public synchronized int read() {
            int b = super.read();
            hitEnd |= b < 0;
            return b;
        }

        @Override
        public synchronized int read(byte[] b, int off, int len) {
            int n = super.read(b, off, len);
            hitEnd |= len > 0 && n < len;
            return n;
        }

        @Override
        public int readNBytes(byte[] b, int off, int len) {
            int n = super.readNBytes(b, off, len);
            hitEnd |= n < len;
            return n;
        }
    }

    static long count(Map<String, String> meta, String key) {
        String v = meta.get(key);
        try {
            return v == null ? 0 : Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new DensewireException(Category.INVALID_FIELD, "not an integer: " + v, -1, key);
        }
    }

    static Dtype dtypeOf(Field field, Map<String, String> meta) {
        String name = field.getMetadata() != null ? field.getMetadata().get("densewire.dtype") : null;
        if (name == null) {
            name = meta.get("densewire.dtype");
        }
        if (name != null) {
            return Dtype.fromWireName(name, "densewire.dtype");
        }
        // without densewire metadata: infer from the Arrow type (bfloat16 cannot be told from uint16)
        ArrowType t = field.getType();
        if (t instanceof ArrowType.FixedSizeBinary) {
            return Dtype.BINARY;
        }
        if (t instanceof ArrowType.FixedSizeList) {
            ArrowType item = field.getChildren().get(0).getType();
            for (Dtype d : Dtype.values()) {
                if (d != Dtype.BINARY && d != Dtype.BFLOAT16 && itemType(d).equals(item)) {
                    return d;
                }
            }
        }
        throw new DensewireException(Category.INVALID_FIELD, "unsupported Arrow type " + t, -1, "embedding");
    }

    static long dimsOf(Field field, Map<String, String> meta, Dtype dtype) {
        ArrowType t = field.getType();
        String declared = meta.get("densewire.dimensions");
        if (dtype == Dtype.BINARY) {
            if (!(t instanceof ArrowType.FixedSizeBinary)) {
                throw new DensewireException(Category.INVALID_FIELD, "binary needs FixedSizeBinary, got " + t, -1, "embedding");
            }
            int width = ((ArrowType.FixedSizeBinary) t).getByteWidth();
            long d = declared != null ? count(meta, "densewire.dimensions") : width * 8L;
            if (dtype.rowBytes(d) != width) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "densewire.dimensions " + d + " needs "
                        + dtype.rowBytes(d) + " bytes a row, the column has " + width, -1, "densewire.dimensions");
            }
            return d;
        }
        if (!(t instanceof ArrowType.FixedSizeList)) {
            throw new DensewireException(Category.INVALID_FIELD, dtype + " needs FixedSizeList, got " + t, -1, "embedding");
        }
        ArrowType item = field.getChildren().get(0).getType();
        if (!itemType(dtype).equals(item)) {
            throw new DensewireException(Category.INVALID_FIELD, dtype + " needs items of " + itemType(dtype) + ", got "
                    + item, -1, "embedding");
        }
        long d = ((ArrowType.FixedSizeList) t).getListSize();
        if (declared != null && count(meta, "densewire.dimensions") != d) {
            throw new DensewireException(Category.SHAPE_MISMATCH, "densewire.dimensions " + declared
                    + " disagrees with the list size " + d, -1, "densewire.dimensions");
        }
        return d;
    }

    private static ArrowBuf valueBuffer(FieldVector column, Dtype dtype) {
        if (column instanceof FixedSizeBinaryVector) {
            return ((FixedSizeBinaryVector) column).getDataBuffer();
        }
        FieldVector child = ((FixedSizeListVector) column).getDataVector();
        if (child.getNullCount() != 0) {
            throw new DensewireException(Category.INVALID_FIELD, "the embedding items hold nulls", -1, "embedding");
        }
        return ((BaseFixedWidthVector) child).getDataBuffer();
    }

    static ArrowType itemType(Dtype dtype) {
        switch (dtype) {
            case FLOAT32:
                return new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE);
            case FLOAT16:
                return new ArrowType.FloatingPoint(FloatingPointPrecision.HALF);
            case FLOAT64:
                return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
            case BFLOAT16:
                return new ArrowType.Int(16, false);
            case INT8:
                return new ArrowType.Int(8, true);
            case UINT8:
                return new ArrowType.Int(8, false);
            default:
                throw new IllegalArgumentException(dtype.toString());
        }
    }

    // ------------------------------------------------------------------ encoding

    /** A bare tensor as an Arrow IPC stream. */
    public static byte[] encode(Tensor tensor) {
        return encode(Embeddings.of(tensor));
    }

    /** An Arrow IPC stream: schema with densewire metadata, one record batch, end-of-stream marker. */
    public static byte[] encode(Embeddings embeddings) {
        Tensor t = embeddings.tensor();
        Dtype dtype = t.dtype();
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("densewire.version", "1");
        meta.put("densewire.dtype", dtype.wireName());
        meta.put("densewire.dimensions", Integer.toString(t.dims()));
        if (embeddings.model() != null) {
            meta.put("densewire.model", embeddings.model());
        }
        if (embeddings.usage() != null) {
            meta.put("densewire.prompt_tokens", Long.toString(embeddings.usage().promptTokens()));
            meta.put("densewire.total_tokens", Long.toString(embeddings.usage().totalTokens()));
        }
        if (embeddings.quantization() != null) {
            meta.put("densewire.quantization", embeddings.quantization());
        }
        Map<String, String> fieldMeta = Map.of("densewire.dtype", dtype.wireName());
        Field field;
        if (dtype == Dtype.BINARY) {
            field = new Field("embedding", new FieldType(false, new ArrowType.FixedSizeBinary(t.rowBytes()), null, fieldMeta), null);
        } else {
            Field item = new Field("item", new FieldType(false, itemType(dtype), null), null);
            field = new Field("embedding", new FieldType(false, new ArrowType.FixedSizeList(t.dims()), null, fieldMeta),
                    List.of(item));
        }
        Schema schema = new Schema(List.of(field), meta);
        ByteArrayOutputStream out = new ByteArrayOutputStream(t.byteLength() + 1024);
        try (BufferAllocator alloc = ROOT.newChildAllocator("densewire-encode", 0, Long.MAX_VALUE);
             VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc)) {
            int n = t.rows();
            FieldVector column = root.getVector("embedding");
            byte[] bytes = t.toByteArray();
            if (column instanceof FixedSizeBinaryVector) {
                FixedSizeBinaryVector v = (FixedSizeBinaryVector) column;
                v.allocateNew(n);
                fill(v.getDataBuffer(), v.getValidityBuffer(), bytes, n);
                v.setValueCount(n);
            } else {
                FixedSizeListVector list = (FixedSizeListVector) column;
                list.allocateNew();
                BaseFixedWidthVector child = (BaseFixedWidthVector) list.getDataVector();
                int items = n * t.dims();
                child.allocateNew(items);
                fill(child.getDataBuffer(), child.getValidityBuffer(), bytes, items);
                child.setValueCount(items);
                for (int i = 0; i < n; i++) {
                    list.setNotNull(i);
                }
                list.setValueCount(n);
            }
            root.setRowCount(n);
            try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, out)) {
                writer.start();
                writer.writeBatch();
                writer.end();
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return out.toByteArray();
    }

    static void fill(ArrowBuf data, ArrowBuf validity, byte[] bytes, int count) {
        data.setBytes(0, bytes);
        for (int i = 0; i < count; i++) {
            org.apache.arrow.vector.BitVectorHelper.setBit(validity, i);
        }
    }

}
