package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Format;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Against a real {@code densewire serve} (e.g. {@code densewire serve --model hash:384 --port 18777}), when
 * {@code DENSEWIRE_SERVER_URL} names it (scripts/test.sh sets it); skipped otherwise, failed when CI=true.
 */
class LiveServerTest {
    private static URI server;

    @BeforeAll
    static void server() {
        server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
    }

    @Test
    void everyFormatGivesTheSameTensor() {
        Embeddings json = DensewireClient.builder(server).formats(Format.JSON).build().embed(List.of("hello", "world"));
        for (Format f : Format.values()) {
            Embeddings e = DensewireClient.builder(server).formats(f).build().embed(List.of("hello", "world"));
            assertEquals(json.tensor(), e.tensor(), f.toString());
            assertEquals(json.model(), e.model(), f.toString());
        }
    }

    @Test
    void embedManyMatchesSingleRequests() {
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            texts.add("text number " + i);
        }
        DensewireClient c = DensewireClient.builder(server).batchSize(100).maxConcurrency(3).build();
        Embeddings all = c.embedMany(texts);
        assertEquals(600, all.tensor().rows());
        assertArrayEquals(c.embed(List.of("text number 377")).tensor().row(0), all.tensor().row(377));
    }

    @Test
    void dtypesAndErrors() {
        assertEquals(Dtype.FLOAT16, DensewireClient.builder(server).dtype(Dtype.FLOAT16).build().embed(List.of("x")).tensor().dtype());
        assertEquals(Dtype.BINARY, DensewireClient.builder(server).dtype(Dtype.BINARY).build().embed(List.of("x")).tensor().dtype());
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> DensewireClient.builder(server).build().embed(List.of("")));
        assertEquals(400, e.status()); // OpenAI's and vLLM's status for an invalid parameter (issue 27)
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("input[0]", e.param());
    }
}
