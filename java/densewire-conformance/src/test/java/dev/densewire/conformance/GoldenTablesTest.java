package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.Column;
import dev.densewire.ColumnBuilder;
import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException;
import dev.densewire.Table;
import dev.densewire.TableCsv;
import dev.densewire.TableFormat;
import dev.densewire.TableMsgpack;
import dev.densewire.TableProtobuf;
import dev.densewire.TableSchema;
import dev.densewire.Tables;
import dev.densewire.arrow.ArrowTables;
import dev.densewire.client.TableBodies;
import dev.densewire.jackson.DensewireModule;
import dev.densewire.jackson.TableJson;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The table cases of testdata/golden/tables.json (SPEC.md sections 13 and 15): every case one dynamic test named
 * by its id. Valid cases: the headers parse to the case's schema and are written exactly; the body decodes to the
 * case's values bit for bit (through the format's decoder, the generic {@link TableBodies} and, for the JSON
 * layouts, the Jackson {@code Table} deserializer); MessagePack and Protobuf encode byte for byte, the other formats
 * round-trip. Invalid cases fail with the case's category, field and offset.
 */
class GoldenTablesTest {
    private static final ObjectMapper JACKSON = new ObjectMapper().registerModule(new DensewireModule());

    /**
     * One case of tables.json, run by {@link GoldenVectorsTest} when the capability matrix says Java claims every
     * feature the case needs (so that an unclaimed feature is listed, never silently skipped).
     */
    static void tableCase(JsonNode c) throws Exception {
        if (c.has("error")) {
            invalidCase(c);
        } else {
            validCase(c);
        }
    }

    // ------------------------------------------------------------------ the expected table

    static List<ColumnSpec> specs(JsonNode c) {
        List<ColumnSpec> out = new ArrayList<>();
        for (JsonNode col : c.get("columns")) {
            out.add(ColumnSpec.parse(col.get("name").asText(), col.get("type").asText()));
        }
        return out;
    }

    /** The table a case describes: values by their bits. */
    static Table expected(JsonNode c) {
        int rows = c.get("rows").asInt();
        List<Column> cols = new ArrayList<>();
        List<ColumnSpec> specs = specs(c);
        for (int j = 0; j < specs.size(); j++) {
            ColumnSpec spec = specs.get(j);
            JsonNode values = c.get("columns").get(j).get("values");
            assertEquals(rows, values.size(), spec.name() + " values");
            ColumnBuilder b = new ColumnBuilder(spec, rows);
            for (JsonNode v : values) {
                switch (spec.type()) {
                    case BOOL:
                        b.putBool(v.asBoolean());
                        break;
                    case INT32:
                        b.putInt32(Integer.parseInt(v.asText()));
                        break;
                    case INT64:
                        b.putInt64(Long.parseLong(v.asText()));
                        break;
                    case STRING:
                        b.putString(v.asText());
                        break;
                    case UUID:
                        assertTrue(b.putUuid(v.asText()), v.asText());
                        break;
                    case FLOAT32_VECTOR:
                        assertEquals(spec.dimensions(), v.size());
                        for (JsonNode item : v) {
                            littleEndian(b, item.asText());
                        }
                        break;
                    default: // floats by their bits
                        littleEndian(b, v.asText());
                }
            }
            cols.add(b.build());
        }
        return new Table(c.get("table").asText(), rows, cols).validate();
    }

    private static void littleEndian(ColumnBuilder b, String hexBigEndian) {
        byte[] be = Golden.hex(hexBigEndian);
        byte[] le = new byte[be.length];
        for (int k = 0; k < be.length; k++) {
            le[k] = be[be.length - 1 - k];
        }
        b.putRaw(le, 0, le.length);
    }

    static byte[] body(JsonNode c) {
        for (String k : new String[] {"encoded_hex", "input_hex"}) {
            if (c.has(k)) {
                return Golden.hex(c.get(k).asText());
            }
        }
        for (String k : new String[] {"encoded_text", "input_text"}) {
            if (c.has(k)) {
                return c.get(k).asText().getBytes(StandardCharsets.UTF_8);
            }
        }
        throw new AssertionError("the case has no body");
    }

    static void sameTable(String what, Table want, Table got) {
        assertEquals(want.name(), got.name(), what + ": name");
        assertEquals(want.rows(), got.rows(), what + ": rows");
        assertEquals(want.schema(), got.schema(), what + ": columns");
        for (int j = 0; j < want.columns().size(); j++) {
            Column w = want.columns().get(j);
            Column g = got.columns().get(j);
            if (w.type() == ColumnType.STRING) {
                assertEquals(w.strings(), g.strings(), what + ": " + w.name());
            } else {
                assertEquals(Golden.hex(bytes(w)), Golden.hex(bytes(g)), what + ": " + w.name() + " bits");
            }
        }
        assertEquals(want, got, what);
    }

