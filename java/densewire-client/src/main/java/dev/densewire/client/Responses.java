package dev.densewire.client;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import dev.densewire.Format;
import dev.densewire.MsgpackCodec;
import dev.densewire.ProtobufCodec;
import dev.densewire.RawCodec;
import dev.densewire.Tensor;
import dev.densewire.jackson.ApiError;
import dev.densewire.jackson.DensewireJson;
import java.net.http.HttpHeaders;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The answers of {@code POST /v1/embeddings} as {@link DensewireClient} reads them: a body decoded by its
 * Content-Type and Content-Encoding, the batches of {@link DensewireClient#embedMany} joined, and an error answer's
 * envelope as a {@link DensewireApiException} (shared by {@link TokenBodies} and {@link TablesClient}).
 */
final class Responses {
    private Responses() {
    }

    /** Concatenates the rows of batches of one dtype and width; usage is summed, the model is the first's. */
    static Embeddings concat(List<Embeddings> parts) {
        if (parts.size() == 1) {
            return parts.get(0);
        }
        Tensor first = parts.get(0).tensor();
        int rows = 0;
        long prompt = 0;
        long total = 0;
        for (Embeddings p : parts) {
            Tensor t = p.tensor();
            if (t.dtype() != first.dtype() || t.dims() != first.dims()) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "batches disagree: " + first.dtype() + " x "
                        + first.dims() + " and " + t.dtype() + " x " + t.dims(), -1, null);
            }
            rows += t.rows();
            if (p.usage() != null) {
                prompt += p.usage().promptTokens();
                total += p.usage().totalTokens();
            }
        }
        String quantization = parts.get(0).quantization();
        for (Embeddings p : parts) {
            if (!Objects.equals(quantization, p.quantization())) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "batches were quantized with different ranges: "
                        + quantization + " and " + p.quantization(), -1, "quantization");
            }
        }
        ByteBuffer all = ByteBuffer.allocate(Math.multiplyExact(rows, first.rowBytes()));
        for (Embeddings p : parts) {
            all.put(p.tensor().data());
        }
        all.flip();
        return new Embeddings(Tensor.of(first.dtype(), rows, first.dims(), all), parts.get(0).model(),
                new Embeddings.Usage(prompt, total), quantization);
    }

    static Embeddings decode(HttpResponse<byte[]> response, int attempts) {
        HttpHeaders h = response.headers();
        int status = response.statusCode();
        if (status >= 300) {
            throw apiError(status, h, response.body(), attempts);
        }
        byte[] body = ContentCodings.decode(ContentCodings.coding(h.firstValue("Content-Encoding").orElse(null)),
                response.body(), MAX_RESPONSE_BYTES);
        String contentType = h.firstValue("Content-Type").orElse("application/json");
        Format format = Format.fromContentType(contentType).orElseThrow(() -> new DensewireException(
                Category.UNSUPPORTED_MEDIA_TYPE, "the server answered " + contentType + ", which densewire does not decode",
                -1, "Content-Type"));
        switch (format) {
            case RAW:
                return RawCodec.decode(name -> h.firstValue(name).orElse(null), ByteBuffer.wrap(body));
            case MSGPACK:
                return MsgpackCodec.decode(body);
            case PROTOBUF:
                return ProtobufCodec.decodeResponse(body);
            case ARROW:
                return ArrowSupport.decode(body);
            default:
                return DensewireJson.readResponse(body);
        }
    }

    /** Decompressed bodies are bounded: a larger one is {@code payload_too_large}. */
    static final long MAX_RESPONSE_BYTES = 1L << 31;

    /** An error answer as an exception: the envelope's code, param, message and offset, and the attempts made. */
    static DensewireApiException apiError(int status, HttpHeaders h, byte[] raw, int attempts) {
        java.util.OptionalDouble retryAfter = RetryPolicy.retryAfterSeconds(h.firstValue("Retry-After").orElse(null),
                RetryPolicy.now());
        byte[] body;
        try {
            body = ContentCodings.decode(ContentCodings.coding(h.firstValue("Content-Encoding").orElse(null)), raw, 1 << 20);
        } catch (DensewireException e) {
            body = new byte[0];
        }
        ApiError e = DensewireJson.readError(body);
        if (e == null) {
            DensewireApiException dialect = dialectError(status, body, attempts, retryAfter);
            if (dialect != null) {
                return dialect;
            }
            String text = new String(body, 0, Math.min(body.length, 200), java.nio.charset.StandardCharsets.UTF_8);
            return new DensewireApiException(status, null, null, null, text.isEmpty() ? null : text, -1, attempts,
                    retryAfter);
        }
        return new DensewireApiException(status, e.error.code, e.error.type, e.error.param, e.error.message,
                e.error.offset == null ? -1 : e.error.offset, attempts, retryAfter);
    }

    /** A field path at the start of a dialect's error text: {@code prompt_name: ...}, {@code inputs[0]: ...}. */
    private static final Pattern LEADING_FIELD = Pattern.compile("^([A-Za-z_][A-Za-z0-9_.\\[\\]]*): ");

    /**
     * The error of TEI's routes ({@code {"error": "<field>: <message>", "error_type"}}), KServe's and Ollama's: the
     * text is the message, densewire's {@code code}, {@code param} and {@code offset} beside it when sent, else the
     * field the text's leading path; null when the body is not such an object.
     */
    private static DensewireApiException dialectError(int status, byte[] body, int attempts,
            java.util.OptionalDouble retryAfter) {
        JsonNode doc;
        try {
            doc = DensewireJson.mapper().readTree(body);
        } catch (java.io.IOException ex) {
            return null;
        }
        if (doc == null || !doc.isObject() || !doc.path("error").isTextual()) {
            return null;
        }
        String text = doc.get("error").asText();
        String param = doc.path("param").isTextual() ? doc.get("param").asText() : null;
        if (param == null) {
            Matcher m = LEADING_FIELD.matcher(text);
            param = m.find() ? m.group(1) : null;
        }
        String code = doc.path("code").isTextual() ? doc.get("code").asText() : null;
        String type = doc.path("error_type").isTextual() ? doc.get("error_type").asText() : null;
        long offset = doc.path("offset").canConvertToLong() ? doc.get("offset").asLong() : -1;
        return new DensewireApiException(status, code, type, param, text, offset, attempts, retryAfter);
    }
}
