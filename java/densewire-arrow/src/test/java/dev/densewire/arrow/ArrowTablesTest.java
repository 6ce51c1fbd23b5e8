package dev.densewire.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.Column;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.LargeVarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;

class ArrowTablesTest {
    @Test
    void everyTypeRoundTripsKeepingNaNPayloads() {
        float nan = Float.intBitsToFloat(0x7fa00001);
        Table t = Table.of("t", 2,
                Column.ofBools("b", true, false),
                Column.ofInt32("i", 1, -1),
                Column.ofInt64("l", Long.MIN_VALUE, Long.MAX_VALUE),
                Column.ofFloat32("f", nan, -0.0f),
                Column.ofFloat64("d", Double.NaN, 1.5),
                Column.strings("s", List.of("é", "")),
                Column.ofUuids("u", UUID.randomUUID(), UUID.randomUUID()),
                Column.ofVectors("v", 3, new float[] {1, 2, nan, 4, 5, 6}));
        Table back = ArrowTables.decode(ArrowTables.encode(t));
        assertEquals(t, back);
        assertEquals(0x7fa00001, Float.floatToRawIntBits(back.column("v").vectors().get(2)));
    }

    /** A stream written with Arrow itself: LargeUtf8 is read as string; nulls and a mismatched type are refused. */
    private static byte[] stream(Field field, int n, java.util.function.Consumer<VectorSchemaRoot> fill) throws Exception {
        try (BufferAllocator alloc = new RootAllocator();
             VectorSchemaRoot root = VectorSchemaRoot.create(new Schema(List.of(field), Map.of("densewire.table", "x")), alloc)) {
            fill.accept(root);
            root.setRowCount(n);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, out)) {
                w.start();
                w.writeBatch();
                w.end();
            }
            return out.toByteArray();
        }
    }

    @Test
    void largeUtf8IsAString() throws Exception {
        byte[] body = stream(new Field("s", new FieldType(false, ArrowType.LargeUtf8.INSTANCE, null, Map.of("densewire.type", "string")), null),
                2, root -> {
                    LargeVarCharVector v = (LargeVarCharVector) root.getVector(0);
                    v.allocateNew();
                    v.setSafe(0, "a".getBytes());
                    v.setSafe(1, "bc".getBytes());
                    v.setValueCount(2);
                });
        Table t = ArrowTables.decode(body);
        assertEquals("x", t.name());
        assertEquals(List.of("a", "bc"), t.column("s").strings());
    }

    @Test
    void nullsAndMismatchedTypesAreInvalidFieldsOnTheColumn() throws Exception {
        byte[] nulls = stream(new Field("i", new FieldType(true, new ArrowType.Int(32, true), null, Map.of("densewire.type", "int32")), null),
                2, root -> {
                    IntVector v = (IntVector) root.getVector(0);
                    v.allocateNew(2);
                    v.set(0, 1);
                    v.setNull(1);
                    v.setValueCount(2);
                });
        DensewireException e = assertThrows(DensewireException.class, () -> ArrowTables.decode(nulls));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("i", e.field().orElse(null));
        byte[] mismatch = stream(new Field("f", new FieldType(false, new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE), null,
                Map.of("densewire.type", "float64")), null), 1, root -> {
                    Float4Vector v = (Float4Vector) root.getVector(0);
                    v.allocateNew(1);
                    v.set(0, 1f);
                    v.setValueCount(1);
                });
        e = assertThrows(DensewireException.class, () -> ArrowTables.decode(mismatch));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("f", e.field().orElse(null));
        byte[] cut = ArrowTables.encode(Table.of("t", 1, Column.ofInt32("i", 7)));
        e = assertThrows(DensewireException.class, () -> ArrowTables.decode(Arrays.copyOf(cut, cut.length - 20)));
        assertEquals(Category.TRUNCATED, e.category());
    }

    /**
     * Found by the Jazzer targets TensorArrowFuzzTest and TableArrowFuzzTest: a message declaring more bytes than
     * the body holds (0x7fffffff as a legacy length, or after the continuation marker) made Arrow's reader allocate
     * 2 GiB and run the JVM out of memory. It is truncated at the body's length, before Arrow reads it.
     */
    @Test
    void aMessageLongerThanTheBodyIsTruncatedWithoutAllocatingIt() {
        for (String hex : new String[] {"ffffff7f0000000000000000", "ffffffffffffff7f00000000"}) {
            byte[] body = java.util.HexFormat.of().parseHex(hex);
            DensewireException t = assertThrows(DensewireException.class, () -> ArrowTables.decode(body));
            assertEquals(Category.TRUNCATED, t.category(), t.getMessage());
            assertEquals(12, t.offset().orElse(-1));
            DensewireException e = assertThrows(DensewireException.class, () -> ArrowCodec.decode(body));
            assertEquals(Category.TRUNCATED, e.category(), e.getMessage());
            assertEquals(12, e.offset().orElse(-1));
        }
        byte[] negative = java.util.HexFormat.of().parseHex("ffffffff00000080");
        assertEquals(Category.MALFORMED, assertThrows(DensewireException.class, () -> ArrowTables.decode(negative)).category());
    }

    /**
     * Found by the Jazzer target TensorArrowFuzzTest: a golden tensor stream whose record batch declares about 2^36
     * rows made Arrow reallocate its vectors to 500 GB. Decoders allocate at most what the body could hold, so
     * such a stream is malformed.
     */
    @Test
    void aBatchDeclaringMoreRowsThanItsBuffersHoldIsMalformed() throws Exception {
        byte[] body;
        try (var in = ArrowTablesTest.class.getResourceAsStream("/finding-batch-length-beyond-buffers.arrows")) {
            body = in.readAllBytes();
        }
        DensewireException e = assertThrows(DensewireException.class, () -> ArrowCodec.decode(body));
        assertEquals(Category.MALFORMED, e.category(), e.getMessage());
    }

    /**
     * Found by the Jazzer target TableArrowFuzzTest: the golden table.arrow.all_types with five bytes mutated so
     * that a field has no name: Arrow reads a null name, which was dereferenced. A column without a name is an
     * invalid field.
     */
    @Test
    void aFieldWithoutANameIsInvalid() throws Exception {
        byte[] body;
        try (var in = ArrowTablesTest.class.getResourceAsStream("/finding-field-without-name.arrows")) {
            body = in.readAllBytes();
        }
        DensewireException e = assertThrows(DensewireException.class, () -> ArrowTables.decode(body));
        assertEquals(Category.INVALID_FIELD, e.category(), e.getMessage());
        assertTrue(e.field().orElse("").matches("columns\\[\\d+\\]\\.name"), e.getMessage());
    }

    /**
     * Found by the Jazzer target TensorArrowFuzzTest: a record batch whose validity buffer is shorter than its row
     * count needs made Arrow's bounds check throw IndexOutOfBoundsException out of the decoder. Malformed.
     */
    @Test
    void aBufferShorterThanTheBatchIsMalformed() throws Exception {
        byte[] body;
        try (var in = ArrowTablesTest.class.getResourceAsStream("/finding-validity-buffer-too-short.arrows")) {
            body = in.readAllBytes();
        }
        DensewireException e = assertThrows(DensewireException.class, () -> ArrowCodec.decode(body));
        assertEquals(Category.MALFORMED, e.category(), e.getMessage());
    }
}
