package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException.Category;
import dev.densewire.PgCopy.Columns;
import dev.densewire.PgCopy.IdType;
import dev.densewire.PgCopy.VectorType;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** PgCopy beyond the golden cases: round trips of every type, chunked streams, ids of every kind, error fields. */
class PgCopyTest {
    private static final Random RNG = new Random(1806);

    private static Tensor randomFloats(int n, int d) {
        float[] v = new float[n * d];
        for (int k = 0; k < v.length; k++) {
            v[k] = (float) RNG.nextGaussian();
        }
        return Tensor.ofFloats(n, d, v);
    }

    private static byte[] readAll(InputStream in, int bufferSize) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[bufferSize];
        for (int k; (k = in.read(buf, 0, buf.length)) != -1; ) {
            out.write(buf, 0, k);
        }
        return out.toByteArray();
    }

    @Test
    void vectorRoundTripIsBitExactWithIdsOfEveryType() {
        Tensor t = randomFloats(5, 7);
        List<List<Object>> idSets = List.of(
                Arrays.<Object>asList(1L, null, Long.MIN_VALUE, Long.MAX_VALUE, 0L),
                Arrays.<Object>asList(1, -7, null, Integer.MAX_VALUE, (short) 3),
                Arrays.<Object>asList("a", "", null, "ünïcödé ✓", "x".repeat(300)),
                Arrays.<Object>asList(UUID.randomUUID(), null, UUID.randomUUID(), UUID.randomUUID(), UUID.randomUUID()));
        IdType[] types = {IdType.INT8, IdType.INT4, IdType.TEXT, IdType.UUID};
        for (int i = 0; i < types.length; i++) {
            Columns cols = Columns.of(VectorType.VECTOR).withId(types[i], "key");
            PgCopy.Data back = PgCopy.decode(PgCopy.encode(t, cols, idSets.get(i)), cols);
            assertEquals(t, back.tensor());
            List<Object> want = new ArrayList<>();
            for (Object v : idSets.get(i)) {
                want.add(v instanceof Short ? Integer.valueOf((Short) v) : v);
            }
            assertEquals(want, back.ids(), types[i].toString());
        }
    }

    @Test
    void halfvecBitAndSparsevecRoundTrips() {
        Tensor t = randomFloats(4, 19);
        Columns half = Columns.of(VectorType.HALFVEC);
        assertEquals(t.convert(Dtype.FLOAT16), PgCopy.decode(PgCopy.encode(t, half), half).tensor());
        Tensor f16 = t.convert(Dtype.FLOAT16);
        assertEquals(f16, PgCopy.decode(PgCopy.encode(f16, half), half).tensor());

        Columns bit = Columns.of(VectorType.BIT);
        assertEquals(t.convert(Dtype.BINARY), PgCopy.decode(PgCopy.encode(t, bit), bit).tensor());

        float[] sparse = new float[3 * 10];
        sparse[2] = 1.5f;
        sparse[9] = -0.25f;
        sparse[10] = -0.0f; // left out: read back as +0.0
        sparse[25] = 3f;
        Columns sv = Columns.of(VectorType.SPARSEVEC);
        byte[] body = PgCopy.encode(Tensor.ofFloats(3, 10, sparse), sv);
        sparse[10] = 0f;
        assertEquals(Tensor.ofFloats(3, 10, sparse), PgCopy.decode(body, sv).tensor());
        // row 1 has no non-zero value: a sparsevec of 12 bytes
        assertEquals(21 + 3 * 6 + (12 + 16) + 12 + (12 + 8), body.length);
    }

    @Test
    void aSparsevecDenseTensorIsBoundedByTheStream() {
        // one row of sparsevec(1e8) with no non-zero value: 26 bytes for 400 MB of zeros (under the
        // 2 GB of one Java array, so only the bound refuses it)
        ByteBuffer b = ByteBuffer.allocate(19 + 2 + 4 + 12 + 2);
        b.put("PGCOPY\n\377\r\n\0".getBytes(StandardCharsets.ISO_8859_1)).putInt(0).putInt(0);
        b.putShort((short) 1).putInt(12).putInt(100_000_000).putInt(0).putInt(0).putShort((short) -1);
        Columns sv = Columns.of(VectorType.SPARSEVEC);
        DensewireException e = assertThrows(DensewireException.class, () -> PgCopy.decode(b.array(), sv));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("embedding", e.field().orElse(null));
        // a sparsevec(30522) row, SPLADE's vocabulary, is within the bound
        b.putInt(25, 30_522);
        assertEquals(30_522, PgCopy.decode(b.array(), sv).tensor().dims());
    }

    @Test
    void halfvecFromFloat64RoundsOnceDirectly() {
        double x = 1 + 0x1p-11 + 0x1p-40; // above the tie between 1 and 1 + 2^-10; through float32 it would be the tie
        Columns half = Columns.of(VectorType.HALFVEC);
        Tensor got = PgCopy.decode(PgCopy.encode(Tensor.ofDoubles(1, 1, new double[] {x}), half), half).tensor();
        assertEquals((short) 0x3C01, got.asShortBuffer().get(0));
        Tensor viaFloat = PgCopy.decode(PgCopy.encode(Tensor.ofFloats(1, 1, new float[] {(float) x}), half), half).tensor();
        assertEquals((short) 0x3C00, viaFloat.asShortBuffer().get(0));
    }

    @Test
    void bitFromFloat64TestsTheDoubleItself() {
        Columns bit = Columns.of(VectorType.BIT);
        Tensor got = PgCopy.decode(PgCopy.encode(Tensor.ofDoubles(1, 3, new double[] {1e-300, -1e-300, Double.NaN}), bit), bit)
                .tensor();
        assertArrayEquals(new byte[] {(byte) 0x80}, got.toByteArray());
        Tensor int8 = Tensor.of(Dtype.INT8, 1, 3, new byte[] {1, 0, -1});
        assertArrayEquals(new byte[] {(byte) 0x80}, PgCopy.decode(PgCopy.encode(int8, bit), bit).tensor().toByteArray());
    }

    @Test
    void chunkedStreamIsTheWholeStream() throws IOException {
        Tensor t = randomFloats(10, 5);
        List<Object> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add(i % 3 == 0 ? null : "row-" + i);
        }
        Columns cols = Columns.of(VectorType.VECTOR).withId(IdType.TEXT, "doc");
        byte[] whole = PgCopy.encode(t, cols, ids);
        for (int chunk : new int[] {1, 3, 10, 64}) {
            for (int buffer : new int[] {1, 7, 8192}) {
                assertArrayEquals(whole, readAll(PgCopy.inputStream(t, cols, ids, chunk), buffer), chunk + "/" + buffer);
            }
        }
        InputStream in = PgCopy.inputStream(t, cols, ids, 4);
        ByteArrayOutputStream oneByOne = new ByteArrayOutputStream();
        for (int b; (b = in.read()) != -1; ) {
            oneByOne.write(b);
        }
        assertArrayEquals(whole, oneByOne.toByteArray());
        assertEquals(-1, in.read(new byte[4], 0, 4));
        Columns empty = Columns.of(VectorType.VECTOR);
        assertArrayEquals(PgCopy.encode(randomFloats(0, 3), empty), readAll(PgCopy.inputStream(randomFloats(0, 3), empty, null, 5), 3));
    }

    @Test
    void aBadChunkFailsWhenReadWithItsAbsoluteRowAfterTheGoodChunks() throws IOException {
        float[] v = new float[10 * 2];
        Arrays.fill(v, 1f);
        v[7 * 2 + 1] = Float.POSITIVE_INFINITY;
        InputStream in = PgCopy.inputStream(Tensor.ofFloats(10, 2, v), Columns.of(VectorType.VECTOR), null, 3);
        byte[] buf = new byte[19 + 2 * 3 * (2 + 4 + 12)]; // the header and the first two chunks
        assertEquals(buf.length, in.readNBytes(buf, 0, buf.length));
        DensewireException e = assertThrows(DensewireException.class, () -> in.read(new byte[100]));
        assertEquals(Category.NON_FINITE, e.category());
        assertEquals("embedding[7][1]", e.field().orElse(null));
        assertEquals("embedding[7][1]", assertThrows(DensewireException.class,
                () -> PgCopy.encodeTuples(Tensor.ofFloats(1, 2, new float[] {1f, Float.NaN}), Columns.of(VectorType.VECTOR), null, 7))
                .field().orElse(null));
    }

    @Test
    void idErrorsNameTheRow() {
        Tensor t = randomFloats(3, 2);
        Columns int8 = Columns.of(VectorType.VECTOR).withId(IdType.INT8, "id");
        DensewireException kind = assertThrows(DensewireException.class, () -> PgCopy.encode(t, int8, Arrays.asList(1L, 2.5, 3L)));
        assertEquals(Category.INVALID_FIELD, kind.category());
        assertEquals("id[1]", kind.field().orElse(null));
        DensewireException range = assertThrows(DensewireException.class,
                () -> PgCopy.encode(t, int8, Arrays.asList(1L, 2L, BigInteger.ONE.shiftLeft(63))));
        assertEquals("id[2]", range.field().orElse(null));
        assertTrue(range.getMessage().contains("out of the int8 range"), range.getMessage());
        PgCopy.encode(t, int8, Arrays.asList(BigInteger.ONE.shiftLeft(63).negate(), 0, (byte) 1)); // in range

        DensewireException count = assertThrows(DensewireException.class, () -> PgCopy.encode(t, int8, List.of(1L, 2L)));
        assertEquals(Category.SHAPE_MISMATCH, count.category());
        assertEquals("id", count.field().orElse(null));
        DensewireException none = assertThrows(DensewireException.class, () -> PgCopy.encode(t, int8, null));
        assertEquals(Category.INVALID_FIELD, none.category());
        assertEquals("id", none.field().orElse(null));

        Columns text = Columns.of(VectorType.VECTOR).withId(IdType.TEXT, "doc");
        assertEquals("doc[0]", assertThrows(DensewireException.class, () -> PgCopy.encode(t, text, Arrays.asList(5, "b", "c")))
                .field().orElse(null));
        Columns uuid = Columns.of(VectorType.VECTOR).withId(IdType.UUID, "u");
        assertEquals("u[2]", assertThrows(DensewireException.class,
                () -> PgCopy.encode(t, uuid, Arrays.asList(null, "00112233-4455-6677-8899-aabbccddeeff", "1-2-3-4-5")))
                .field().orElse(null));
        UUID u = UUID.fromString("00112233-4455-6677-8899-aabbccddeeff");
        assertEquals(List.of(u, u, u), PgCopy.decode(PgCopy.encode(t, uuid,
                List.of(u, "00112233445566778899AABBCCDDEEFF", "00112233-4455-6677-8899-aabbccddeeff")), uuid).ids());
    }

    @Test
    void columnErrors() {
        DensewireException dims = assertThrows(DensewireException.class,
                () -> PgCopy.encode(randomFloats(1, 16001), Columns.of(VectorType.VECTOR, "emb")));
        assertEquals(Category.INVALID_FIELD, dims.category());
        assertEquals("emb", dims.field().orElse(null));
        float[] few = new float[16001];
        few[16000] = 1f;
        PgCopy.encode(Tensor.ofFloats(1, 16001, few), Columns.of(VectorType.SPARSEVEC)); // sparsevec dimensions go further

        float[] dense = new float[2 * 16001];
        Arrays.fill(dense, 16001, dense.length, 1f);
        DensewireException nnz = assertThrows(DensewireException.class,
                () -> PgCopy.encode(Tensor.ofFloats(2, 16001, dense), Columns.of(VectorType.SPARSEVEC)));
        assertEquals(Category.INVALID_FIELD, nnz.category());
        assertEquals("embedding[1]", nnz.field().orElse(null));

        DensewireException int8 = assertThrows(DensewireException.class,
                () -> PgCopy.encode(Tensor.of(Dtype.INT8, 1, 2, new byte[2]), Columns.of(VectorType.VECTOR)));
        assertEquals(Category.INVALID_FIELD, int8.category());

        DensewireException overflow = assertThrows(DensewireException.class,
                () -> PgCopy.encode(Tensor.ofFloats(1, 2, new float[] {1f, 65520f}), Columns.of(VectorType.HALFVEC)));
        assertEquals(Category.NON_FINITE, overflow.category());
        assertEquals("embedding[0][1]", overflow.field().orElse(null));
        PgCopy.encode(Tensor.ofFloats(1, 1, new float[] {65519.99f}), Columns.of(VectorType.HALFVEC)); // rounds to 65504
    }

    @Test
    void decodingFromABufferPositionCountsOffsetsFromIt() {
        byte[] stream = PgCopy.encode(randomFloats(2, 3), Columns.of(VectorType.VECTOR));
        byte[] padded = new byte[stream.length + 5];
        System.arraycopy(stream, 0, padded, 5, stream.length);
        ByteBuffer bb = ByteBuffer.wrap(padded).position(5);
        assertEquals(2, PgCopy.decode(bb, Columns.of(VectorType.VECTOR), 0).tensor().rows());
        padded[5 + 26] = 4; // the first vector's d: 0x0003 -> 0x0004, its length word (offset 21) then mismatches
        DensewireException e = assertThrows(DensewireException.class,
                () -> PgCopy.decode(ByteBuffer.wrap(padded).position(5), Columns.of(VectorType.VECTOR), 0));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(21, e.offset().getAsLong());
    }

    @Test
    void aTextIdThatIsNotUtf8IsMalformedAtItsFirstBadByte() {
        Columns cols = Columns.of(VectorType.VECTOR).withId(IdType.TEXT, "doc");
        byte[] stream = PgCopy.encode(randomFloats(1, 1), cols, List.of("abcd"));
        int v = 19 + 2 + 4; // the text's first byte
        assertEquals("abcd", new String(stream, v, 4, StandardCharsets.UTF_8));
        stream[v + 2] = (byte) 0xC3; // a lead byte followed by 'd': not UTF-8
        DensewireException e = assertThrows(DensewireException.class, () -> PgCopy.decode(stream, cols));
        assertEquals(Category.MALFORMED, e.category());
        assertEquals(v + 2, e.offset().getAsLong());
        assertEquals("doc", e.field().orElse(null));
    }

    @Test
    void emptyStreamsAndHeaderExtensions() {
        Columns cols = Columns.of(VectorType.VECTOR).withId(IdType.INT8, "id");
        byte[] empty = PgCopy.encode(randomFloats(0, 384), cols, List.of());
        assertEquals(21, empty.length);
        PgCopy.Data d = PgCopy.decode(ByteBuffer.wrap(empty), cols, 384);
        assertEquals(0, d.tensor().rows());
        assertEquals(384, d.tensor().dims());
        assertEquals(List.of(), d.ids());
        assertNull(PgCopy.decode(PgCopy.encode(randomFloats(1, 2), Columns.of(VectorType.VECTOR)), Columns.of(VectorType.VECTOR)).ids());

        // a reader skips a header extension and ignores flag bits 17 to 31
        byte[] body = PgCopy.encode(randomFloats(1, 2), Columns.of(VectorType.VECTOR));
        ByteBuffer ext = ByteBuffer.allocate(body.length + 3).order(ByteOrder.BIG_ENDIAN);
        ext.put(body, 0, 11).putInt(0x80020000).putInt(3).put(new byte[] {9, 9, 9}).put(body, 19, body.length - 19);
        assertEquals(PgCopy.decode(body, Columns.of(VectorType.VECTOR)).tensor(),
                PgCopy.decode(ext.array(), Columns.of(VectorType.VECTOR)).tensor());
    }

    @Test
    void sqlStatementsQuoteColumnNames() {
        Columns cols = Columns.of(VectorType.HALFVEC, "my \"emb\"").withId(IdType.UUID, "id");
        assertEquals("COPY public.items (\"id\", \"my \"\"emb\"\"\") FROM STDIN (FORMAT BINARY)", PgCopy.copyFromStdin("public.items", cols));
        assertEquals("COPY items (\"embedding\") TO STDOUT (FORMAT BINARY)", PgCopy.copyToStdout("items", Columns.of(VectorType.BIT)));
        assertEquals(VectorType.HALFVEC, VectorType.fromSqlName("halfvec"));
        assertEquals(Category.INVALID_FIELD, assertThrows(DensewireException.class, () -> IdType.fromSqlName("bigint")).category());
    }
}
