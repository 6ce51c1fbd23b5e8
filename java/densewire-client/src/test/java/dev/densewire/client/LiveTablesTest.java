package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.ColumnSpec;
import dev.densewire.ColumnType;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import java.net.URI;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link TablesClient} against a real {@code densewire serve} with its demo tables {@code points} and
 * {@code points_f32}, found through {@code DENSEWIRE_SERVER_URL} (set by scripts/test.sh).
 */
class LiveTablesTest {
    private static URI server;
    private static Table reference;

    @BeforeAll
    static void server() {
        server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve with the demo tables");
        reference = TablesClient.builder(server).formats(TableFormat.JSON_COLUMNS).contentCodings("identity").build()
                .get("points").table();
    }

    @Test
    void listNamesTheDemoTablesWithTheirColumns() {
        List<TableInfo> list = TablesClient.builder(server).build().list();
        TableInfo points = list.stream().filter(t -> t.name().equals("points")).findFirst().orElseThrow();
        assertEquals(List.of(ColumnSpec.of("uuid", ColumnType.UUID), ColumnSpec.of("status", ColumnType.INT32),
                ColumnSpec.of("longitude", ColumnType.FLOAT64), ColumnSpec.of("latitude", ColumnType.FLOAT64)), points.columns());
        assertEquals(reference.rows(), points.rows());
        assertTrue(points.formats().containsAll(List.of("json", "csv", "msgpack", "protobuf", "arrow")), points.formats().toString());
        assertNotNull(points.version());
        TableInfo f32 = list.stream().filter(t -> t.name().equals("points_f32")).findFirst().orElseThrow();
        assertEquals(ColumnType.FLOAT32, f32.columns().get(2).type());
    }

    @ParameterizedTest
    @EnumSource(TableFormat.class)
    void everyFormatGivesTheSameTable(TableFormat f) {
        TableResult r = TablesClient.builder(server).build().get("points", TablesClient.format(f));
        assertEquals(f, r.format());
        assertEquals(reference, r.table(), f.toString());
    }

    @Test
    void negotiationPrefersProtobuf() {
        TableResult r = TablesClient.builder(server).build().get("points_f32");
        assertEquals(TableFormat.PROTOBUF, r.format());
        assertEquals(ColumnType.FLOAT32, r.table().column("longitude").type());
        TableResult csv = TablesClient.builder(server).formats(TableFormat.CSV, TableFormat.JSON).build().get("points_f32");
        assertEquals(TableFormat.CSV, csv.format());
        assertEquals(r.table(), csv.table());
    }

    @ParameterizedTest
    @ValueSource(strings = {"zstd", "br", "gzip", "identity"})
    void everyContentCodingDecodes(String coding) {
        TableResult r = TablesClient.builder(server).contentCodings(coding).build().get("points", TablesClient.format(TableFormat.MSGPACK));
        assertEquals(coding.equals("identity") ? "" : coding, r.contentEncoding());
        assertEquals(reference, r.table());
        if (!coding.equals("identity")) {
            assertTrue(r.wireBytes() < TableMsgpackSize.of(reference), r.wireBytes() + " bytes on the wire");
        }
    }

    @Test
    void ifNoneMatchAnswersNotModified() {
        TablesClient c = TablesClient.builder(server).build();
        TableResult first = c.get("points");
        assertNotNull(first.etag());
        TableResult again = c.get("points", TablesClient.ifNoneMatch(first.etag()));
        assertTrue(again.notModified());
        assertNull(again.table());
        assertEquals(first.etag(), again.etag());
        TableResult stale = c.get("points", TablesClient.ifNoneMatch("\"not-the-etag\""));
        assertEquals(reference, stale.table());
    }

    @Test
    void anUnknownTableIsNotFound() {
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> TablesClient.builder(server).build().get("no such table"));
        assertEquals(404, e.status());
        assertEquals(Category.NOT_FOUND, e.category());
        assertEquals(1, e.attempts());
    }

    /** The uncompressed MessagePack size, to show the compressed body is smaller. */
    private static final class TableMsgpackSize {
        static int of(Table t) {
            return dev.densewire.TableMsgpack.encode(t).length;
        }
    }
}
