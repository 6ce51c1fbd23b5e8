package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Against a real overloaded server: scripts/test.sh starts {@code densewire serve --max-concurrent-requests 1} and
 * names it in {@code DENSEWIRE_OVERLOAD_URL}. 16 concurrent requests of 64 texts all succeed with 8 retries; with
 * none, at least one is answered 429.
 */
class LiveOverloadTest {
    private static URI server;

    @BeforeAll
    static void server() {
        server = LiveEnv.require("DENSEWIRE_OVERLOAD_URL", "densewire serve --max-concurrent-requests 1");
    }

    /** 16 requests sent at once; each result is its embeddings or the exception it failed with. */
    private static List<Object> burst(int maxRetries, String tag) {
        DensewireClient c = DensewireClient.builder(server).apiKey(System.getenv("DENSEWIRE_API_KEY")).maxRetries(maxRetries).build();
        List<CompletableFuture<Object>> futures = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            List<String> texts = new ArrayList<>();
            for (int j = 0; j < 64; j++) {
                texts.add(tag + " request " + i + " text " + j + ": " + "a sentence about retries");
            }
            futures.add(c.embedAsync(dev.densewire.jackson.EmbeddingsRequest.of(texts))
                    .<Object>thenApply(e -> e).exceptionally(t -> t instanceof CompletionException ? t.getCause() : t));
        }
        List<Object> out = new ArrayList<>();
        futures.forEach(f -> out.add(f.join()));
        return out;
    }

    @Test
    void sixteenConcurrentRequestsAllSucceedWithRetries() {
        List<Object> results = burst(8, "retried " + System.nanoTime());
        for (int i = 0; i < results.size(); i++) {
            Object r = results.get(i);
            assertTrue(r instanceof Embeddings, "request " + i + " with 8 retries: " + r);
            assertEquals(64, ((Embeddings) r).tensor().rows());
        }
    }

    @Test
    void withoutRetriesSomeAreRateLimited() {
        List<Object> results = burst(0, "unretried " + System.nanoTime());
        long limited = results.stream().filter(r -> r instanceof DensewireApiException
                && ((DensewireApiException) r).status() == 429 && ((DensewireApiException) r).category() == Category.RATE_LIMITED).count();
        assertTrue(limited >= 1, "no request of 16 was answered 429: " + results);
        for (Object r : results) {
            assertTrue(r instanceof Embeddings || r instanceof DensewireApiException && ((DensewireApiException) r).status() == 429,
                    "only 200 and 429: " + r);
        }
    }
}
