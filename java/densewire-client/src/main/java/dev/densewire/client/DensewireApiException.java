package dev.densewire.client;

import dev.densewire.DensewireException;
import java.util.OptionalDouble;

/**
 * An error answer of the embeddings API: the HTTP status and the server's error envelope (SPEC.md section 11):
 * {@code code} (the category), {@code param} (the field), {@code message} and {@code offset}.
 */
public class DensewireApiException extends DensewireException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;
    private final String type;
    private final String serverMessage;
    private final int attempts;
    private final transient OptionalDouble retryAfter;

    public DensewireApiException(int status, String code, String type, String param, String serverMessage, long offset) {
        this(status, code, type, param, serverMessage, offset, 1);
    }

    /** An error answer to the last of {@code attempts} tries of a request (the message says how many). */
    public DensewireApiException(int status, String code, String type, String param, String serverMessage, long offset,
            int attempts) {
        this(status, code, type, param, serverMessage, offset, attempts, OptionalDouble.empty());
    }

    /**
     * An error answer to the last of {@code attempts} tries of a request, whose {@code Retry-After} asked for
     * {@code retryAfter} seconds (empty without one); the message says how many attempts, and how long the server
     * asked to wait when that was more than the clients wait for ({@link RetryPolicy#MAX_RETRY_AFTER}).
     */
    public DensewireApiException(int status, String code, String type, String param, String serverMessage, long offset,
            int attempts, OptionalDouble retryAfter) {
        super(categoryOf(code, status), "HTTP " + status + (code == null ? "" : " " + code) + ": "
                + (serverMessage == null ? "(no message)" : serverMessage)
                + (attempts > 1 ? " (after " + attempts + " attempts)" : "")
                + (retryAfter.isPresent() && retryAfter.getAsDouble() > RetryPolicy.MAX_RETRY_AFTER
                        ? " (the server asks to come back in " + retryAfter.getAsDouble() + " s)" : ""), offset, param);
        this.status = status;
        this.code = code;
        this.type = type;
        this.serverMessage = serverMessage;
        this.attempts = attempts;
        this.retryAfter = retryAfter;
    }

    /**
     * The answer's {@code Retry-After} in seconds (SPEC.md 18.2: delay-seconds or an HTTP date), empty when it had
     * none: after a 429 or 503 that was not retried because it asked for more than a minute, when to come back.
     */
    public OptionalDouble retryAfter() {
        return retryAfter;
    }

    /** The category of the envelope's {@code code}, or else of the HTTP status. */
    static Category categoryOf(String code, int status) {
        if (code != null) {
            java.util.Optional<Category> c = Category.fromCode(code);
            if (c.isPresent()) {
                return c.get();
            }
        }
        switch (status) {
            case 401:
            case 403:
                return Category.UNAUTHORIZED;
            case 404:
                return Category.NOT_FOUND;
            case 406:
                return Category.NOT_ACCEPTABLE;
            case 413:
                return Category.PAYLOAD_TOO_LARGE;
            case 405:
                return Category.METHOD_NOT_ALLOWED;
            case 415:
                return Category.UNSUPPORTED_MEDIA_TYPE;
            case 500:
                return Category.INTERNAL_ERROR;
            case 422:
                return Category.INVALID_FIELD;
            case 429:
                return Category.RATE_LIMITED;
            default:
                return status >= 500 ? Category.UNAVAILABLE : Category.MALFORMED;
        }
    }

    /** The HTTP status. */
    public int status() {
        return status;
    }

    /** The envelope's {@code code} as sent (null when the body was not an error envelope). */
    public String code() {
        return code;
    }

    /** {@code invalid_request_error} or {@code server_error}, as sent. */
    public String type() {
        return type;
    }

    /** The envelope's {@code param}: the field the error is about (also {@link #field()}). */
    public String param() {
        return field().orElse(null);
    }

    /** How many times the request was sent (1 when it was not retried). */
    public int attempts() {
        return attempts;
    }

    /** The server's message, as sent. */
    public String serverMessage() {
        return serverMessage;
    }
}
