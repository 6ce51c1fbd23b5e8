package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Format;
import dev.densewire.SparseTensor;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Sparse vectors (TEI's {@code POST /embed_sparse}, SPEC.md 20) from the real server with the hash model (scripts/test.sh
 * names it in {@code DENSEWIRE_SERVER_URL}): every binary format gives the same sparse tensor bit for bit, TEI's JSON
 * the same indices and values; a text over the model's limit with truncate false is the server's 413. TEI's JSON is
 * read with its checks, fault by fault.
 */
class LiveSparseTest {
    private static final List<String> TEXTS = List.of("a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog");

    private static DensewireClient client(URI server, Format f) {
        return DensewireClient.builder(server).apiKey(System.getenv("DENSEWIRE_API_KEY")).formats(f).maxRetries(8).build();
    }

    private static int[] indices(SparseTensor t) {
        int[] out = new int[t.nonZeros()];
        t.indices().get(0, out);
        return out;
    }

    @Test
    void everyFormatGivesTheSameSparseVectors() {
        URI server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        SparseTensor tei = client(server, Format.JSON).embedSparse(TEXTS, null).tensor();
        assertEquals(3, tei.size());
        assertEquals(Dtype.FLOAT32, tei.dtype());
        for (int i = 0; i < 3; i++) {
            assertTrue(tei.offset(i + 1) > tei.offset(i), "text " + i + " has non-zero weights");
        }
        SparseTensor reference = null;
        for (Format f : List.of(Format.RAW, Format.MSGPACK, Format.PROTOBUF, Format.ARROW)) {
            SparseTensor t = client(server, f).embedSparse(TEXTS, null).tensor();
            assertArrayEquals(tei.offsets(), t.offsets(), f + ": TEI's JSON offsets");
            assertArrayEquals(indices(tei), indices(t), f + ": TEI's JSON indices");
            assertArrayEquals(tei.values().toFloatArray(), t.values().toFloatArray(), f + ": TEI's JSON values, exactly");
            assertTrue(t.vocabularySize() >= tei.vocabularySize(), f + ": the vocabulary holds TEI's largest index");
            if (reference == null) {
                reference = t;
            } else {
                assertEquals(reference, t, f + " differs from raw");
            }
        }
        // the hash:D rule (python/src/densewire/_backends/hash.py): blake2b of each word, index x % 30522, weight
        // ((x >> 40) + 1) / 2^24, the largest per index
        SparseTensor hello = client(server, Format.RAW).embedSparse(List.of("hello world hello"), null).tensor();
        assertEquals(30522, hello.vocabularySize());
        assertArrayEquals(new int[] {26240, 26746}, indices(hello));
        assertArrayEquals(new float[] {0.827504f, 0.3063963f}, hello.values().toFloatArray());
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> client(server, Format.RAW).embedSparse(List.of("word ".repeat(9000)), false));
        assertEquals(413, e.status());
        assertTrue(e.getMessage().contains("tokens"), e.getMessage());
        assertEquals(2, client(server, Format.RAW).embedSparse(List.of("word ".repeat(9000), "short"), true).tensor().size());
    }

    @Test
    void teiJsonIsReadWithItsChecks() {
        SparseTensor t = TokenBodies.teiSparseJson(bytes("[[{\"index\":1,\"value\":0.5},{\"index\":7,\"value\":2}],[]]")).tensor();
        assertArrayEquals(new int[] {0, 2, 2}, t.offsets());
        assertArrayEquals(new int[] {1, 7}, indices(t));
        assertArrayEquals(new float[] {0.5f, 2f}, t.values().toFloatArray());
        assertEquals(8, t.vocabularySize(), "one past the largest index");
        Object[][] faults = {
            {"[[{\"index\":-1,\"value\":1}]]", Category.INVALID_FIELD, "[0][0].index"},
            {"[[{\"index\":1.5,\"value\":1}]]", Category.INVALID_FIELD, "[0][0].index"},
            {"[[{\"value\":1}]]", Category.INVALID_FIELD, "[0][0].index"},
            {"[[{\"index\":1,\"value\":\"x\"}]]", Category.INVALID_FIELD, "[0][0].value"},
            {"[[{\"index\":3,\"value\":1},{\"index\":2,\"value\":1}]]", Category.INVALID_FIELD, "indices"},
            {"{\"index\":1}", Category.MALFORMED, null},
            {"[[", Category.MALFORMED, null},
        };
        for (Object[] f : faults) {
            DensewireException e = assertThrows(DensewireException.class, () -> TokenBodies.teiSparseJson(bytes((String) f[0])), (String) f[0]);
            assertEquals(f[1], e.category(), (String) f[0]);
            assertEquals(Optional.ofNullable((String) f[2]), e.field(), (String) f[0]);
        }
        assertNotEquals(null, TokenBodies.teiSparseJson(bytes("[]")).tensor());
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
