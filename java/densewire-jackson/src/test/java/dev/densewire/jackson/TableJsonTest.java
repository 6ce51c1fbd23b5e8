package dev.densewire.jackson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.Column;
import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import dev.densewire.TableSchema;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class TableJsonTest {
    private static final ObjectMapper MAPPER = new ObjectMapper().registerModule(new DensewireModule());

    static Table sample() {
        return Table.of("t", 2,
                Column.ofBools("b", true, false),
                Column.ofInt64("n", Long.MIN_VALUE, Long.MAX_VALUE),
                Column.ofFloat32("f", 0.1f, -0.0f),
                Column.ofFloat64("d", 5e-324, 1.7976931348623157e308),
                Column.strings("s", List.of("é\n\"", "")),
                Column.ofUuids("u", UUID.fromString("7c9e6679-7425-40de-944b-e07fc1f90ae7"), new UUID(0, 1)),
                Column.ofVectors("v", 2, new float[] {1, 2, 3, 4}));
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @ParameterizedTest
    @EnumSource(value = TableFormat.class, names = {"JSON", "JSON_ROWS", "JSON_COLUMNS"})
    void everyLayoutRoundTrips(TableFormat layout) {
        Table t = sample();
        byte[] json = TableJson.encode(t, layout);
        assertEquals(t, TableJson.decode(layout, json, new TableSchema("t", -1, t.schema())));
    }

    @Test
    void keysInAnyOrder() {
        Table rows = TableJson.decodeRows(utf8("{\"rows\":[[1,\"x\"]],\"extra\":{\"a\":[1]},\"columns\":[{\"type\":\"int32\",\"name\":\"a\"},"
                + "{\"name\":\"s\",\"type\":\"string\"}],\"name\":\"t\"}"));
        assertEquals(List.of("x"), rows.column("s").strings());
        Table cols = TableJson.decodeColumns(utf8("{\"columns\":[{\"values\":[[1,2]],\"type\":\"float32[2]\",\"name\":\"v\"}],\"rows\":1}"));
        assertEquals(2f, cols.column("v").vectors().get(1));
        Table objects = TableJson.decodeObjects(utf8("[{\"b\":true,\"a\":1}]"), "t",
                List.of(ColumnSpec.of("a", ColumnType.INT32), ColumnSpec.of("b", ColumnType.BOOL)));
        assertEquals(1, objects.column("a").int32s().get(0));
    }

    @Test
    void float32IsRoundedOnceFromTheDecimal() {
        // 1.00000017881393432617187499 is just below the midpoint of two float32 values: rounding it to a double first
        // lands on the midpoint, and then ties-to-even would round up
        Table t = TableJson.decodeColumns(utf8("{\"rows\":1,\"columns\":[{\"name\":\"f\",\"type\":\"float32\",\"values\":[1.00000017881393432617187499]}]}"));
        assertEquals(Float.intBitsToFloat(0x3f800001), t.column("f").float32s().get(0));
    }

    @Test
    void errorsNameTheValue() {
        DensewireException e = assertThrows(DensewireException.class, () -> TableJson.decodeObjects(utf8("[{\"a\":1,\"a\":2}]"), "t",
                List.of(ColumnSpec.of("a", ColumnType.INT32))));
        assertEquals("[0].a", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> TableJson.decodeObjects(utf8("[{\"a\":1,\"z\":2}]"), "t",
                List.of(ColumnSpec.of("a", ColumnType.INT32))));
        assertEquals("[0].z", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> TableJson.decodeRows(utf8("{\"columns\":[{\"name\":\"a\",\"type\":\"int64\"}],"
                + "\"rows\":[[9223372036854775808]]}")));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("rows[0][0]", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> TableJson.decodeRows(utf8("{\"columns\":[{\"name\":\"a\",\"type\":\"float64\"}],"
                + "\"rows\":[[1e400]]}")));
        assertEquals("rows[0][0]", e.field().orElse(null));
        // a syntax error anywhere is malformed, even after a bad value
        e = assertThrows(DensewireException.class, () -> TableJson.decodeRows(utf8("{\"columns\":[{\"name\":\"a\",\"type\":\"int32\"}],"
                + "\"rows\":[[\"x\"]],}")));
        assertEquals(Category.MALFORMED, e.category());
        e = assertThrows(DensewireException.class, () -> TableJson.decodeColumns(utf8("{\"rows\":1,\"columns\":[{\"name\":\"a\",\"type\":\"int32\"}]}")));
        assertEquals("columns[0].values", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> TableJson.decodeColumns(utf8("{\"columns\":[]} []")));
        assertEquals(Category.MALFORMED, e.category());
    }

    @Test
    void theModuleReadsTablesInsideDocuments() throws Exception {
        Table t = sample();
        String columns = new String(TableJson.encode(t, TableFormat.JSON_COLUMNS), StandardCharsets.UTF_8);
        String rows = new String(TableJson.encode(t, TableFormat.JSON_ROWS), StandardCharsets.UTF_8);
        Holder h = MAPPER.readValue("{\"label\":\"x\",\"tables\":[" + columns + "," + rows + "]}", Holder.class);
        assertEquals(List.of(t, t), h.tables);
        Table objects = MAPPER.readerFor(Table.class).withAttribute(TableSchema.class, new TableSchema("t", 2, t.schema()))
                .readValue(TableJson.encode(t, TableFormat.JSON));
        assertEquals(t, objects);
        assertThrows(JsonMappingException.class, () -> MAPPER.readValue(TableJson.encode(t, TableFormat.JSON), Table.class));
        DensewireJsonException e = assertThrows(DensewireJsonException.class, () -> MAPPER.readValue(
                "{\"label\":\"x\",\"tables\":[{\"rows\":[[\"no\"]],\"columns\":[{\"name\":\"a\",\"type\":\"bool\"}]}]}", Holder.class));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("rows[0][0]", DensewireJson.translate(e).field().orElse(null));
    }

    static final class Holder {
        public String label;
        public List<Table> tables;
    }

    @Test
    void nonFiniteValuesHaveNoJsonForm() {
        Table t = Table.of("t", 1, Column.ofVectors("v", 2, new float[] {1, Float.NaN}));
        for (TableFormat layout : List.of(TableFormat.JSON, TableFormat.JSON_ROWS, TableFormat.JSON_COLUMNS)) {
            DensewireException e = assertThrows(DensewireException.class, () -> TableJson.encode(t, layout));
            assertEquals(Category.NON_FINITE, e.category());
            assertEquals("v[0]", e.field().orElse(null));
        }
    }

    /**
     * Found by the Jazzer targets TableJsonFuzzTest and JsonEnvelopeFuzzTest: a body whose first bytes hold a NUL
     * was taken by Jackson for UTF-32 or UTF-16 and failed with an I/O error (an UncheckedIOException escaped).
     * JSON is UTF-8: such a body is malformed at the NUL.
     */
    @Test
    void aBodyThatIsNotUtf8IsMalformed() {
        for (String hex : new String[] {"0000005b5d", "5b005d00", "feff005b005d"}) {
            byte[] body = java.util.HexFormat.of().parseHex(hex);
            DensewireException t = assertThrows(DensewireException.class, () -> TableJson.decodeColumns(body), hex);
            assertEquals(Category.MALFORMED, t.category());
            DensewireException e = assertThrows(DensewireException.class, () -> DensewireJson.readResponse(body), hex);
            assertEquals(Category.MALFORMED, e.category());
            assertEquals(t.offset(), e.offset());
        }
        assertEquals(0, assertThrows(DensewireException.class,
                () -> DensewireJson.readResponse(java.util.HexFormat.of().parseHex("0000005b5d"))).offset().orElse(-1));
    }
}
