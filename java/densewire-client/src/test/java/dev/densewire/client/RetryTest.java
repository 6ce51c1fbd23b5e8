package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.densewire.Column;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import dev.densewire.RawCodec;
import dev.densewire.Table;
import dev.densewire.TableProtobuf;
import dev.densewire.Tensor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.HashSet;
import java.util.OptionalDouble;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Retries of both clients against a fault-injecting server: it answers each request with the next scripted fault
 * (a status, its headers), then with a real body, and counts the attempts.
 */
class RetryTest {
    /** One scripted answer: an error status with the OpenAI error envelope. */
    record Fault(int status, Map<String, String> headers) {
    }

    private HttpServer server;
    private final ConcurrentLinkedQueue<Fault> faults = new ConcurrentLinkedQueue<>();
    private final List<Long> arrivals = new CopyOnWriteArrayList<>();

    @BeforeEach
    void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.createContext("/v1/embeddings", ex -> answer(ex, () -> {
            Tensor t = Tensor.ofFloats(1, 2, new float[] {1f, 2f});
            RawCodec.headers(Embeddings.of(t)).forEach(ex.getResponseHeaders()::add);
            ex.getResponseHeaders().add("Content-Type", "application/octet-stream");
            return RawCodec.encode(t);
        }));
        server.createContext("/v1/tables/t", ex -> answer(ex, () -> {
            ex.getResponseHeaders().add("Content-Type", "application/protobuf");
            return TableProtobuf.encode(Table.of("t", 1, Column.ofInt32("a", 7)));
        }));
        server.start();
    }

    @AfterEach
    void stop() {
        server.stop(0);
    }

    private interface Body {
        byte[] get() throws IOException;
    }

    private void answer(HttpExchange ex, Body ok) throws IOException {
        arrivals.add(System.nanoTime());
        ex.getRequestBody().readAllBytes();
        Fault f = faults.poll();
        byte[] body;
        int status = 200;
        if (f != null) {
            status = f.status();
            String code = Map.of(429, "rate_limited", 503, "unavailable", 400, "malformed", 422, "invalid_field").get(status);
            body = ("{\"error\":{\"message\":\"injected " + status + "\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\""
                    + code + "\"}}").getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            f.headers().forEach(ex.getResponseHeaders()::add);
        } else {
            body = ok.get();
        }
        ex.sendResponseHeaders(status, body.length);
        ex.getResponseBody().write(body);
        ex.close();
    }

    private URI uri() {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
    }

    private DensewireClient.Builder client() {
        return DensewireClient.builder(uri()).retryBackoff(Duration.ofMillis(1), Duration.ofMillis(20));
    }

    private static Fault fault(int status) {
        return new Fault(status, Map.of());
    }

    @Test
    void rateLimitedAndUnavailableAnswersAreRetried() {
        faults.addAll(List.of(fault(429), fault(503)));
        Embeddings e = client().build().embed(List.of("a"));
        assertEquals(1, e.tensor().rows());
        assertEquals(3, arrivals.size());
    }

    @Test
    void twoRetriesByDefaultThenTheErrorSaysHowManyAttempts() {
        for (int i = 0; i < 10; i++) {
            faults.add(fault(429));
        }
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().build().embed(List.of("a")));
        assertEquals(3, arrivals.size());
        assertEquals(3, e.attempts());
        assertEquals(429, e.status());
        assertEquals(Category.RATE_LIMITED, e.category());
        assertTrue(e.getMessage().contains("(after 3 attempts)"), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 5})
    void maxRetriesIsConfigurable(int retries) {
        for (int i = 0; i < 10; i++) {
            faults.add(fault(503));
        }
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> client().maxRetries(retries).build().embed(List.of("a")));
        assertEquals(retries + 1, arrivals.size());
        assertEquals(retries + 1, e.attempts());
        assertEquals(Category.UNAVAILABLE, e.category());
    }

    @ParameterizedTest
    @ValueSource(ints = {400, 422})
    void callerFaultsAreNeverRetried(int status) {
        faults.add(fault(status));
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().maxRetries(8).build().embed(List.of("a")));
        assertEquals(1, arrivals.size());
        assertEquals(1, e.attempts());
        assertEquals(status, e.status());
    }

    @Test
    void retryAfterSecondsIsWaitedFor() {
        faults.add(new Fault(429, Map.of("Retry-After", "1")));
        client().retryBackoff(Duration.ZERO, Duration.ZERO).build().embed(List.of("a"));
        assertEquals(2, arrivals.size());
        long waitedMillis = (arrivals.get(1) - arrivals.get(0)) / 1_000_000;
        assertTrue(waitedMillis >= 990, "waited " + waitedMillis + " ms for Retry-After: 1");
    }

    @Test
    void retryAfterParsesSecondsAndHttpDates() {
        double now = System.currentTimeMillis() / 1000.0;
        assertEquals(OptionalDouble.of(3), RetryPolicy.retryAfterSeconds("3", now));
        assertEquals(OptionalDouble.of(7), RetryPolicy.retryAfterSeconds(" \t007 ", now));
        assertEquals(OptionalDouble.of(0), RetryPolicy.retryAfterSeconds("0", now));
        assertEquals(OptionalDouble.of(120), RetryPolicy.retryAfterSeconds("120", now), "read as sent: wait() gives up");
        for (String bad : new String[] {"soon", "1.5", "-1", "+3", "", "3 s", "\u0663"}) {
            assertEquals(OptionalDouble.empty(), RetryPolicy.retryAfterSeconds(bad, now), bad);
        }
        assertEquals(OptionalDouble.empty(), RetryPolicy.retryAfterSeconds(null, now));
        String inTenSeconds = DateTimeFormatter.RFC_1123_DATE_TIME.format(ZonedDateTime.now(ZoneOffset.UTC).plusSeconds(10));
        double d = RetryPolicy.retryAfterSeconds(inTenSeconds, now).orElseThrow();
        assertTrue(d <= 11 && d >= 8, "" + d);
        String past = DateTimeFormatter.RFC_1123_DATE_TIME.format(ZonedDateTime.now(ZoneOffset.UTC).minusSeconds(10));
        assertEquals(OptionalDouble.of(0), RetryPolicy.retryAfterSeconds(past, now));
    }

    @Test
    void backoffIsFullJitterUnderTheCapOnTopOfRetryAfter() {
        RetryPolicy p = new RetryPolicy(9, 0.1, 1.0, RetryPolicy.DEFAULT_RANDOM);
        for (int retry = 1; retry <= 9; retry++) {
            double bound = Math.min(1.0, 0.1 * (1 << (retry - 1)));
            List<Double> waits = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {
                double w = p.wait(retry, 0, null, 0).orElseThrow();
                assertTrue(w >= 0 && w < bound, "retry " + retry + " waited " + w);
                waits.add(w);
            }
            // full jitter: the waits spread over [0, bound), not bunched at the top
            assertTrue(waits.stream().anyMatch(w -> w < bound / 4) && waits.stream().anyMatch(w -> w > 3 * bound / 4), "retry " + retry);
        }
        Set<Double> onTop = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            double w = p.wait(1, 429, "3", 0).orElseThrow();
            assertTrue(w >= 3 && w < 3.1, "" + w); // never max(jitter, Retry-After)
            onTop.add(w);
        }
        assertTrue(onTop.size() > 100, "spread over the tenth of a second after Retry-After: " + onTop.size());
        assertEquals(OptionalDouble.empty(), p.wait(1, 429, "61", 0), "a server asking for more than a minute: give up");
        assertEquals(OptionalDouble.empty(), p.wait(1, 500, null, 0));
        assertEquals(OptionalDouble.empty(), p.wait(10, 0, null, 0));
        assertThrows(IllegalArgumentException.class, () -> new RetryPolicy(-1, 0.5, 8, RetryPolicy.DEFAULT_RANDOM));
    }

    @Test
    void theDrawsComeFromTheBuildersRandomSource() {
        faults.addAll(List.of(fault(503), new Fault(429, Map.of("Retry-After", "0"))));
        List<Integer> draws = new CopyOnWriteArrayList<>();
        DensewireClient c = DensewireClient.builder(uri()).retryBackoff(Duration.ofMillis(400), Duration.ofSeconds(8))
                .retryRandom(() -> {
                    draws.add(draws.size());
                    return 0.5;
                }).build();
        assertEquals(1, c.embed(List.of("a")).tensor().rows());
        assertEquals(List.of(0, 1), draws, "one draw for each wait");
        // 0.5 * 0.4 s, then 0 + 0.5 * 0.8 s: the waits the draws give, never less
        long firstMillis = (arrivals.get(1) - arrivals.get(0)) / 1_000_000;
        long secondMillis = (arrivals.get(2) - arrivals.get(1)) / 1_000_000;
        assertTrue(firstMillis >= 200 && secondMillis >= 400, firstMillis + " ms, " + secondMillis + " ms");
        assertThrows(NullPointerException.class, () -> DensewireClient.builder(uri()).retryRandom(null));
    }

    @Test
    void aRetryAfterOverAMinuteGivesUpAtOnceAndTheErrorCarriesIt() {
        faults.add(new Fault(429, Map.of("Retry-After", "61")));
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().build().embed(List.of("a")));
        assertEquals(1, arrivals.size());
        assertEquals(1, e.attempts());
        assertEquals(OptionalDouble.of(61), e.retryAfter());
        assertTrue(e.getMessage().contains("come back in 61.0 s"), e.getMessage());
        faults.add(new Fault(503, Map.of("Retry-After", "99999999999999999999")));
        e = assertThrows(DensewireApiException.class, () -> TablesClient.builder(uri()).build().get("t"));
        assertEquals(2, arrivals.size());
        assertEquals(OptionalDouble.of(1e20), e.retryAfter());
    }

    @Test
    void aConnectionThatCannotBeMadeIsRetriedThenSaysHowManyAttempts() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        DensewireClient c = DensewireClient.builder(URI.create("http://127.0.0.1:" + port))
                .retryBackoff(Duration.ofMillis(1), Duration.ofMillis(5)).maxRetries(3).build();
        UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> c.embed(List.of("a")));
        assertTrue(e.getMessage().contains("(4 attempts)"), e.getMessage());
        assertTrue(Retrier.connectionFailure(e.getCause()), "a connection failure: " + e);
    }

    @Test
    void theTablesClientRetriesToo() {
        faults.addAll(List.of(fault(503), new Fault(429, Map.of("Retry-After", "0"))));
        TableResult r = TablesClient.builder(uri()).retryBackoff(Duration.ofMillis(1), Duration.ofMillis(5)).build().get("t");
        assertEquals(3, r.attempts());
        assertEquals(7, r.table().column("a").int32s().get(0));
        faults.add(fault(400));
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> TablesClient.builder(uri()).build().get("t"));
        assertEquals(1, e.attempts());
        assertEquals(4, arrivals.size());
    }
}
