package dev.densewire.arrow;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Ragged;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedTensor;
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.Tensor;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Ragged and sparse Arrow IPC streams (SPEC.md 20.7): one non-nullable column {@code embedding} of
 * {@code List<FixedSizeList<T, d>>} (ragged) or {@code Struct<indices: List<UInt32>, values: List<T>>} (sparse,
 * {@code densewire.vocabulary_size} in the field metadata), {@code densewire.kind} in the schema metadata. As
 * {@link ArrowCodec}, decoding copies the value buffers once.
 */
public final class RaggedArrow {
    private RaggedArrow() {
    }

    private static DensewireException bad(String why) {
        return new DensewireException(Category.INVALID_FIELD, why, -1, "embedding");
    }

    // ------------------------------------------------------------------ encoding

    private static Map<String, String> meta(String kind, Dtype dtype, long dims, String model, Embeddings.Usage u) {
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("densewire.version", "1");
        meta.put("densewire.kind", kind);
        meta.put("densewire.dtype", dtype.wireName());
        meta.put("densewire.dimensions", Long.toString(dims));
        if (model != null) {
            meta.put("densewire.model", model);
        }
        if (u != null) {
            meta.put("densewire.prompt_tokens", Long.toString(u.promptTokens()));
            meta.put("densewire.total_tokens", Long.toString(u.totalTokens()));
        }
        return meta;
    }

    private static Field rowsField(Dtype dtype, int d) {
        if (dtype == Dtype.BINARY) {
            return new Field("item", new FieldType(false, new ArrowType.FixedSizeBinary((int) dtype.rowBytes(d)), null), null);
        }
        Field item = new Field("item", new FieldType(false, ArrowCodec.itemType(dtype), null), null);
        return new Field("item", new FieldType(false, new ArrowType.FixedSizeList(d), null), List.of(item));
    }

    private static Field list(String name, Field item, Map<String, String> meta) {
        return new Field(name, new FieldType(false, ArrowType.List.INSTANCE, null, meta), List.of(item));
    }

