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
        SparseTensor tei = client(server, Format.JSON).embedSparse(TEXTS, SparseOptions.DEFAULTS).tensor();
        assertEquals(3, tei.size());
        assertEquals(Dtype.FLOAT32, tei.dtype());
        for (int i = 0; i < 3; i++) {
            assertTrue(tei.offset(i + 1) > tei.offset(i), "text " + i + " has non-zero weights");
        }
        SparseTensor reference = null;
        for (Format f : List.of(Format.RAW, Format.MSGPACK, Format.PROTOBUF, Format.ARROW)) {
            SparseTensor t = client(server, f).embedSparse(TEXTS, SparseOptions.DEFAULTS).tensor();
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
        SparseTensor hello = client(server, Format.RAW).embedSparse(List.of("hello world hello"), SparseOptions.DEFAULTS).tensor();
        assertEquals(30522, hello.vocabularySize());
        assertArrayEquals(new int[] {26240, 26746}, indices(hello));
        assertArrayEquals(new float[] {0.827504f, 0.3063963f}, hello.values().toFloatArray());
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> client(server, Format.RAW).embedSparse(List.of("word ".repeat(9000)), SparseOptions.truncating(false)));
        assertEquals(413, e.status());
        assertTrue(e.getMessage().contains("tokens"), e.getMessage());
        assertEquals(2, client(server, Format.RAW).embedSparse(List.of("word ".repeat(9000), "short"), SparseOptions.truncating(true)).tensor().size());
    }

    /** The server's top-k of {@code max_active_dims}: each vector's k largest weights of the full vector, any format. */
    @Test
    void maxActiveDimsKeepsTheServersTopK() {
        URI server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        for (Format f : List.of(Format.RAW, Format.MSGPACK, Format.PROTOBUF, Format.ARROW, Format.JSON)) {
            SparseTensor all = client(server, f).embedSparse(TEXTS, SparseOptions.DEFAULTS).tensor();
            float[] allValues = all.values().toFloatArray();
            int[] allIndices = indices(all);
            for (int k : new int[] {1, 3}) {
                SparseTensor top = client(server, f).embedSparse(TEXTS, SparseOptions.builder().maxActiveDims(k).build()).tensor();
                float[] values = top.values().toFloatArray();
                int[] topIndices = indices(top);
                for (int i = 0; i < TEXTS.size(); i++) {
                    List<long[]> expected = new java.util.ArrayList<>();
                    for (int j = all.offset(i); j < all.offset(i + 1); j++) {
                        expected.add(new long[] {allIndices[j], Float.floatToIntBits(allValues[j])});
                    }
                    expected.sort((a, b) -> a[1] != b[1]
                            ? Float.compare(Float.intBitsToFloat((int) b[1]), Float.intBitsToFloat((int) a[1]))
                            : Long.compare(a[0], b[0]));
                    List<long[]> kept = new java.util.ArrayList<>(expected.subList(0, Math.min(k, expected.size())));
                    kept.sort((a, b) -> Long.compare(a[0], b[0]));
                    StringBuilder want = new StringBuilder();
                    kept.forEach(e -> want.append(e[0]).append(':').append(Float.intBitsToFloat((int) e[1])).append(' '));
                    StringBuilder got = new StringBuilder();
                    for (int j = top.offset(i); j < top.offset(i + 1); j++) {
                        got.append(topIndices[j]).append(':').append(values[j]).append(' ');
                    }
                    assertEquals(want.toString(), got.toString(), f + ": max_active_dims " + k + ", text " + i);
                }
            }
        }
    }

    /**
     * truncation_direction: a text over the hash model's 8192 words keeps its first words (Right, and by default) or
     * its last (Left): exactly the vector of its first or last words alone.
     */
    @Test
    void truncationDirectionKeepsOneEnd() {
        URI server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        DensewireClient c = client(server, Format.RAW);
        List<String> framed = List.of("first " + "word ".repeat(9000) + "last");
        SparseOptions.Builder cut = SparseOptions.builder().truncate(true);
        SparseTensor right = c.embedSparse(framed, cut.truncationDirection(SparseOptions.TruncationDirection.RIGHT).build()).tensor();
        SparseTensor left = c.embedSparse(framed, cut.truncationDirection(SparseOptions.TruncationDirection.LEFT).build()).tensor();
        SparseTensor unset = c.embedSparse(framed, SparseOptions.truncating(true)).tensor();
        SparseTensor head = c.embedSparse(List.of("first word"), SparseOptions.DEFAULTS).tensor();
        SparseTensor tail = c.embedSparse(List.of("word last"), SparseOptions.DEFAULTS).tensor();
        assertEquals(head, right, "Right keeps the first words");
        assertEquals(head, unset, "no truncation_direction: Right");
        assertEquals(tail, left, "Left keeps the last words");
        assertNotEquals(left, right);
    }

    /** The hash model defines no prompts: the server's 422 as the client's error, naming prompt_name. */
    @Test
    void promptNameRefusalNamesTheField() {
        URI server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client(server, Format.RAW)
                .embedSparse(List.of("hi"), SparseOptions.builder().promptName("query").build()));
        assertEquals(422, e.status());
        assertEquals("prompt_name", e.param());
        assertTrue(e.getMessage().contains("query"), e.getMessage());
    }

    /** vocab_size given to TEI's JSON answer (which states none): the binary answer's tensor exactly. */
    @Test
    void vocabSizeOnTeiJson() {
        URI server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        SparseTensor raw = client(server, Format.RAW).embedSparse(TEXTS, SparseOptions.DEFAULTS).tensor();
        SparseOptions sized = SparseOptions.builder().vocabSize(raw.vocabularySize()).build();
        assertEquals(raw, client(server, Format.JSON).embedSparse(TEXTS, sized).tensor());
        DensewireException e = assertThrows(DensewireException.class,
                () -> client(server, Format.JSON).embedSparse(TEXTS, SparseOptions.builder().vocabSize(2L).build()));
        assertEquals(Optional.of("vocab_size"), e.field());
    }

    /** TEI's error shape, the field in its text, as the client's error with the field; other texts name none. */
    @Test
    void teiErrorsNameTheirField() {
        java.net.http.HttpHeaders none = java.net.http.HttpHeaders.of(java.util.Map.of(), (a, b) -> true);
        DensewireApiException e = Responses.apiError(422, none,
                bytes("{\"error\":\"prompt_name: 'q' is not a prompt\",\"error_type\":\"Validation\"}"), 1);
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("prompt_name", e.param());
        assertEquals(Optional.of("prompt_name"), e.field());
        assertEquals("Validation", e.type());
        DensewireApiException busy = Responses.apiError(429, none,
                bytes("{\"error\":\"model is overloaded\",\"error_type\":\"Overloaded\"}"), 1);
        assertEquals(Category.RATE_LIMITED, busy.category());
        assertEquals(null, busy.param());
        DensewireApiException kserve = Responses.apiError(400, none,
                bytes("{\"error\":\"inputs[0].data: bad\",\"code\":\"invalid_field\",\"param\":\"inputs[0].data\",\"offset\":3}"), 1);
        assertEquals("inputs[0].data", kserve.param());
        assertEquals(java.util.OptionalLong.of(3), kserve.offset());
    }

    @Test
    void optionsAreCheckedWhenBuilt() {
        DensewireException k = assertThrows(DensewireException.class, () -> SparseOptions.builder().maxActiveDims(0).build());
        assertEquals(Optional.of("max_active_dims"), k.field());
        DensewireException v = assertThrows(DensewireException.class, () -> SparseOptions.builder().vocabSize(0L).build());
        assertEquals(Optional.of("vocab_size"), v.field());
        SparseOptions o = SparseOptions.builder().truncate(true).promptName("q").build();
        assertEquals(o, o.toBuilder().build());
        assertEquals("{\"inputs\":[\"a\"],\"truncate\":true,\"prompt_name\":\"q\"}",
                new String(TokenBodies.sparseRequest(List.of("a"), o), StandardCharsets.UTF_8));
        assertEquals("{\"inputs\":[\"a\"],\"truncation_direction\":\"Left\",\"max_active_dims\":5}",
                new String(TokenBodies.sparseRequest(List.of("a"), SparseOptions.builder()
                        .truncationDirection(SparseOptions.TruncationDirection.LEFT).maxActiveDims(5).build()), StandardCharsets.UTF_8));
    }

    @Test
    void teiJsonIsReadWithItsChecks() {
        SparseTensor t = TokenBodies.teiSparseJson(bytes("[[{\"index\":1,\"value\":0.5},{\"index\":7,\"value\":2}],[]]"), null).tensor();
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
            DensewireException e = assertThrows(DensewireException.class, () -> TokenBodies.teiSparseJson(bytes((String) f[0]), null), (String) f[0]);
            assertEquals(f[1], e.category(), (String) f[0]);
            assertEquals(Optional.ofNullable((String) f[2]), e.field(), (String) f[0]);
        }
        assertNotEquals(null, TokenBodies.teiSparseJson(bytes("[]"), null).tensor());
        byte[] two = bytes("[[{\"index\":1,\"value\":0.5},{\"index\":7,\"value\":2}]]");
        assertEquals(30522, TokenBodies.teiSparseJson(two, 30522L).tensor().vocabularySize());
        assertEquals(8, TokenBodies.teiSparseJson(two, 8L).tensor().vocabularySize());
        DensewireException small = assertThrows(DensewireException.class, () -> TokenBodies.teiSparseJson(two, 7L));
        assertEquals(Category.INVALID_FIELD, small.category());
        assertEquals(Optional.of("vocab_size"), small.field());
        assertTrue(small.getMessage().contains("index 7"), small.getMessage());
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
