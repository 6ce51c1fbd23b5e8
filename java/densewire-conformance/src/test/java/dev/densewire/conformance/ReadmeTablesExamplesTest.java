package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import dev.densewire.Column;
import dev.densewire.ColumnType;
import dev.densewire.Table;
import dev.densewire.TableCsv;
import dev.densewire.TableFormat;
import dev.densewire.TableProtobuf;
import dev.densewire.TableSchema;
import dev.densewire.Tables;
import dev.densewire.client.DensewireClient;
import dev.densewire.client.TableResult;
import dev.densewire.client.TablesClient;
import dev.densewire.jackson.DensewireModule;
import dev.densewire.jackson.TableJson;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The tables and retries code of java/README.md, compiled and run; each example between {@code // README:name} and
 * {@code // END} must appear in the README verbatim ({@link #readmeShowsTheseExamplesVerbatim}).
 */
class ReadmeTablesExamplesTest {

    @Test
    void tables() {
        // README:tables
        Table t = Table.of("points", 2,
                Column.ofUuids("uuid", UUID.randomUUID(), UUID.randomUUID()),
                Column.ofInt32("status", 1, 0),
                Column.ofFloat64("longitude", -73.98, 139.73),
                Column.ofVectors("embedding", 3, new float[] {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}));
        byte[] body = TableProtobuf.encode(t, TableProtobuf.Encoding.BYTE_STREAM_SPLIT);
        Table back = TableProtobuf.decode(body);
        DoubleBuffer longitude = back.column("longitude").float64s(); // a view, no boxing
        FloatBuffer items = back.column("embedding").vectors();       // rows * 3 float32, row-major
        float[] second = back.column("embedding").vector(1);          // {0.4, 0.5, 0.6}
        // CSV and the JSON objects layout carry no types: they come from the Densewire-Columns header
        String columns = Tables.formatColumnsHeader(t.schema()); // uuid=uuid,status=int32,longitude=float64,embedding=float32[3]
        Table fromCsv = TableCsv.decode(TableCsv.encode(t), "points", Tables.parseColumnsHeader(columns));
        // END
        assertEquals(t, back);
        assertEquals(t, fromCsv);
        assertEquals(139.73, longitude.get(1));
        assertEquals(6, items.remaining());
        assertEquals(0.4f, second[0]);
        assertEquals("uuid=uuid,status=int32,longitude=float64,embedding=float32[3]", columns);
    }

    @Test
    void jacksonTables() throws IOException {
        Table t = Table.of("t", 1, Column.ofInt32("a", 7));
        byte[] columnsJson = TableJson.encode(t, TableFormat.JSON_COLUMNS);
        byte[] objectsJson = TableJson.encode(t, TableFormat.JSON);
        Map<String, String> headers = Map.of("Densewire-Table", "t", "Densewire-Rows", "1", "Densewire-Columns", "a=int32");
        // README:jackson-tables
        ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());
        Table table = mapper.readValue(columnsJson, Table.class); // the rows or columns layout, anywhere in a document
        Table objects = mapper.readerFor(Table.class)                 // [{"a":7}]: typed by the response's headers
                .withAttribute(TableSchema.class, TableSchema.fromHeaders(headers::get))
                .readValue(objectsJson);
        // END
        assertEquals(t, table);
        assertEquals(t, objects);
    }

    @Test
    void tablesClient() throws IOException {
        Table points = Table.of("points", 1, Column.ofInt32("status", 1));
        byte[] body = TableProtobuf.encode(points);
        HttpServer http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        http.createContext("/v1/tables/points", ex -> {
            String etag = "\"v1-protobuf\"";
            ex.getResponseHeaders().add("ETag", etag);
            if (etag.equals(ex.getRequestHeaders().getFirst("If-None-Match"))) {
                ex.sendResponseHeaders(304, -1);
                ex.close();
                return;
            }
            ex.getResponseHeaders().add("Content-Type", "application/protobuf");
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        http.start();
        String server = "http://127.0.0.1:" + http.getAddress().getPort();
        try {
            // README:tables-client
            TablesClient tables = TablesClient.builder(URI.create(server)).build();
            TableResult r = tables.get("points"); // Protobuf, MessagePack, ... as the server offers; zstd, br or gzip
            Table table = r.table();
            TableResult again = tables.get("points", TablesClient.ifNoneMatch(r.etag()));
            again.notModified(); // true while the table has not changed: no body was sent
            // END
            assertEquals(points, table);
            assertEquals(TableFormat.PROTOBUF, r.format());
            assertTrue(again.notModified());
            assertEquals(ColumnType.INT32, table.column("status").type());
        } finally {
            http.stop(0);
        }
    }

    @Test
    void retries() {
        String server = "http://127.0.0.1:9";
        // README:retries
        DensewireClient client = DensewireClient.builder(URI.create(server))
                .maxRetries(5)                                                // default 2; 0 never retries
                .retryBackoff(Duration.ofMillis(250), Duration.ofSeconds(4)) // full jitter: [0, min(4 s, 250 ms * 2^(n-1)))
                .build();
        // END
        assertTrue(client.accept().startsWith("application/octet-stream"));
    }

    @Test
    void readmeShowsTheseExamplesVerbatim() throws IOException {
        ReadmeSnippets.assertShownVerbatim(ReadmeTablesExamplesTest.class, 4);
    }
}
