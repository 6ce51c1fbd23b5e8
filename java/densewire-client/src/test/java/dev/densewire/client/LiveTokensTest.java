package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.Dtype;
import dev.densewire.Format;
import dev.densewire.RaggedTensor;
import java.net.URI;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Per-token embeddings (TEI's {@code POST /embed_all}, SPEC.md 6.4) from the real server that runs the built-in model
 * (scripts/test.sh names it in {@code DENSEWIRE_OVERLOAD_URL}; the hash server has no token states): every binary
 * format gives the same ragged tensor bit for bit, TEI's JSON the same numbers, one matrix per text.
 */
class LiveTokensTest {
    private static URI server;

    @BeforeAll
    static void server() {
        server = LiveEnv.require("DENSEWIRE_OVERLOAD_URL", "densewire serve with the built-in model");
    }

    @Test
    void everyFormatGivesTheSameTokenStates() {
        List<String> texts = List.of("hello world", "a second, longer text about token states");
        RaggedTensor reference = null;
        for (Format f : List.of(Format.RAW, Format.MSGPACK, Format.PROTOBUF, Format.ARROW, Format.JSON)) {
            DensewireClient c = DensewireClient.builder(server).apiKey(System.getenv("DENSEWIRE_API_KEY")).formats(f)
                    .maxRetries(8).build();
            RaggedTensor t = c.embedTokens(texts, null).tensor();
            assertEquals(2, t.size(), f.toString());
            assertEquals(Dtype.FLOAT32, t.dtype(), f.toString());
            assertTrue(t.matrix(0).rows() >= 4, f + ": [CLS] hello world [SEP] is at least 4 tokens");
            assertTrue(t.matrix(1).rows() > t.matrix(0).rows(), f + ": the longer text has more tokens");
            if (reference == null) {
                reference = t;
            } else if (f == Format.JSON) {
                assertArrayEquals(reference.offsets(), t.offsets(), "TEI's JSON: the same token counts");
                assertArrayEquals(reference.rows().toFloatArray(), t.rows().toFloatArray(), 1e-6f, "TEI's JSON numbers");
            } else {
                assertEquals(reference, t, f + " differs from raw");
            }
        }
    }
}
