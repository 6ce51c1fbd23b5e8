package dev.densewire.jackson;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.annotation.JsonFormat;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Endianness;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class JacksonModuleTest {
    private static final ObjectMapper LITTLE = new ObjectMapper().registerModule(new DensewireModule());
    private static final ObjectMapper BIG = new ObjectMapper().registerModule(new DensewireModule(Endianness.BIG));
    private static final ObjectMapper PLAIN = new ObjectMapper();

    /** Jackson 2.20's own binary shape. */
    @JsonPropertyOrder({"id", "emb", "coords"})
    public static class NativeRow {
        public String id;
        @JsonFormat(shape = JsonFormat.Shape.BINARY)
        public float[] emb;
        @JsonFormat(shape = JsonFormat.Shape.BINARY)
        public double[] coords;
    }

    /** The same row for the densewire module. */
    @JsonPropertyOrder({"id", "emb", "coords"})
    public static class Row {
        public String id;
        public float[] emb;
        public double[] coords;
    }

    @JsonPropertyOrder({"id", "le", "be", "plain"})
    public static class Mixed {
        public String id;
        public float[] le;
        @DensewireBase64(byteOrder = Endianness.BIG)
        public float[] be;
        @DensewireBase64(enabled = false)
        public float[] plain;
    }

    public static class Doc {
        public List<VecRow> rows;
    }

    public static class VecRow {
        public String text;
        public FloatVector emb;
    }

    public record Rec(String id, @DensewireBase64(byteOrder = Endianness.BIG) float[] emb) {
    }

    private static float[] randomFloats(SplittableRandom r, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (r.nextGaussian() * 0.05);
        }
        return v;
    }

    // ------------------------------------------------------------------ Jackson 2.20 interop

    @Test
    void bigEndianOutputIsByteForByteJacksonsBinaryShape() throws Exception {
        SplittableRandom r = new SplittableRandom(7);
        for (int dims : new int[] {0, 1, 2, 3, 5, 384, 1024, 1536}) {
            NativeRow n = new NativeRow();
            Row ours = new Row();
            n.id = ours.id = "row-" + dims;
            n.emb = ours.emb = randomFloats(r, dims);
            n.coords = ours.coords = new double[] {r.nextDouble(), -r.nextDouble(), Double.NaN, -0.0};
            byte[] theirs = PLAIN.writeValueAsBytes(n);
            byte[] mine = BIG.writeValueAsBytes(ours);
            assertEquals(new String(theirs, StandardCharsets.UTF_8), new String(mine, StandardCharsets.UTF_8));
            assertEquals(PLAIN.writeValueAsString(n), BIG.writeValueAsString(ours), "writer-based generator");
            // each side reads the other's output
            Row back = BIG.readValue(theirs, Row.class);
            assertArrayEquals(ours.emb, back.emb);
            NativeRow theirsBack = PLAIN.readValue(mine, NativeRow.class);
            assertArrayEquals(n.emb, theirsBack.emb);
            assertArrayEquals(n.coords, theirsBack.coords);
        }
    }

    @Test
    void goldenJacksonInteropStrings() throws Exception {
        Row row = new Row();
        row.id = "a";
        row.emb = new float[] {1.0f, -2.5f, 0.1f};
        assertEquals("{\"id\":\"a\",\"emb\":\"P4AAAMAgAAA9zMzN\",\"coords\":null}", BIG.writeValueAsString(row));
        row.emb = new float[] {-0.0f, Float.MIN_VALUE, Float.MAX_VALUE, Float.NEGATIVE_INFINITY, Float.POSITIVE_INFINITY, Float.NaN};
        assertTrue(BIG.writeValueAsString(row).contains("\"gAAAAAAAAAF/f////4AAAH+AAAB/wAAA\""));
        row.emb = new float[0];
        row.coords = new double[] {1.0, -2.5, 0.1};
        assertEquals("{\"id\":\"a\",\"emb\":\"\",\"coords\":\"P/AAAAAAAADABAAAAAAAAD+5mZmZmZma\"}", BIG.writeValueAsString(row));
    }

    // ------------------------------------------------------------------ byte order per property and globally

    @Test
    void littleEndianByDefaultAndPerPropertyOverrides() throws Exception {
        Mixed m = new Mixed();
        m.id = "x";
        m.le = m.be = m.plain = new float[] {1.0f, 2.0f};
        String json = LITTLE.writeValueAsString(m);
        assertEquals("{\"id\":\"x\",\"le\":\"AACAPwAAAEA=\",\"be\":\"P4AAAEAAAAA=\",\"plain\":[1.0,2.0]}", json);
        Mixed back = LITTLE.readValue(json, Mixed.class);
        assertArrayEquals(m.le, back.le);
        assertArrayEquals(m.be, back.be);
        assertArrayEquals(m.plain, back.plain);
        // reading accepts arrays in place of Base64 and vice versa
        Mixed swapped = LITTLE.readValue("{\"le\":[1,2.0],\"be\":\"P4AAAEAAAAA=\",\"plain\":\"AACAPwAAAEA=\"}", Mixed.class);
        assertArrayEquals(m.le, swapped.le);
        assertArrayEquals(m.plain, swapped.plain);
    }

    @Test
    void annotatedOnlyLeavesOtherArraysAlone() throws Exception {
        ObjectMapper mapper = new ObjectMapper().registerModule(DensewireModule.builder().annotatedOnly(true).build());
        Mixed m = new Mixed();
        m.le = m.be = m.plain = new float[] {1.0f};
        assertEquals("{\"id\":null,\"le\":[1.0],\"be\":\"P4AAAA==\",\"plain\":[1.0]}", mapper.writeValueAsString(m));
    }

    @Test
    void recordsRootValuesVectorsAndTokenBuffers() throws Exception {
        Rec rec = new Rec("r", new float[] {1.0f});
        String json = LITTLE.writeValueAsString(rec);
        assertEquals("{\"id\":\"r\",\"emb\":\"P4AAAA==\"}", json);
        assertArrayEquals(rec.emb(), LITTLE.readValue(json, Rec.class).emb());

        assertEquals("\"AACAPw==\"", LITTLE.writeValueAsString(new float[] {1.0f}));
        assertArrayEquals(new float[] {1.0f}, LITTLE.readValue("\"AACAPw==\"", float[].class));
        assertArrayEquals(new double[] {1.0}, LITTLE.readValue("\"AAAAAAAA8D8=\"", double[].class));

        Doc doc = new Doc();
        VecRow v = new VecRow();
        v.text = "hello";
        v.emb = FloatVector.of(0.5f, -0.25f, Float.NaN);
        doc.rows = List.of(v, v);
        String docJson = LITTLE.writeValueAsString(doc);
        assertEquals("{\"rows\":[{\"text\":\"hello\",\"emb\":\"AAAAPwAAgL4AAMB/\"},{\"text\":\"hello\",\"emb\":\"AAAAPwAAgL4AAMB/\"}]}", docJson);
        assertEquals(v.emb, LITTLE.readValue(docJson, Doc.class).rows.get(1).emb);
        // convertValue goes through a TokenBuffer (native binary)
        assertEquals(v.emb, LITTLE.convertValue(doc, Doc.class).rows.get(0).emb);
        assertNull(LITTLE.readValue("{\"text\":\"t\",\"emb\":null}", VecRow.class).emb);
    }

    // ------------------------------------------------------------------ errors

    @Test
    void badBase64FailsWithCategoryOffsetAndPath() {
        String json = "{\"rows\":[{\"emb\":\"AACAPw==\"},{\"text\":\"b\",\"emb\":\"AACA*wAAAEA=\"}]}";
        DensewireJsonException e = assertThrows(DensewireJsonException.class, () -> LITTLE.readValue(json, Doc.class));
        assertEquals(Category.INVALID_BASE64, e.category());
        assertEquals(4, e.offset().getAsLong());
        assertEquals("rows[1].emb", e.jsonPath());
        assertTrue(e.getMessage().contains("'*' at offset 4"), e.getMessage());
        DensewireException d = e.toDensewireException();
        assertEquals("rows[1].emb", d.field().orElseThrow());
    }

    @Test
    void lengthNotAWholeNumberOfFloats() {
        DensewireJsonException e = assertThrows(DensewireJsonException.class,
                () -> LITTLE.readValue("{\"emb\":\"AACAPwAA\"}", Row.class));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(6, e.offset().getAsLong());
        assertEquals("emb", e.jsonPath());
        DensewireJsonException d = assertThrows(DensewireJsonException.class,
                () -> LITTLE.readValue("{\"coords\":\"AACAPw==\"}", Row.class));
        assertEquals(Category.LENGTH_MISMATCH, d.category());
    }

    @Test
    void unpaddedAndTrailingBitsAreAcceptedWhitespaceIsNot() throws Exception {
        assertArrayEquals(new float[] {1.0f, 2.0f}, LITTLE.readValue("{\"emb\":\"AACAPwAAAEA\"}", Row.class).emb);
        assertArrayEquals(new float[] {1.0f, 2.0f}, LITTLE.readValue("{\"emb\":\"AACAPwAAAEB=\"}", Row.class).emb);
        DensewireJsonException e = assertThrows(DensewireJsonException.class,
                () -> LITTLE.readValue("{\"emb\":\"AACAPwAA AEA=\"}", Row.class));
        assertEquals(8, e.offset().getAsLong());
        DensewireJsonException u = assertThrows(DensewireJsonException.class,
                () -> LITTLE.readValue("{\"emb\":\"AACAP_AAAEA=\"}", Row.class));
        assertEquals(5, u.offset().getAsLong());
    }

    @Test
    void nonNumbersInArraysAreInvalidField() {
        DensewireJsonException e = assertThrows(DensewireJsonException.class,
                () -> LITTLE.readValue("{\"emb\":[1.0,\"2\"]}", Row.class));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("emb", e.jsonPath());
    }

    // ------------------------------------------------------------------ requests

    @Test
    void requestsRoundTripAndRejectUnknownFields() {
        EmbeddingsRequest req = EmbeddingsRequest.of(List.of("a", "b")).model("m").dimensions(256)
                .dtype(dev.densewire.Dtype.FLOAT16).byteorder(Endianness.BIG).encodingFormat(dev.densewire.EncodingFormat.BASE64);
        String json = new String(DensewireJson.writeRequest(req), StandardCharsets.UTF_8);
        assertEquals("{\"input\":[\"a\",\"b\"],\"model\":\"m\",\"encoding_format\":\"base64\",\"dimensions\":256,"
                + "\"dtype\":\"float16\",\"byteorder\":\"big\"}", json);
        assertEquals(req, DensewireJson.readRequest(json.getBytes(StandardCharsets.UTF_8)));
        DensewireException e = assertThrows(DensewireException.class,
                () -> DensewireJson.readRequest("{\"input\":\"a\",\"dimension\":3}".getBytes(StandardCharsets.UTF_8)));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("dimension", e.field().orElseThrow());
    }

    @Test
    void errorEnvelopeRoundTrip() {
        DensewireException err = new DensewireException(Category.INVALID_BASE64, "invalid Base64 character '*' at offset 4",
                4, "data[1].embedding");
        String json = new String(DensewireJson.writeError(err), StandardCharsets.UTF_8);
        assertEquals("{\"error\":{\"message\":\"data[1].embedding: invalid Base64 character '*' at offset 4\","
                + "\"type\":\"invalid_request_error\",\"param\":\"data[1].embedding\",\"code\":\"invalid_base64\",\"offset\":4}}", json);
        ApiError back = DensewireJson.readError(json.getBytes(StandardCharsets.UTF_8));
        assertEquals("invalid_base64", back.error.code);
        assertEquals(4L, back.error.offset);
    }
}