    private static byte[] bytes(Column c) {
        byte[] out = new byte[c.data().remaining()];
        c.data().get(out);
        return out;
    }

    // ------------------------------------------------------------------ valid cases

    static void validCase(JsonNode c) throws java.io.IOException {
        Table want = expected(c);
        TableFormat f = TableFormat.fromParamName(c.get("format").asText());
        Map<String, String> headers = Golden.headers(c);
        // the headers of section 15.2: parsed to the case's schema, and written exactly as given
        TableSchema schema = TableSchema.fromHeaders(headers::get);
        assertEquals(want.name(), schema.name());
        assertEquals(want.rows(), schema.rows());
        assertEquals(want.schema(), schema.columns());
        assertEquals(headers.get(Tables.HEADER_COLUMNS), Tables.formatColumnsHeader(want.schema()));

        byte[] body = body(c);
        Table got;
        switch (f) {
            case JSON:
                got = TableJson.decodeObjects(body, schema.name(), schema.columns());
                break;
            case JSON_ROWS:
                got = TableJson.decodeRows(body);
                break;
            case JSON_COLUMNS:
                got = TableJson.decodeColumns(body);
                break;
            case CSV:
                got = TableCsv.decode(body, schema.name(), schema.columns());
                break;
            case MSGPACK:
                got = TableMsgpack.decode(body);
                break;
            case PROTOBUF:
                got = TableProtobuf.decode(body);
                break;
            default:
                got = ArrowTables.decode(body);
        }
        sameTable("decode", want, got);
        // the generic entry point, as the client uses it, agrees
        Map<String, String> withType = new java.util.HashMap<>(headers);
        withType.put("Content-Type", f.mediaType());
        sameTable("TableBodies.decode", want, TableBodies.decode(withType::get, body));
        // and so does the Jackson deserializer for the JSON layouts
        if (f == TableFormat.JSON) {
            sameTable("Jackson", want, JACKSON.readerFor(Table.class).withAttribute(TableSchema.class, schema).readValue(body));
        } else if (f == TableFormat.JSON_ROWS || f == TableFormat.JSON_COLUMNS) {
            sameTable("Jackson", want, JACKSON.readValue(body, Table.class));
        }

        switch (f) {
            case MSGPACK:
                assertTrue(c.get("byte_exact").asBoolean(), "MessagePack table cases are byte-exact");
                assertEquals(Golden.hex(body), Golden.hex(TableMsgpack.encode(want)), "encode");
                break;
            case PROTOBUF: {
                assertTrue(c.get("byte_exact").asBoolean(), "Protobuf table cases are byte-exact");
                TableProtobuf.Encoding enc = c.get("column_encoding").asText().equals("plain")
                        ? TableProtobuf.Encoding.PLAIN : TableProtobuf.Encoding.BYTE_STREAM_SPLIT;
                assertEquals(Golden.hex(body), Golden.hex(TableProtobuf.encode(want, enc)), "encode");
                break;
            }
            default: {
                // text formats and Arrow are not byte-exact: our encoding must decode to the same table
                byte[] enc = TableBodies.encode(f, want);
                sameTable("round trip", want, TableBodies.decode(withType::get, enc));
            }
        }
    }

    // ------------------------------------------------------------------ invalid cases

    static void invalidCase(JsonNode c) {
        DensewireException e = assertThrows(DensewireException.class, () -> runInvalid(c));
        check(c, e);
        if (c.get("direction").asText().equals("encode")) {
            Table t = expected(c); // every JSON layout refuses it alike
            for (TableFormat layout : List.of(TableFormat.JSON_ROWS, TableFormat.JSON_COLUMNS)) {
                check(c, assertThrows(DensewireException.class, () -> TableJson.encode(t, layout)));
            }
        }
    }

    private static void check(JsonNode c, DensewireException e) {
        assertEquals(c.get("error").asText(), e.category().code(), e.getMessage());
        if (c.has("offset")) {
            assertEquals(c.get("offset").asLong(), e.offset().orElse(-1), "offset: " + e.getMessage());
        }
        if (c.has("field")) {
            assertEquals(c.get("field").asText(), e.field().orElse(null), "field: " + e.getMessage());
        }
    }

    private static void runInvalid(JsonNode c) {
        String format = c.get("format").asText();
        if (c.get("direction").asText().equals("encode")) {
            if (!format.equals("json")) {
                fail("no table encoder check for " + format);
            }
            TableJson.encode(expected(c), TableFormat.JSON);
            return;
        }
        byte[] body = body(c);
        TableFormat f = TableFormat.fromParamName(format);
        TableSchema schema = f.needsSchema() ? new TableSchema("t", -1, specs(c)) : null;
        TableBodies.decode(f, schema, body);
    }
}
