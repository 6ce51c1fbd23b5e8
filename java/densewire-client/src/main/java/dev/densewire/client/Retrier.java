package dev.densewire.client;

import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Retries of the densewire clients (as the OpenAI SDKs do): a {@code 429} or {@code 503} answer and a connection
 * that could not be made (nothing of the request was sent) are tried again, at most {@code maxRetries} times,
 * after an exponential backoff with full jitter (a uniform wait in {@code [0, min(cap, base * 2^(retry - 1))]}) added
 * to the server's {@code Retry-After} (seconds or an HTTP date) when it asks for at most a minute. Any other answer,
 * a caller-fault 4xx above all, is returned at once.
 */
final class Retrier {
    /** Retry-After values beyond this are not waited for (the backoff is used instead). */
    static final Duration MAX_RETRY_AFTER = Duration.ofSeconds(60);

    private final HttpClient http;
    private final int maxRetries;
    private final Duration base;
    private final Duration cap;

    Retrier(HttpClient http, int maxRetries, Duration base, Duration cap) {
        this.http = http;
        this.maxRetries = maxRetries;
        this.base = base;
        this.cap = cap;
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
        return attempt(request, handler, 1);
    }

    private <T> CompletableFuture<Answer<T>> attempt(HttpRequest request, HttpResponse.BodyHandler<T> handler, int n) {
        return http.sendAsync(request, handler).handle((response, failure) -> {
            if (failure == null) {
                int status = response.statusCode();
                if ((status == 429 || status == 503) && n <= maxRetries) {
                    return later(request, handler, n, retryAfter(response.headers().firstValue("Retry-After")));
                }
                return CompletableFuture.completedFuture(new Answer<>(response, n));
            }
            Throwable cause = failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure;
            if (connectFailure(cause) && n <= maxRetries) {
                return later(request, handler, n, Optional.<Duration>empty());
            }
            return CompletableFuture.<Answer<T>>failedFuture(cause instanceof IOException ? new AttemptsException(cause, n) : cause);
        }).thenCompose(f -> f);
    }

    private <T> CompletableFuture<Answer<T>> later(HttpRequest request, HttpResponse.BodyHandler<T> handler, int n,
            Optional<Duration> retryAfter) {
        // the jitter is added to Retry-After too, so that clients told the same wait do not all come back at once
        long millis = retryAfter.map(Duration::toMillis).orElse(0L) + backoffMillis(n);
        return CompletableFuture.supplyAsync(() -> null, CompletableFuture.delayedExecutor(millis, TimeUnit.MILLISECONDS))
                .thenCompose(x -> attempt(request, handler, n + 1));
    }

    /** Full jitter: uniform in [0, min(cap, base * 2^(retry - 1))). */
    long backoffMillis(int retry) {
        long ceiling = Math.min(cap.toMillis(), base.toMillis() << Math.min(retry - 1, 30));
        return ceiling <= 0 ? 0 : ThreadLocalRandom.current().nextLong(ceiling + 1);
    }

    /** A connection that could not be made: nothing of the request reached the server. */
    static boolean connectFailure(Throwable t) {
        for (; t != null; t = t.getCause()) {
            if (t instanceof ConnectException || t instanceof HttpConnectTimeoutException) {
                return true;
            }
        }
        return false;
    }

    /** {@code Retry-After} as a wait: delta-seconds or an HTTP date; empty when absent, invalid or over a minute. */
    static Optional<Duration> retryAfter(Optional<String> value) {
        if (value.isEmpty()) {
            return Optional.empty();
        }
        String v = value.get().trim();
        Duration d;
        if (!v.isEmpty() && v.chars().allMatch(c -> c >= '0' && c <= '9')) {
            d = v.length() > 9 ? MAX_RETRY_AFTER.plusSeconds(1) : Duration.ofSeconds(Long.parseLong(v));
        } else {
            try {
                d = Duration.between(Instant.now(), ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant());
            } catch (DateTimeParseException e) {
                return Optional.empty();
            }
            if (d.isNegative()) {
                d = Duration.ZERO;
            }
        }
        return d.compareTo(MAX_RETRY_AFTER) > 0 ? Optional.empty() : Optional.of(d);
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
