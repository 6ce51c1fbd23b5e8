package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.client.RetryPolicy;
import java.util.OptionalDouble;

/**
 * The cases of testdata/golden/retry.json (SPEC.md section 18.4): the wait before a retry, or giving up, from the
 * failed answer's status and {@code Retry-After}, the retry number, the policy and the random draw (injected as the
 * policy's random source), through {@link RetryPolicy#wait}, the function the clients' retry loop calls; waits
 * compared bit for bit.
 */
final class GoldenRetry {
    private GoldenRetry() {
    }

    static double f64(JsonNode c, String field) {
        return Double.longBitsToDouble(Long.parseUnsignedLong(c.get(field).asText(), 16));
    }

    static String bits(double x) {
        return String.format("%016x", Double.doubleToRawLongBits(x));
    }

    static void run(JsonNode c) {
        double draw = f64(c, "draw_bits");
        assertEquals(Double.parseDouble(c.get("draw").asText()), draw, 0.0, "draw and draw_bits");
        RetryPolicy policy = new RetryPolicy(c.get("max_retries").asInt(), f64(c, "base_bits"), f64(c, "cap_bits"), () -> draw);
        String retryAfter = c.has("retry_after") ? c.get("retry_after").asText() : null;
        double now = c.get("now").asDouble();
        OptionalDouble wait = policy.wait(c.get("retry").asInt(), c.get("status").asInt(), retryAfter, now);
        if (c.has("wait")) {
            assertTrue(wait.isPresent(), "gave up; the spec waits " + c.get("wait").asText() + " s");
            assertEquals(c.get("wait_bits").asText(), bits(wait.getAsDouble()),
                    "waits " + wait.getAsDouble() + " s; the spec " + c.get("wait").asText());
            return;
        }
        assertTrue(wait.isEmpty(), "waits " + wait + " s; the spec gives up (" + c.get("give_up").asText() + ")");
        if (c.get("give_up").asText().equals("retry_after_too_long")) { // the value the 429/503 error carries
            OptionalDouble seconds = RetryPolicy.retryAfterSeconds(retryAfter, now);
            assertTrue(seconds.isPresent() && seconds.getAsDouble() > RetryPolicy.MAX_RETRY_AFTER, "" + seconds);
            assertEquals(Double.parseDouble(c.get("retry_after_seconds").asText()), seconds.getAsDouble(), 0.0,
                    "retry_after_seconds");
        }
    }
}
