package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException.Category;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class TablesTest {
    /** A table of every type, the fixture of the codec tests. */
    static Table everyType() {
        return Table.of("every type", 3,
                Column.ofBools("flag", true, false, true),
                Column.ofInt32("i32", Integer.MIN_VALUE, 0, Integer.MAX_VALUE),
                Column.ofInt64("i64", Long.MIN_VALUE, 9007199254740993L, Long.MAX_VALUE),
                Column.ofFloat32("f32", 1.5f, -0.0f, Float.MIN_VALUE),
                Column.ofFloat64("f64", 0.1, -0.0, Double.MAX_VALUE),
                Column.strings("text", List.of("plain", "comma, \"quote\"\r\nline", "")),
                Column.ofUuids("id", UUID.fromString("7c9e6679-7425-40de-944b-e07fc1f90ae7"), new UUID(0, 0), new UUID(-1, -1)),
                Column.ofVectors("embedding", 2, new float[] {1, 2, 3, 4, 5, 6}),
                Column.ofInt32("name with space/é,=", 1, 2, 3));
    }

    @Test
    void columnsHeaderRoundTripsWithPercentEncodedNames() {
        Table t = everyType();
        String header = Tables.formatColumnsHeader(t.schema());
        assertTrue(header.endsWith(",embedding=float32[2],name%20with%20space%2F%C3%A9%2C%3D=int32"), header);
        assertEquals(t.schema(), Tables.parseColumnsHeader(header));
        assertEquals(List.of(), Tables.parseColumnsHeader(""));
    }

    @ParameterizedTest
    @ValueSource(strings = {"a", "a=int32,b", "a%2=int32", "a%zz=int32", "=int32", "a=int32,a=bool", "%C3=int32", "é=int32"})
    void malformedColumnsHeadersAreInvalidFieldOnTheHeader(String value) {
        DensewireException e = assertThrows(DensewireException.class, () -> Tables.parseColumnsHeader(value));
        assertEquals(Category.INVALID_FIELD, e.category(), e.getMessage());
        assertEquals("Densewire-Columns", e.field().orElse(null));
    }

    @ParameterizedTest
    @ValueSource(strings = {"decimal", "Float32", "float32[0]", "float32[01]", "float32[]", "float32[16777217]", "float32[-1]",
            "float32[1e3]", "int32 ", "float32[٣]"})
    void unknownTypesAreUnknownDtype(String type) {
        DensewireException e = assertThrows(DensewireException.class, () -> Tables.parseColumnsHeader("a=" + type));
        assertEquals(Category.UNKNOWN_DTYPE, e.category(), e.getMessage());
        assertEquals("Densewire-Columns", e.field().orElse(null));
    }

    @Test
    void schemaFromHeaders() {
        Map<String, String> h = Map.of("Densewire-Table", "t", "Densewire-Rows", "12", "Densewire-Columns", "v=float32[384]");
        TableSchema s = TableSchema.fromHeaders(h::get);
        assertEquals(new TableSchema("t", 12, List.of(ColumnSpec.vector("v", 384))), s);
        DensewireException e = assertThrows(DensewireException.class, () -> TableSchema.fromHeaders(Map.of("Densewire-Rows", "1")::get));
        assertEquals("Densewire-Columns", e.field().orElse(null));
        e = assertThrows(DensewireException.class,
                () -> TableSchema.fromHeaders(Map.of("Densewire-Rows", "-1", "Densewire-Columns", "")::get));
        assertEquals("Densewire-Rows", e.field().orElse(null));
    }

    @Test
    void uuidText() {
        byte[] u = new byte[16];
        assertTrue(Tables.parseUuid("7C9E6679-7425-40DE-944B-E07FC1F90AE7", u, 0));
        assertEquals("7c9e6679-7425-40de-944b-e07fc1f90ae7", Tables.formatUuid(u, 0));
        for (String bad : new String[] {"7c9e6679742540de944be07fc1f90ae7", "7c9e6679-7425-40de-944b-e07fc1f90ae", "7c9e6679-7425-40de-944b+e07fc1f90ae7",
                "gc9e6679-7425-40de-944b-e07fc1f90ae7"}) {
            assertFalse(Tables.parseUuid(bad, u, 0), bad);
        }
    }

    @Test
    void typedAccessorsAreViewsOfTheBytes() {
        Table t = everyType();
        assertEquals(Integer.MAX_VALUE, t.column("i32").int32s().get(2));
        assertEquals(9007199254740993L, t.column("i64").int64s().get(1));
        assertEquals(Float.MIN_VALUE, t.column("f32").float32s().get(2));
        assertEquals(Double.MAX_VALUE, t.column("f64").float64s().get(2));
        assertArrayEquals(new boolean[] {true, false, true}, t.column("flag").bools());
        assertEquals(UUID.fromString("7c9e6679-7425-40de-944b-e07fc1f90ae7"), t.column("id").uuid(0));
        FloatBuffer v = t.column("embedding").vectors();
        assertEquals(6, v.remaining());
        assertArrayEquals(new float[] {3, 4}, t.column("embedding").vector(1));
        assertEquals(Tensor.ofFloats(3, 2, new float[] {1, 2, 3, 4, 5, 6}), t.column("embedding").tensor());
        assertThrows(IllegalStateException.class, () -> t.column("i32").float64s());
        assertThrows(IllegalStateException.class, () -> t.column("text").data());
    }

    @Test
    void validateNamesTheColumn() {
        DensewireException e = assertThrows(DensewireException.class,
                () -> Table.of("t", 2, Column.ofInt32("a", 1, 2), Column.ofInt32("b", 1)));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals("columns[1].data", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> Table.of("t", 1, Column.ofInt32("a", 1), Column.ofBools("a", true)));
        assertEquals("columns[1].name", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> Table.of("t", 1, Column.fixed(ColumnSpec.of("b", ColumnType.BOOL), new byte[] {2})));
        assertEquals("columns[0].data[0]", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> Table.of("t", 2, Column.strings("s", List.of("x"))));
        assertEquals(Category.SHAPE_MISMATCH, e.category());
    }

    @Test
    void byteStreamSplitRoundTrips() {
        byte[] plain = new byte[40];
        for (int i = 0; i < plain.length; i++) {
            plain[i] = (byte) (i * 7);
        }
        for (int w : new int[] {4, 8, 16}) {
            int len = plain.length / w * w;
            byte[] split = new byte[len];
            Tables.splitByteStreams(java.nio.ByteBuffer.wrap(plain, 0, len).slice(), split, 0, w);
            assertEquals(plain[1], split[len / w], "byte 1 of item 0 starts stream 1");
            assertArrayEquals(java.util.Arrays.copyOf(plain, len), Tables.joinByteStreams(split, 0, len, w));
        }
    }
}
