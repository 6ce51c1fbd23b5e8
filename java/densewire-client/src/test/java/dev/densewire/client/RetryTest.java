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
import java.util.Optional;
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
        assertEquals(Optional.of(Duration.ofSeconds(3)), Retrier.retryAfter(Optional.of("3")));
        assertEquals(Optional.of(Duration.ZERO), Retrier.retryAfter(Optional.of("0")));
        assertEquals(Optional.empty(), Retrier.retryAfter(Optional.of("120")), "beyond a minute: the backoff instead");
        assertEquals(Optional.empty(), Retrier.retryAfter(Optional.of("soon")));
        assertEquals(Optional.empty(), Retrier.retryAfter(Optional.empty()));
        String inTenSeconds = DateTimeFormatter.RFC_1123_DATE_TIME.format(ZonedDateTime.now(ZoneOffset.UTC).plusSeconds(10));
        Duration d = Retrier.retryAfter(Optional.of(inTenSeconds)).orElseThrow();
        assertTrue(d.compareTo(Duration.ofSeconds(11)) <= 0 && d.compareTo(Duration.ofSeconds(8)) >= 0, d.toString());
        String past = DateTimeFormatter.RFC_1123_DATE_TIME.format(ZonedDateTime.now(ZoneOffset.UTC).minusSeconds(10));
        assertEquals(Optional.of(Duration.ZERO), Retrier.retryAfter(Optional.of(past)));
    }

    @Test
    void backoffIsFullJitterUnderTheCap() {
        Retrier r = new Retrier(null, 2, Duration.ofMillis(100), Duration.ofMillis(1000));
        for (int retry = 1; retry <= 8; retry++) {
            long ceiling = Math.min(1000, 100L << (retry - 1));
            List<Long> waits = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {
                long w = r.backoffMillis(retry);
                assertTrue(w >= 0 && w <= ceiling, "retry " + retry + " waited " + w);
                waits.add(w);
            }
            // full jitter: the waits spread over [0, ceiling], not bunched at the top
            assertTrue(waits.stream().anyMatch(w -> w < ceiling / 4) && waits.stream().anyMatch(w -> w > 3 * ceiling / 4), "retry " + retry);
        }
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
        assertTrue(Retrier.connectFailure(e), "a connection failure: " + e);
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