    private static byte[] write(Schema schema, java.util.function.Consumer<VectorSchemaRoot> fill) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (BufferAllocator alloc = ArrowCodec.ROOT.newChildAllocator("densewire-encode", 0, Long.MAX_VALUE);
             VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc)) {
            fill.accept(root);
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

    /** Fills {@code list}'s offsets (and validity) for {@code offsets}. */
    private static void offsets(ListVector list, int[] offsets) {
        int n = offsets.length - 1;
        for (int i = 0; i < n; i++) {
            list.startNewValue(i);
            list.endValue(i, offsets[i + 1] - offsets[i]);
        }
        list.setValueCount(n);
    }

    /** Fills a fixed-width vector (or fixed-size list of them) with {@code count} items of {@code bytes}. */
    private static void fillRows(FieldVector v, byte[] bytes, int rows, int d) {
        if (v instanceof FixedSizeBinaryVector) {
            FixedSizeBinaryVector b = (FixedSizeBinaryVector) v;
            b.allocateNew(rows);
            ArrowCodec.fill(b.getDataBuffer(), b.getValidityBuffer(), bytes, rows);
            b.setValueCount(rows);
        } else if (v instanceof FixedSizeListVector) {
            FixedSizeListVector l = (FixedSizeListVector) v;
            l.allocateNew();
            BaseFixedWidthVector child = (BaseFixedWidthVector) l.getDataVector();
            child.allocateNew(rows * d);
            ArrowCodec.fill(child.getDataBuffer(), child.getValidityBuffer(), bytes, rows * d);
            child.setValueCount(rows * d);
            for (int i = 0; i < rows; i++) {
                l.setNotNull(i);
            }
            l.setValueCount(rows);
        } else {
            BaseFixedWidthVector f = (BaseFixedWidthVector) v;
            f.allocateNew(rows);
            ArrowCodec.fill(f.getDataBuffer(), f.getValidityBuffer(), bytes, rows);
            f.setValueCount(rows);
        }
    }

    /** A ragged response as an Arrow IPC stream. */
    public static byte[] encode(RaggedEmbeddings e) {
        RaggedTensor t = e.tensor();
        Field field = list("embedding", rowsField(t.dtype(), t.dims()), Map.of("densewire.dtype", t.dtype().wireName()));
        Schema schema = new Schema(List.of(field), meta("ragged", t.dtype(), t.dims(), e.model(), e.usage()));
        return write(schema, root -> {
            ListVector list = (ListVector) root.getVector("embedding");
            list.allocateNew();
            int[] off = t.offsets();
            fillRows(list.getDataVector(), t.rows().toByteArray(), off[off.length - 1], t.dims());
            offsets(list, off);
            root.setRowCount(t.size());
        });
    }

    /** A sparse response as an Arrow IPC stream. */
    public static byte[] encode(SparseEmbeddings e) {
        SparseTensor t = e.tensor();
        Field indices = list("indices", new Field("item", new FieldType(false, new ArrowType.Int(32, false), null), null), null);
        Field values = list("values", new Field("item", new FieldType(false, ArrowCodec.itemType(t.dtype()), null), null), null);
        Map<String, String> fm = new LinkedHashMap<>();
        fm.put("densewire.dtype", t.dtype().wireName());
        fm.put("densewire.vocabulary_size", Long.toString(t.vocabularySize()));
        Field field = new Field("embedding", new FieldType(false, ArrowType.Struct.INSTANCE, null, fm), List.of(indices, values));
        Schema schema = new Schema(List.of(field), meta("sparse", t.dtype(), t.vocabularySize(), e.model(), e.usage()));
        return write(schema, root -> {
            StructVector st = (StructVector) root.getVector("embedding");
            st.allocateNew();
            int[] off = t.offsets();
            int k = t.nonZeros();
            ListVector il = st.getChild("indices", ListVector.class);
            ListVector vl = st.getChild("values", ListVector.class);
            byte[] ib = new byte[4 * k];
            t.indexBytes().get(ib);
            fillRows(il.getDataVector(), ib, k, 1);
            fillRows(vl.getDataVector(), t.values().toByteArray(), k, 1);
            offsets(il, off);
            offsets(vl, off);
            for (int i = 0; i < t.size(); i++) {
                st.setIndexDefined(i);
            }
            st.setValueCount(t.size());
            root.setRowCount(t.size());
        });
    }

    // ------------------------------------------------------------------ decoding

    private interface BatchReader {
        void read(FieldVector column, int rows);
    }

    /** Reads the stream: its kind checked, each record batch's {@code embedding} column handed to {@code batch}. */
    private static Map<String, String> read(byte[] body, String kind, Field[] fieldOut,
            java.util.function.BiFunction<Field, Map<String, String>, BatchReader> reader) {
        ArrowFraming.check(body);
        ArrowCodec.EofTrackingStream in = new ArrowCodec.EofTrackingStream(body);
        try (BufferAllocator alloc = ArrowCodec.ROOT.newChildAllocator("densewire-decode", 0, ArrowCodec.decodeLimit(body));
             ArrowStreamReader r = new ArrowStreamReader(in, alloc)) {
            VectorSchemaRoot root;
            try {
                root = r.getVectorSchemaRoot();
            } catch (IOException | RuntimeException e) {
                throw ArrowCodec.failure(body, in, e, "cannot read the Arrow schema");
            }
            Schema schema = root.getSchema();
            Map<String, String> meta = schema.getCustomMetadata() == null ? Map.of() : schema.getCustomMetadata();
            Ragged.checkKind(meta.get("densewire.kind"), kind, "densewire.kind");
            Field field = schema.getFields().stream().filter(f -> "embedding".equals(f.getName())).findFirst()
                    .orElseThrow(() -> bad("no column named embedding"));
            fieldOut[0] = field;
            BatchReader batch = reader.apply(field, meta);
            int batches = 0;
            while (true) {
                boolean loaded;
                int start = in.position();
                try {
                    loaded = r.loadNextBatch();
                } catch (IOException | RuntimeException e) {
                    throw ArrowCodec.failure(body, in, e, "cannot read an Arrow record batch");
                }
                if (!loaded) {
                    ArrowCodec.checkEndOfStream(body, start);
                    break;
                }
                FieldVector column = root.getVector("embedding");
                if (column.getNullCount() != 0) {
                    throw bad("the embedding column holds nulls");
                }
                batch.read(column, root.getRowCount());
                batches++;
            }
            if (batches == 0) {
                throw new DensewireException(Category.TRUNCATED, "the Arrow stream ends before its record batch",
                        body.length, null);
            }
            return meta;
        } catch (IOException e) {
            throw ArrowCodec.failure(body, in, e, "cannot read the Arrow stream");
        } catch (IndexOutOfBoundsException e) {
            throw ArrowCodec.shortBuffer(e);
        }
    }

    private static Embeddings.Usage usage(Map<String, String> meta) {
        if (!meta.containsKey("densewire.prompt_tokens") && !meta.containsKey("densewire.total_tokens")) {
            return null;
        }
        return new Embeddings.Usage(ArrowCodec.count(meta, "densewire.prompt_tokens"),
                ArrowCodec.count(meta, "densewire.total_tokens"));
    }

    /** A list column's offsets rebased and appended (from {@code out}'s last), and its first and last entry. */
    private static int[] listOffsets(ListVector list, int rows, List<Integer> out) {
        ArrowBuf ob = list.getOffsetBuffer();
        int first = ob.getInt(0);
        int base = out.get(out.size() - 1);
        for (int i = 1; i <= rows; i++) {
            int o = ob.getInt(4L * i);
            if (o < first) {
                throw new DensewireException(Category.MALFORMED, "list offsets decrease", -1, "embedding");
            }
            out.add(base + o - first);
        }
        return new int[] {first, ob.getInt(4L * rows)};
    }

    private static byte[] bytes(ArrowBuf b, long from, long len) {
        if (from + len > b.capacity()) {
            throw new DensewireException(Category.MALFORMED, "a value buffer is shorter than its offsets need", -1, "embedding");
        }
        byte[] out = new byte[Math.toIntExact(len)];
        b.getBytes(from, out);
        return out;
    }

    private static int[] toArray(List<Integer> l) {
        return l.stream().mapToInt(Integer::intValue).toArray();
    }

    /** Decodes a ragged Arrow stream. */
    public static RaggedEmbeddings decodeRagged(byte[] body) {
        Field[] field = new Field[1];
        Dtype[] dtype = new Dtype[1];
        long[] dims = new long[1];
        List<Integer> offsets = new ArrayList<>(List.of(0));
        ByteArrayOutputStream rows = new ByteArrayOutputStream();
        Map<String, String> meta = read(body, "ragged", field, (f, schemaMeta) -> {
            if (!(f.getType() instanceof ArrowType.List) || f.getChildren().size() != 1) {
                throw bad("a ragged column is a List, not " + f.getType());
            }
            Field item = f.getChildren().get(0);
            String name = f.getMetadata() != null ? f.getMetadata().get("densewire.dtype") : null;
            if (name == null) {
                name = schemaMeta.get("densewire.dtype");
            }
            dtype[0] = name != null ? Dtype.fromWireName(name, "densewire.dtype") : ArrowCodec.dtypeOf(item, Map.of());
            dims[0] = ArrowCodec.dimsOf(item, schemaMeta, dtype[0]);
            int rb = (int) dtype[0].rowBytes(dims[0]);
            return (column, n) -> {
                ListVector list = (ListVector) column;
                int[] range = listOffsets(list, n, offsets);
                FieldVector child = list.getDataVector();
                if (child.getNullCount() != 0) {
                    throw bad("the embedding rows hold nulls");
                }
                ArrowBuf data = child instanceof FixedSizeListVector
                        ? ((BaseFixedWidthVector) ((FixedSizeListVector) child).getDataVector()).getDataBuffer()
                        : ((FixedSizeBinaryVector) child).getDataBuffer();
                rows.writeBytes(bytes(data, (long) range[0] * rb, (long) (range[1] - range[0]) * rb));
            };
        });
        int[] off = toArray(offsets);
        Tensor t = Tensor.of(dtype[0], off[off.length - 1], (int) dims[0], rows.toByteArray());
        return new RaggedEmbeddings(RaggedTensor.of(off, t), meta.get("densewire.model"), usage(meta));
    }

    /** Decodes a sparse Arrow stream. */
    public static SparseEmbeddings decodeSparse(byte[] body) {
        Field[] field = new Field[1];
        Dtype[] dtype = new Dtype[1];
        long[] vocab = new long[1];
        List<Integer> offsets = new ArrayList<>(List.of(0));
        ByteArrayOutputStream idx = new ByteArrayOutputStream();
        ByteArrayOutputStream vals = new ByteArrayOutputStream();
        Map<String, String> meta = read(body, "sparse", field, (f, schemaMeta) -> {
            if (!(f.getType() instanceof ArrowType.Struct)) {
                throw bad("a sparse column is a Struct, not " + f.getType());
            }
            Map<String, String> fm = f.getMetadata() == null ? Map.of() : f.getMetadata();
            String name = fm.get("densewire.dtype");
            if (name == null) {
                throw bad("densewire.dtype is missing");
            }
            dtype[0] = Dtype.fromWireName(name, "densewire.dtype");
            Ragged.checkValuesDtype(dtype[0], "dtype");
            List<Field> ch = f.getChildren();
            boolean shaped = ch.size() == 2 && ch.get(0).getName().equals("indices") && ch.get(1).getName().equals("values")
                    && isListOf(ch.get(0), new ArrowType.Int(32, false)) && isListOf(ch.get(1), ArrowCodec.itemType(dtype[0]));
            if (!shaped) {
                throw bad("a sparse " + dtype[0].wireName() + " column is Struct<indices: List<UInt32>, values: List<"
                        + ArrowCodec.itemType(dtype[0]) + ">>");
            }
            String v = fm.get("densewire.vocabulary_size");
            long vs = -1;
            if (v != null && v.matches("[0-9]{1,19}")) {
                vs = Long.parseLong(v);
            }
            if (vs < 1 || vs > SparseTensor.MAX_VOCABULARY) {
                throw new DensewireException(Category.INVALID_FIELD, "missing or not a decimal from 1 to 2^32", -1,
                        "densewire.vocabulary_size");
            }
            vocab[0] = vs;
            int item = dtype[0].itemBytes();
            return (column, n) -> {
                StructVector st = (StructVector) column;
                ListVector il = (ListVector) st.getChildByOrdinal(0);
                ListVector vl = (ListVector) st.getChildByOrdinal(1);
                int before = offsets.size();
                List<Integer> valueOffsets = new ArrayList<>(List.of(offsets.get(before - 1)));
                int[] ir = listOffsets(il, n, offsets);
                int[] vr = listOffsets(vl, n, valueOffsets);
                if (!offsets.subList(before - 1, offsets.size()).equals(valueOffsets)) {
                    throw new DensewireException(Category.SHAPE_MISMATCH, "a row's indices and values differ in length",
                            -1, "embedding");
                }
                idx.writeBytes(bytes(((UInt4Vector) il.getDataVector()).getDataBuffer(), 4L * ir[0], 4L * (ir[1] - ir[0])));
                vals.writeBytes(bytes(((BaseFixedWidthVector) vl.getDataVector()).getDataBuffer(), (long) item * vr[0],
                        (long) item * (vr[1] - vr[0])));
            };
        });
        int[] off = toArray(offsets);
        SparseTensor t = Ragged.sparse(dtype[0], vocab[0], off, ByteBuffer.wrap(idx.toByteArray()).order(ByteOrder.LITTLE_ENDIAN),
                ByteBuffer.wrap(vals.toByteArray()), 0, 0);
        return new SparseEmbeddings(t, meta.get("densewire.model"), usage(meta));
    }

    private static boolean isListOf(Field f, ArrowType item) {
        return f.getType() instanceof ArrowType.List && f.getChildren().size() == 1
                && f.getChildren().get(0).getType().equals(item);
    }
}
