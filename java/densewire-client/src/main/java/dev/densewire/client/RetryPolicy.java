package dev.densewire.client;

import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Objects;
import java.util.OptionalDouble;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;

/**
 * The retry schedule of every densewire client (SPEC.md section 18): when a failed attempt is sent again and after
 * how long. Retried: a {@code 429} or {@code 503} answer and a connection that failed before any byte of an answer
 * (status 0 here); nothing else. Retry {@code n} (1 for the first) waits {@code draw * min(cap, base * 2^(n-1))}
 * seconds (full jitter, {@code draw} uniform in [0, 1) from {@link #random()}) <em>on top of</em> the server's
 * {@code Retry-After}; a {@code Retry-After} over {@link #MAX_RETRY_AFTER} seconds is not waited for: the error is
 * returned at once, carrying it ({@link DensewireApiException#retryAfter()}). The defaults are the OpenAI SDKs': 2
 * retries, 0.5 s doubling to 8 s. Immutable; the clients take it apart in their builders
 * ({@code maxRetries}, {@code retryBackoff}, {@code retryRandom}).
 */
public final class RetryPolicy {
    /** A {@code Retry-After} longer than this (seconds) is not waited for: the error is returned at once. */
    public static final double MAX_RETRY_AFTER = 60.0;

    /** The default source of draws: {@link ThreadLocalRandom#nextDouble()}, uniform in [0, 1). */
    public static final DoubleSupplier DEFAULT_RANDOM = () -> ThreadLocalRandom.current().nextDouble();

    private static final RetryPolicy DEFAULTS = new RetryPolicy(2, 0.5, 8.0, DEFAULT_RANDOM);

    private final int maxRetries;
    private final double base;
    private final double cap;
    private final DoubleSupplier random;

    /**
     * {@code maxRetries} retries after the first attempt (0 never retries); {@code base} and {@code cap} the
     * backoff's first bound and its cap, in seconds; {@code random} the draws, each uniform in [0, 1) (a seeded
     * {@code new SplittableRandom(7)::nextDouble} for a reproducible schedule, a constant to test one wait).
     */
    public RetryPolicy(int maxRetries, double base, double cap, DoubleSupplier random) {
        if (maxRetries < 0) {
            throw new IllegalArgumentException("maxRetries must be at least 0, got " + maxRetries);
        }
        if (!(base >= 0 && cap >= 0 && Double.isFinite(base) && Double.isFinite(cap))) {
            throw new IllegalArgumentException("the backoff's base and cap must be finite non-negative seconds, got "
                    + base + " and " + cap);
        }
        this.maxRetries = maxRetries;
        this.base = base;
        this.cap = cap;
        this.random = Objects.requireNonNull(random, "random");
    }

    /** 2 retries, 0.5 s doubling to 8 s, draws from {@link #DEFAULT_RANDOM}. */
    public static RetryPolicy defaults() {
        return DEFAULTS;
    }

    public int maxRetries() {
        return maxRetries;
    }

    /** The backoff's first bound, seconds. */
    public double base() {
        return base;
    }

    /** The backoff's cap, seconds. */
    public double cap() {
        return cap;
    }

    /** The source of the draws. */
    public DoubleSupplier random() {
        return random;
    }

    /** The same policy drawing from {@code random}. */
    public RetryPolicy withRandom(DoubleSupplier random) {
        return new RetryPolicy(maxRetries, base, cap, random);
    }

    /** Whether a failed attempt is retried: status 429 or 503, or 0 (the connection failed before any answer). */
    public static boolean retried(int status) {
        return status == 0 || status == 429 || status == 503;
    }

    /**
     * Seconds to wait before retry {@code retry} (1 for the first) of a request whose attempt failed with
     * {@code status} (0: the connection failed before any byte of an answer) and this {@code Retry-After} header
     * value (null when absent), {@code now} the clock as Unix seconds (for HTTP dates); empty: give up (a status
     * that is not retried, the retries spent, or the server asking for more than {@link #MAX_RETRY_AFTER}
     * seconds). The retry loop's only rule (SPEC.md 18.2); binary64 throughout, in the spec's order, so that the
     * wait is the same in every language.
     */
    public OptionalDouble wait(int retry, int status, String retryAfter, double now) {
        if (!retried(status) || retry > maxRetries) {
            return OptionalDouble.empty();
        }
        OptionalDouble seconds = retryAfterSeconds(retryAfter, now);
        if (seconds.isPresent() && seconds.getAsDouble() > MAX_RETRY_AFTER) {
            return OptionalDouble.empty();
        }
        double jitter = random.getAsDouble() * bound(retry);
        return OptionalDouble.of(seconds.isPresent() ? seconds.getAsDouble() + jitter : jitter);
    }

    /**
     * {@code min(cap, base * 2^(retry-1))}: {@code Math.scalb} multiplies by the exact power of two in one rounding
     * (the product is infinite when it overflows, so that a large retry gives the cap).
     */
    double bound(int retry) {
        return Math.min(cap, Math.scalb(base, retry - 1));
    }

    /**
     * A {@code Retry-After} value (RFC 9110 section 10.2.3) in seconds from {@code now} (Unix seconds), SPEC.md
     * 18.2: after removing leading and trailing spaces and tabs, ASCII digits are delay-seconds (any number of
     * them: a huge one is more than a minute), an HTTP date (IMF-fixdate) is its distance from {@code now} (a past
     * one is 0); anything else ({@code 1.5}, {@code -1}, {@code +3}, {@code soon}, empty) and null are empty.
     */
    public static OptionalDouble retryAfterSeconds(String value, double now) {
        if (value == null) {
            return OptionalDouble.empty();
        }
        int from = 0;
        int to = value.length();
        while (from < to && (value.charAt(from) == ' ' || value.charAt(from) == '\t')) {
            from++;
        }
        while (to > from && (value.charAt(to - 1) == ' ' || value.charAt(to - 1) == '\t')) {
            to--;
        }
        String text = value.substring(from, to);
        if (text.isEmpty()) {
            return OptionalDouble.empty();
        }
        if (text.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return OptionalDouble.of(Double.parseDouble(text)); // correctly rounded, never overflows to an error
        }
        if (text.length() < 3 || !asciiLetter(text.charAt(0)) || !asciiLetter(text.charAt(1))
                || !asciiLetter(text.charAt(2))) { // a date begins with its day's name
            return OptionalDouble.empty();
        }
        long at;
        try {
            at = ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toEpochSecond();
        } catch (DateTimeParseException e) {
            return OptionalDouble.empty();
        }
        return OptionalDouble.of(Math.max(0.0, (double) at - now));
    }

    private static boolean asciiLetter(char c) {
        return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z';
    }

    /** The clock as Unix seconds, for {@link #wait} and {@link #retryAfterSeconds}. */
    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    @Override
    public String toString() {
        return "RetryPolicy[maxRetries=" + maxRetries + ", base=" + base + " s, cap=" + cap + " s]";
    }
}
