package dev.densewire.client;

import java.io.IOException;
import java.net.ProtocolException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.OptionalDouble;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.DoubleSupplier;
import javax.net.ssl.SSLException;

/**
 * The retry loop of both clients (SPEC.md section 18, the rule in {@link RetryPolicy#wait}): a {@code 429} or
 * {@code 503} answer and a connection that failed before any byte of an answer came (refused, reset or closed, a
 * name that did not resolve, a host that could not be reached) are sent again, at most {@code maxRetries} times,
 * after the policy's wait: full jitter on top of the server's {@code Retry-After}. Any other answer, a timeout of
 * this client, a TLS failure and an answer that broke off after its head came are returned or raised at once, as
 * is a 429 or 503 whose {@code Retry-After} is over a minute. The wait is scheduled (no thread sleeps), rounded up
 * to whole nanoseconds.
 */
final class Retrier {
    private final HttpClient http;
    private volatile RetryPolicy policy;

    Retrier(HttpClient http, int maxRetries, Duration base, Duration cap) {
        this.http = http;
        this.policy = new RetryPolicy(maxRetries, seconds(base), seconds(cap), RetryPolicy.DEFAULT_RANDOM);
    }

    /** Draws the jitter from {@code random} (the builders' {@code retryRandom}); set by the client's constructor. */
    void drawFrom(DoubleSupplier random) {
        policy = policy.withRandom(random);
    }

    RetryPolicy policy() {
        return policy;
    }

    /** A duration in seconds, one rounding: nanoseconds (exact below 2^53) divided by 10^9. */
    static double seconds(Duration d) {
        return d.toNanos() / 1e9;
    }

    /** {@code maxRetries}, checked for both clients' builders. */
    static int checkMaxRetries(int maxRetries) {
        if (maxRetries < 0) {
            throw new IllegalArgumentException("maxRetries must be at least 0, got " + maxRetries);
        }
        return maxRetries;
    }

    /** The backoff bounds, checked for both clients' builders. */
    static void checkBackoff(Duration base, Duration cap) {
        if (base.isNegative() || cap.isNegative()) {
            throw new IllegalArgumentException("backoff durations must not be negative");
        }
    }

    /** The random source of the builders' {@code retryRandom}, checked. */
    static DoubleSupplier checkRandom(DoubleSupplier random) {
        return Objects.requireNonNull(random, "random");
    }

    /** The formats of a builder's {@code formats(...)}, first occurrence kept, at least one. */
    @SafeVarargs
    static <E> List<E> preference(E... preference) {
        List<E> list = new ArrayList<>(new LinkedHashSet<>(Arrays.asList(preference)));
        if (list.isEmpty()) {
            throw new IllegalArgumentException("at least one format");
        }
        return list;
    }

    /** An answer and the number of attempts it took. */
    record Answer<T>(HttpResponse<T> response, int attempts) {
    }

    /** The request sent until it gets an answer that is not retried, or the retries are spent. */
    <T> CompletableFuture<Answer<T>> send(HttpRequest request, HttpResponse.BodyHandler<T> handler) {
        return attempt(policy, request, handler, 1);
    }

    private <T> CompletableFuture<Answer<T>> attempt(RetryPolicy p, HttpRequest request,
            HttpResponse.BodyHandler<T> handler, int n) {
        AtomicBoolean answered = new AtomicBoolean(); // the answer's head came: a failure now is not retried
        HttpResponse.BodyHandler<T> marking = info -> {
            answered.set(true);
            return handler.apply(info);
        };
        return http.sendAsync(request, marking).handle((response, failure) -> {
            if (failure == null) {
                int status = response.statusCode();
                if (status == 429 || status == 503) {
                    OptionalDouble wait = p.wait(n, status, response.headers().firstValue("Retry-After").orElse(null),
                            RetryPolicy.now());
                    if (wait.isPresent()) {
                        return later(p, request, handler, n, wait.getAsDouble());
                    }
                }
                return CompletableFuture.completedFuture(new Answer<>(response, n));
            }
            Throwable cause = failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure;
            if (!answered.get() && connectionFailure(cause)) {
                OptionalDouble wait = p.wait(n, 0, null, RetryPolicy.now());
                if (wait.isPresent()) {
                    return later(p, request, handler, n, wait.getAsDouble());
                }
            }
            return CompletableFuture.<Answer<T>>failedFuture(cause instanceof IOException ? new AttemptsException(cause, n) : cause);
        }).thenCompose(f -> f);
    }

    private <T> CompletableFuture<Answer<T>> later(RetryPolicy p, HttpRequest request, HttpResponse.BodyHandler<T> handler,
            int n, double seconds) {
        long nanos = (long) Math.ceil(seconds * 1e9); // never sooner than asked
        return CompletableFuture.supplyAsync(() -> null, CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS))
                .thenCompose(x -> attempt(p, request, handler, n + 1));
    }

    /**
     * A connection that failed before any byte of an answer (the caller checks that no head came): an I/O error
     * that is not this client's timeout (the server may still be working), a TLS failure or a malformed answer.
     */
    static boolean connectionFailure(Throwable t) {
        if (!(t instanceof IOException)) {
            return false;
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof HttpTimeoutException || c instanceof SSLException || c instanceof ProtocolException) {
                return false;
            }
        }
        return true;
    }

    /** An I/O failure of the last attempt: the message says how many attempts were made. */
    static final class AttemptsException extends IOException {
        private static final long serialVersionUID = 1L;
        private final int attempts;

        AttemptsException(Throwable cause, int attempts) {
            super(cause.getClass().getSimpleName() + (cause.getMessage() == null ? "" : ": " + cause.getMessage())
                    + " (" + attempts + (attempts == 1 ? " attempt)" : " attempts)"), cause);
            this.attempts = attempts;
        }

        int attempts() {
            return attempts;
        }
    }
}
