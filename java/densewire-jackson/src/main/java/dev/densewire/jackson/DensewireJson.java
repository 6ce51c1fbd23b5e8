package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamReadException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.JsonEnvelope;
import dev.densewire.Quantization;
import java.io.CharConversionException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The JSON envelope of SPEC.md section 6 with Jackson: read responses (densewire's or any OpenAI-compatible
 * server's) into {@link Embeddings}, write the canonical response, read and write requests and error envelopes.
 * Every failure is a {@link DensewireException} with the category and field the spec gives.
 */
public final class DensewireJson {
    private static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .build();

    private DensewireJson() {
    }

    /** The mapper used here (plain Jackson defaults plus fast double parsing, strict about trailing tokens). */
    public static ObjectMapper mapper() {
        return MAPPER;
    }

    // ------------------------------------------------------------------ responses

    public static Embeddings readResponse(byte[] json) {
        return read(json, null, null).toEmbeddings();
    }

    public static Embeddings readResponse(String json) {
        return read(null, json, null).toEmbeddings();
    }

    public static Embeddings readResponse(InputStream json) {
        return read(null, null, json).toEmbeddings();
    }

    /** The response POJO as read, before its rows are decoded. */
    public static EmbeddingsResponse readResponsePojo(byte[] json) {
        return read(json, null, null);
    }

    private static EmbeddingsResponse read(byte[] bytes, String text, InputStream in) {
        if (bytes != null) {
            requireUtf8(bytes);
        }
        EmbeddingsResponse r = parsing(() -> bytes != null ? MAPPER.readValue(bytes, EmbeddingsResponse.class)
                : text != null ? MAPPER.readValue(text, EmbeddingsResponse.class)
                : MAPPER.readValue(in, EmbeddingsResponse.class));
        if (r == null) {
            throw new DensewireException(Category.MALFORMED, "an embeddings response must be a JSON object", 0, null);
        }
        return r;
    }

    /** A read by Jackson: what it throws, as densewire's errors ({@link #translate}, non-UTF-8 text, I/O). */
    private interface JsonRead<T> {
        T read() throws IOException;
    }

    private static <T> T parsing(JsonRead<T> read) {
        try {
            return read.read();
        } catch (JsonProcessingException e) {
            throw translate(e);
        } catch (CharConversionException e) {
            throw new DensewireException(Category.MALFORMED, "the JSON text is not UTF-8: " + e.getMessage(), -1, null, e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The canonical response: compact, keys in spec order, rows as Base64 (in {@code order}) or numbers.
     *
     * @throws DensewireException {@code non_finite} when {@code format} is float and a value is NaN or infinite
     */
    public static byte[] writeResponse(Embeddings embeddings, EncodingFormat format, Endianness order) {
        return JsonEnvelope.encode(embeddings, format, order);
    }

    // ------------------------------------------------------------------ published quantization ranges

    /**
     * The ranges of a published quantization object (SPEC.md section 17.6: the body of
     * {@code GET /v1/quantization/{id}}, or the {@code quantization} of a {@code GET /v1/models} item), checked in
     * the spec's order: the types of {@code id}, {@code method}, {@code dimensions}, {@code lower}, {@code upper}
     * ({@code invalid_field} on the first bad one), then {@link Quantization#published}.
     */
    public static Quantization.Ranges readQuantization(byte[] json) {
        requireUtf8(json);
        return readQuantization(parsing(() -> MAPPER.readTree(json)));
    }

    public static Quantization.Ranges readQuantization(String json) {
        return readQuantization(json.getBytes(StandardCharsets.UTF_8));
    }

    /** The ranges of a published quantization object already parsed (see {@link #readQuantization(byte[])}). */
    public static Quantization.Ranges readQuantization(JsonNode object) {
        if (object == null || !object.isObject()) {
            throw new DensewireException(Category.MALFORMED, "a quantization object must be a JSON object", 0, null);
        }
        JsonNode id = object.get("id");
        if (id == null || !id.isTextual()) {
            throw quantizationField("id", "must be a string", id);
        }
        JsonNode method = object.get("method");
        if (method == null || !method.isTextual() || !Quantization.METHOD.equals(method.textValue())) {
            throw quantizationField("method", "must be the string \"" + Quantization.METHOD
                    + "\" (no other method dequantizes by SPEC.md 17.3)", method);
        }
        JsonNode dims = object.get("dimensions");
        if (dims == null || !dims.isIntegralNumber() || !dims.canConvertToLong() || dims.longValue() < 0) {
            throw quantizationField("dimensions", "must be an integer >= 0", dims);
        }
        for (String key : new String[] {"lower", "upper"}) {
            JsonNode v = object.get(key);
            if (v == null || !v.isTextual()) {
                throw quantizationField(key, "must be a Base64 string", v);
            }
        }
        return Quantization.published(id.textValue(), method.textValue(), dims.longValue(),
                object.get("lower").textValue(), object.get("upper").textValue());
    }

    private static DensewireException quantizationField(String field, String what, JsonNode got) {
        String shown = got == null ? "missing" : got.toString();
        return new DensewireException(Category.INVALID_FIELD, what + ", got " + (shown.length() > 60
                ? shown.substring(0, 60) + "..." : shown), -1, field);
    }

    // ------------------------------------------------------------------ requests and errors

    public static byte[] writeRequest(EmbeddingsRequest request) {
        try {
            return MAPPER.writeValueAsBytes(request);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("cannot write the request: " + e.getOriginalMessage(), e);
        }
    }

    /** Reads a request strictly: unknown fields are {@code invalid_field} naming the field (SPEC.md 6.1). */
    public static EmbeddingsRequest readRequest(byte[] json) {
        requireUtf8(json);
        return parsing(() -> MAPPER.readerFor(EmbeddingsRequest.class)
                .with(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES).readValue(json));
    }

    /** The error envelope of a category, message, field and offset (SPEC.md section 11). */
    public static byte[] writeError(DensewireException error) {
        ApiError e = new ApiError();
        e.error = new ApiError.Body();
        e.error.message = error.field().map(f -> f + ": ").orElse("") + error.detail();
        e.error.type = error.category().httpStatus() >= 500 ? "server_error" : "invalid_request_error";
        e.error.param = error.field().orElse(null);
        e.error.code = error.category().code();
        e.error.offset = error.offset().isPresent() ? error.offset().getAsLong() : null;
        try {
            return MAPPER.writeValueAsBytes(e);
        } catch (JsonProcessingException x) {
            throw new IllegalStateException(x);
        }
    }

    /** An error envelope, or null when the body is not one. */
    public static ApiError readError(byte[] json) {
        try {
            ApiError e = MAPPER.readValue(json, ApiError.class);
            return e == null || e.error == null ? null : e;
        } catch (IOException e) {
            return null;
        }
    }

    // ------------------------------------------------------------------ exceptions

    /**
     * A Jackson exception as a densewire error: vector errors keep their category, offset and path; bad JSON is
     * {@code malformed} at its character offset; a value of the wrong type is {@code invalid_field} on its path;
     * an unknown request field is {@code invalid_field} naming it.
     */
    public static DensewireException translate(JsonProcessingException e) {
        if (e instanceof DensewireJsonException) {
            return ((DensewireJsonException) e).toDensewireException();
        }
        if (e.getCause() instanceof DensewireException) {
            return (DensewireException) e.getCause();
        }
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof StreamReadException) { // not JSON at all: bad token, end of input
                JsonLocation loc = ((StreamReadException) t).getLocation();
                long offset = loc == null ? -1 : loc.getCharOffset() >= 0 ? loc.getCharOffset() : loc.getByteOffset();
                return new DensewireException(Category.MALFORMED, "invalid JSON: " + ((StreamReadException) t).getOriginalMessage(),
                        offset, null, e);
            }
        }
        if (e instanceof UnrecognizedPropertyException) {
            String name = ((UnrecognizedPropertyException) e).getPropertyName();
            return new DensewireException(Category.INVALID_FIELD, "unknown field", -1, name, e);
        }
        if (e instanceof JsonMappingException && !((JsonMappingException) e).getPath().isEmpty()) {
            String path = DensewireJsonException.jsonPath(((JsonMappingException) e).getPath());
            return new DensewireException(Category.INVALID_FIELD, e.getOriginalMessage(), -1, path, e);
        }
        JsonLocation loc = e.getLocation();
        long offset = loc == null ? -1 : loc.getCharOffset() >= 0 ? loc.getCharOffset() : loc.getByteOffset();
        return new DensewireException(Category.MALFORMED, "invalid JSON: " + e.getOriginalMessage(), offset, null, e);
    }

    /**
     * JSON bodies are UTF-8 (RFC 8259): a NUL among the first four bytes or a UTF-16 byte order mark, which
     * Jackson would take for UTF-16 or UTF-32 and then fail on with an I/O error, is {@code malformed} at once
     * (found by the Jazzer target TableJsonFuzzTest).
     */
    static void requireUtf8(byte[] json) {
        if (json.length >= 2 && ((json[0] & 0xFF) == 0xFE && (json[1] & 0xFF) == 0xFF
                || (json[0] & 0xFF) == 0xFF && (json[1] & 0xFF) == 0xFE)) {
            throw new DensewireException(Category.MALFORMED, "the JSON text is UTF-16 (a byte order mark), not UTF-8", 0, null);
        }
        for (int i = 0; i < Math.min(4, json.length); i++) {
            if (json[i] == 0) {
                throw new DensewireException(Category.MALFORMED, "a NUL byte: the JSON text is not UTF-8", i, null);
            }
        }
    }

    static String utf8(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }
}
