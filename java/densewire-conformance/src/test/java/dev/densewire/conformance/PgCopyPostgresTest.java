package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.PgCopy;
import dev.densewire.PgCopy.Columns;
import dev.densewire.PgCopy.IdType;
import dev.densewire.PgCopy.VectorType;
import dev.densewire.Tensor;
import java.io.ByteArrayOutputStream;
import java.io.ByteArrayInputStream;
import java.net.URI;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * PgCopy against a real PostgreSQL with pgvector (DENSEWIRE_PG_URL, a {@code postgresql://user@host:port/db} URL that
 * scripts/test.sh starts with scripts/postgres.sh), through PgJDBC's {@code CopyManager}: 1,000 x 384 vectors into
 * {@code vector(384)} and {@code halfvec(384)} columns and back bit for bit, the values as pgvector reads them, every
 * golden stream loaded and copied out byte for byte, and a bad chunk aborting the COPY. Without the variable the
 * tests are skipped with the reason printed, except under CI=true, where they fail.
 */
class PgCopyPostgresTest {
    private static Connection conn;
    private static CopyManager copy;

    /** A JDBC URL for a libpq-style {@code postgresql://user[:password]@host:port/db} URL. */
    static String jdbcUrl(String url) {
        URI u = URI.create(url);
        StringBuilder sb = new StringBuilder("jdbc:postgresql://").append(u.getHost());
        if (u.getPort() > 0) {
            sb.append(':').append(u.getPort());
        }
        sb.append(u.getPath() == null || u.getPath().isEmpty() ? "/postgres" : u.getPath());
        String userInfo = u.getUserInfo();
        if (userInfo != null) {
            int colon = userInfo.indexOf(':');
            sb.append("?user=").append(colon < 0 ? userInfo : userInfo.substring(0, colon));
            if (colon >= 0) {
                sb.append("&password=").append(userInfo.substring(colon + 1));
            }
        }
        return sb.toString();
    }

    static Connection connect() throws SQLException {
        String url = System.getenv("DENSEWIRE_PG_URL");
        if (url == null || url.isBlank()) {
            if ("true".equals(System.getenv("CI"))) {
                fail("DENSEWIRE_PG_URL is not set, and CI=true: scripts/test.sh must start PostgreSQL (scripts/postgres.sh)");
            }
            System.out.println("PgCopyPostgresTest skipped: DENSEWIRE_PG_URL is not set "
                    + "(url=$(bash scripts/postgres.sh start /tmp/pg) starts one)");
            assumeTrue(false, "DENSEWIRE_PG_URL is not set (scripts/test.sh starts PostgreSQL with pgvector there); skipped");
        }
        return DriverManager.getConnection(jdbcUrl(url));
    }

    @BeforeAll
    static void open() throws SQLException {
        conn = connect();
        copy = conn.unwrap(PGConnection.class).getCopyAPI();
    }

    @AfterAll
    static void close() throws SQLException {
        if (conn != null) {
            conn.close();
        }
    }

    private static void exec(String sql) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute(sql);
        }
    }

    private static byte[] copyOut(String sql) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        copy.copyOut(sql, out);
        return out.toByteArray();
    }

    private static Tensor unitRows(int n, int d, long seed) {
        Random rng = new Random(seed);
        float[] v = new float[n * d];
        for (int r = 0; r < n; r++) {
            double norm = 0;
            for (int j = 0; j < d; j++) {
                v[r * d + j] = (float) rng.nextGaussian();
                norm += v[r * d + j] * (double) v[r * d + j];
            }
            for (int j = 0; j < d; j++) {
                v[r * d + j] = (float) (v[r * d + j] / Math.sqrt(norm));
            }
        }
        return Tensor.ofFloats(n, d, v);
    }

    @Test
    void pgvectorIsInstalled() throws SQLException {
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT extversion FROM pg_extension WHERE extname = 'vector'")) {
            assertEquals(true, rs.next(), "CREATE EXTENSION vector has not run on this database");
        }
    }

    @Test
    void thousandVectorsOf384DimensionsInAndOutBitForBit() throws Exception {
        int n = 1000;
        int d = 384;
        Tensor vectors = unitRows(n, d, 18);
        List<Long> ids = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            ids.add(i * 1_000_003L - 7);
        }
        for (VectorType type : new VectorType[] {VectorType.VECTOR, VectorType.HALFVEC}) {
            String table = "dw_java_" + type;
            exec("DROP TABLE IF EXISTS " + table);
            exec("CREATE TABLE " + table + " (id int8 PRIMARY KEY, embedding " + type + "(" + d + ") NOT NULL)");
            Columns cols = Columns.of(type).withId(IdType.INT8, "id");
            long rows = copy.copyIn(PgCopy.copyFromStdin(table, cols), PgCopy.inputStream(vectors, cols, ids, 128));
            assertEquals(n, rows);

            byte[] out = copyOut("COPY (SELECT id, embedding FROM " + table + " ORDER BY id) TO STDOUT (FORMAT BINARY)");
            PgCopy.Data back = PgCopy.decode(out, cols);
            Tensor want = type == VectorType.VECTOR ? vectors : vectors.convert(Dtype.FLOAT16);
            assertEquals(want, back.tensor(), type + ": the vectors read back");
            assertEquals(new ArrayList<Object>(ids), back.ids(), type + ": the ids read back");
            // PostgreSQL writes the same stream we wrote (ids ascending, as written)
            assertArrayEquals(PgCopy.encode(vectors, cols, ids), out, type + ": the server's own COPY TO stream");

            // pgvector's own reading of the values, not only its echo: row 17 as real[] through its cast
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT embedding::" + (type == VectorType.VECTOR ? "" : "vector::")
                         + "real[] FROM " + table + " WHERE id = " + ids.get(17))) {
                assertEquals(true, rs.next());
                Array arr = rs.getArray(1);
                Float[] got = (Float[]) arr.getArray();
                float[] expected = want.row(17);
                for (int j = 0; j < d; j++) {
                    assertEquals(Float.floatToRawIntBits(expected[j]), Float.floatToRawIntBits(got[j]), type + " [17][" + j + "]");
                }
            }
            exec("DROP TABLE " + table);
        }
    }

    @Test
    void idsOfEveryTypeWithNullsAndTheOtherColumnTypes() throws Exception {
        Tensor vectors = unitRows(4, 10, 5);
        Object[][] idSets = {
            {7, null, Integer.MIN_VALUE, Integer.MAX_VALUE},
            {"a", null, "", "ünïcödé ✓"},
            {UUID.randomUUID(), UUID.randomUUID(), null, UUID.fromString("00112233-4455-6677-8899-aabbccddeeff")},
        };
        IdType[] types = {IdType.INT4, IdType.TEXT, IdType.UUID};
        for (VectorType vt : VectorType.values()) {
            for (int i = 0; i < types.length; i++) {
                exec("DROP TABLE IF EXISTS dw_java_ids");
                exec("CREATE TABLE dw_java_ids (n serial, key " + types[i] + ", v " + vt + "(10))");
                Columns cols = Columns.of(vt, "v").withId(types[i], "key");
                List<Object> ids = java.util.Arrays.asList(idSets[i]);
                copy.copyIn(PgCopy.copyFromStdin("dw_java_ids", cols), new ByteArrayInputStream(PgCopy.encode(vectors, cols, ids)));
                PgCopy.Data back = PgCopy.decode(copyOut("COPY (SELECT key, v FROM dw_java_ids ORDER BY n) TO STDOUT (FORMAT BINARY)"), cols);
                assertEquals(ids, back.ids(), vt + " " + types[i]);
                Tensor want = switch (vt) {
                    case VECTOR, SPARSEVEC -> vectors;
                    case HALFVEC -> vectors.convert(Dtype.FLOAT16);
                    case BIT -> vectors.convert(Dtype.BINARY);
                };
                assertEquals(want, back.tensor(), vt + " " + types[i]);
            }
        }
        exec("DROP TABLE dw_java_ids");
    }

    @Test
    void aBadChunkAbortsTheCopyAndPostgresqlKeepsNoRow() throws Exception {
        exec("DROP TABLE IF EXISTS dw_java_abort");
        exec("CREATE TABLE dw_java_abort (embedding vector(3))");
        float[] v = new float[100 * 3];
        java.util.Arrays.fill(v, 0.5f);
        v[3 * 77 + 2] = Float.NaN;
        Columns cols = Columns.of(VectorType.VECTOR);
        Exception e = assertThrows(Exception.class, () -> copy.copyIn(PgCopy.copyFromStdin("dw_java_abort", cols),
                PgCopy.inputStream(Tensor.ofFloats(100, 3, v), cols, null, 10)));
        Throwable cause = e;
        while (cause != null && !(cause instanceof DensewireException)) {
            cause = cause.getCause();
        }
        DensewireException de = cause == null ? null : (DensewireException) cause;
        assertEquals("embedding[77][2]", de == null ? e.toString() : de.field().orElse(null));
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM dw_java_abort")) {
            rs.next();
            assertEquals(0, rs.getLong(1), "the rows of the good chunks before the bad one were not kept");
        }
        exec("DROP TABLE dw_java_abort");
    }

    @TestFactory
    Stream<DynamicTest> goldenStreamsLoadAndComeBackByteForByte() {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : Golden.load("pgcopy.json").get("cases")) {
            String id = Golden.id(c);
            if (!id.startsWith("pgcopy.") || c.get("shape").get(0).asInt() == 0) {
                continue;
            }
            tests.add(DynamicTest.dynamicTest(id, () -> {
                int d = c.get("shape").get(1).asInt();
                List<String> defs = new ArrayList<>();
                List<String> names = new ArrayList<>();
                for (JsonNode col : c.get("columns")) {
                    String type = col.get("type").asText();
                    boolean vector = !List.of("int8", "int4", "text", "uuid").contains(type);
                    defs.add('"' + col.get("name").asText() + "\" " + type + (vector ? "(" + d + ")" : ""));
                    names.add('"' + col.get("name").asText() + '"');
                }
                exec("DROP TABLE IF EXISTS dw_java_golden");
                exec("CREATE TABLE dw_java_golden (n serial, " + String.join(", ", defs) + ")");
                String cols = String.join(", ", names);
                byte[] stream = Golden.hex(c.get("encoded_hex").asText());
                copy.copyIn("COPY dw_java_golden (" + cols + ") FROM STDIN (FORMAT BINARY)", new ByteArrayInputStream(stream));
                byte[] out = copyOut("COPY (SELECT " + cols + " FROM dw_java_golden ORDER BY n) TO STDOUT (FORMAT BINARY)");
                assertEquals(c.get("encoded_hex").asText(), Golden.hex(out));
                exec("DROP TABLE dw_java_golden");
            }));
        }
        return tests.stream();
    }
}
