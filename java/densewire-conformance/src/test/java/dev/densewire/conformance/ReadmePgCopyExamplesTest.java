package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.densewire.Dtype;
import dev.densewire.PgCopy;
import dev.densewire.Tensor;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.sql.Connection;
import java.sql.Statement;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * The PostgreSQL binary COPY examples of java/README.md, compiled and run: the codec alone, and PgJDBC's
 * {@code CopyManager} against DENSEWIRE_PG_URL (skipped without it, failing under CI=true, as PgCopyPostgresTest).
 * Each example sits between {@code // README:name} and {@code // END}; the README must contain it verbatim.
 */
class ReadmePgCopyExamplesTest {

    @Test
    void codec() {
        // README:pgcopy-codec
        Tensor vectors = Tensor.ofFloats(1, 2, new float[] {1f, -2.5f});
        byte[] stream = PgCopy.encode(vectors, PgCopy.Columns.of(PgCopy.VectorType.VECTOR));
        // PGCOPY\n\377\r\n\0, flags, extension | 1 field, 12 bytes: d = 2, unused, 1.0, -2.5 (big-endian) | trailer
        // 5047434f50590aff0d0a00 00000000 00000000 | 0001 0000000c 0002 0000 3f800000 c0200000 | ffff
        Tensor back = PgCopy.decode(stream, PgCopy.Columns.of(PgCopy.VectorType.VECTOR)).tensor();
        // END
        assertEquals("5047434f50590aff0d0a00" + "00000000" + "00000000" + "0001" + "0000000c" + "0002" + "0000"
                + "3f800000" + "c0200000" + "ffff", HexFormat.of().formatHex(stream));
        assertEquals(vectors, back);
    }

    @Test
    void pgjdbc() throws Exception {
        try (Connection conn = PgCopyPostgresTest.connect(); Statement st = conn.createStatement()) {
            st.execute("DROP TABLE IF EXISTS items");
            st.execute("CREATE TABLE items (id int8 PRIMARY KEY, embedding halfvec(3))");
            // README:pgcopy-jdbc
            CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI(); // PgJDBC
            Tensor vectors = Tensor.ofFloats(2, 3, new float[] {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
            PgCopy.Columns cols = PgCopy.Columns.of(PgCopy.VectorType.HALFVEC).withId(PgCopy.IdType.INT8, "id");
            // COPY items ("id", "embedding") FROM STDIN (FORMAT BINARY), 4,096 rows a chunk, each checked first
            long rows = copy.copyIn(PgCopy.copyFromStdin("items", cols),
                    PgCopy.inputStream(vectors, cols, List.of(1L, 2L), 4096));
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            copy.copyOut(PgCopy.copyToStdout("items", cols), out);
            PgCopy.Data back = PgCopy.decode(out.toByteArray(), cols);
            Tensor halves = back.tensor(); // float16, 2 x 3: what the halfvec column holds
            List<Object> ids = back.ids(); // [1, 2] (Long)
            // END
            assertEquals(2, rows);
            assertEquals(vectors.convert(Dtype.FLOAT16), halves);
            assertEquals(List.of(1L, 2L), ids);
            st.execute("DROP TABLE items");
        }
    }

    @Test
    void readmeShowsTheseExamplesVerbatim() throws IOException {
        ReadmeSnippets.assertShownVerbatim(ReadmePgCopyExamplesTest.class, 2);
    }
}
