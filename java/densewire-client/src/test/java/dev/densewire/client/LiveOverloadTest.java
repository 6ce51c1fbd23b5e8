package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CyclicBarrier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Against a real overloaded server: scripts/test.sh starts {@code densewire serve --max-concurrent-requests 1} and
 * names it in {@code DENSEWIRE_OVERLOAD_URL}. 16 concurrent requests of 16 texts all succeed with 8 retries; with
 * none, at least one is answered 429; twelve clients on twelve threads all succeed with the default 2 retries.
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
            for (int j = 0; j < 16; j++) { // 16, not 64: the server spreads 16 requests over their drain time,
                // and past 60 s (64 texts each on two busy cores) a client gives up at once (SPEC.md 18.2)
                texts.add(tag + " request " + i + " text " + j + ": " + "a sentence about retries");
            }
            futures.add(c.embedAsync(dev.densewire.jackson.EmbeddingsRequest.of(texts))
                    .<Object>thenApply(e -> e).exceptionally(t -> t instanceof CompletionException ? t.getCause() : t));
        }
        List<Object> out = new ArrayList<>();
        futures.forEach(f -> out.add(f.join()));
        return out;
    }

    /**
     * With 8 retries each of the 16 either succeeds or gives up at once because the server asked it to come back
     * in more than a minute (SPEC.md 18.2: the server spreads the ones it turns away over its drain time, which on
     * two busy cores can pass 60 s for the last of 16); nothing else, and most succeed.
     */
    @Test
    void sixteenConcurrentRequestsSucceedWithRetriesOrAreToldToComeBackPastAMinute() {
        List<Object> results = burst(8, "retried " + System.nanoTime());
        int ok = 0;
        for (int i = 0; i < results.size(); i++) {
            Object r = results.get(i);
            if (r instanceof Embeddings) {
                assertEquals(16, ((Embeddings) r).tensor().rows());
                ok++;
                continue;
            }
            assertTrue(r instanceof DensewireApiException && ((DensewireApiException) r).status() == 429
                    && ((DensewireApiException) r).retryAfter().orElse(0) > RetryPolicy.MAX_RETRY_AFTER,
                    "request " + i + " with 8 retries: " + r);
        }
        assertTrue(ok > results.size() / 2, ok + " of 16 succeeded: " + results);
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

    /** {@code densewire_admission_rejections_total{reason="full"}} of the server's /metrics (0 before the first). */
    private static double rejections() throws Exception {
        HttpRequest.Builder rb = HttpRequest.newBuilder(server.resolve("/metrics")).timeout(Duration.ofSeconds(30));
        String key = System.getenv("DENSEWIRE_API_KEY");
        if (key != null && !key.isEmpty()) {
            rb.header("Authorization", "Bearer " + key);
        }
        HttpResponse<String> r = HttpClient.newHttpClient().send(rb.build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), "/metrics");
        String prefix = "densewire_admission_rejections_total{reason=\"full\"} ";
        return r.body().lines().filter(l -> l.startsWith(prefix)).mapToDouble(l -> Double.parseDouble(l.substring(prefix.length())))
                .findFirst().orElse(0); // no sample before the first rejection
    }

    /**
     * Twelve threads each run {@code DensewireClient.builder(url).build().embed(...)} (the default 2 retries) at once
     * against {@code --max-concurrent-requests 1}: every call succeeds, because the server tells the ones it turns
     * away to come back one after another (SPEC.md 18.3) and the clients add their jitter on top (18.2). A request
     * is 16 texts of the built-in model, fresh each run (no cache on the way), so the twelve overlap and most are
     * turned away at first: at least one was (the server's counter), or nothing was tested.
     */
    @Test
    void twelveClientsAgainstOneSlotAllGetThroughWithTheDefaultTwoRetries() throws Exception {
        String run = Long.toString(System.nanoTime());
        java.util.function.Function<String, List<String>> texts = tag -> {
            List<String> t = new ArrayList<>();
            for (int j = 0; j < 16; j++) {
                t.add(tag + " " + run + " text " + j + ": a sentence of a dozen words about retrying an overloaded server");
            }
            return t;
        };
        String key = System.getenv("DENSEWIRE_API_KEY");
        DensewireClient warm = DensewireClient.builder(server).apiKey(key).build();
        for (int k = 0; k < 3; k++) { // the model warm, and the server's estimate of such a request
            assertEquals(16, warm.embed(texts.apply("warm " + k)).tensor().rows());
        }
        double before = rejections();
        CyclicBarrier start = new CyclicBarrier(12);
        Object[] results = new Object[12];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            int n = i;
            threads.add(new Thread(() -> {
                try {
                    start.await();
                    results[n] = DensewireClient.builder(server).apiKey(key).build().embed(texts.apply("client " + n));
                } catch (Exception e) { // collected and asserted below
                    results[n] = e;
                }
            }, "client-" + i));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        List<String> failed = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            if (!(results[i] instanceof Embeddings)) {
                failed.add(i + ": " + results[i]);
            }
        }
        assertTrue(failed.isEmpty(), failed.size() + " of 12 calls failed: " + failed);
        for (Object r : results) {
            Embeddings e = (Embeddings) r;
            assertEquals(16, e.tensor().rows());
            assertEquals(384, e.tensor().dims());
        }
        double turnedAway = rejections() - before;
        assertTrue(turnedAway >= 1, "no request was turned away: the twelve did not overlap, nothing was tested");
    }
}
