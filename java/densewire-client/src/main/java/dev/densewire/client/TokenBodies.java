package dev.densewire.client;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Format;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedMsgpack;
import dev.densewire.RaggedProtobuf;
import dev.densewire.RaggedRaw;
import dev.densewire.RaggedTensor;
import dev.densewire.Tensor;
import dev.densewire.jackson.DensewireJson;
import java.io.IOException;
import java.net.http.HttpHeaders;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * Per-token embeddings (TEI's {@code POST /embed_all}, SPEC.md 6.4): the request, and the answer read as densewire's
 * ragged tensor in the negotiated format (section 20) or as TEI's own {@code [[[f32]]]} JSON.
 */
final class TokenBodies {
    private TokenBodies() {
    }

    static byte[] request(List<String> texts, Boolean truncate) {
        var doc = DensewireJson.mapper().createObjectNode();
        var inputs = doc.putArray("inputs");
        texts.forEach(inputs::add);
        if (truncate != null) {
            doc.put("truncate", truncate);
        }
        return doc.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    static RaggedEmbeddings decode(HttpResponse<byte[]> response, int attempts) {
        HttpHeaders h = response.headers();
        int status = response.statusCode();
        if (status >= 300) {
            throw DensewireClient.apiError(status, h, response.body(), attempts);
        }
        byte[] body = ContentCodings.decode(ContentCodings.coding(h.firstValue("Content-Encoding").orElse(null)),
                response.body(), DensewireClient.MAX_RESPONSE_BYTES);
        String contentType = h.firstValue("Content-Type").orElse("application/json");
        Format format = Format.fromContentType(contentType).orElseThrow(() -> new DensewireException(
                Category.UNSUPPORTED_MEDIA_TYPE, "the server answered " + contentType + ", which densewire does not decode",
                -1, "Content-Type"));
        switch (format) {
            case RAW:
                return RaggedRaw.decodeRagged(name -> h.firstValue(name).orElse(null), ByteBuffer.wrap(body));
            case MSGPACK:
                return RaggedMsgpack.decodeRagged(body);
            case PROTOBUF:
                return RaggedProtobuf.decodeRagged(body, true);
            case ARROW:
                return ArrowSupport.decodeRagged(body);
            default:
                return teiJson(body);
        }
    }

    /** TEI's answer: one array of token rows per input, every row {@code d} numbers. */
    static RaggedEmbeddings teiJson(byte[] body) {
        JsonNode doc;
        try {
            doc = DensewireJson.mapper().readTree(body);
        } catch (IOException e) {
            throw new DensewireException(Category.MALFORMED, "the /embed_all answer is not JSON: " + e.getMessage(), -1,
                    null, e);
        }
        if (doc == null || !doc.isArray()) {
            throw new DensewireException(Category.MALFORMED, "the /embed_all answer is not an array of matrices", 0, null);
        }
        int n = doc.size();
        int[] offsets = new int[n + 1];
        int d = -1;
        for (int i = 0; i < n; i++) {
            JsonNode m = doc.get(i);
            if (!m.isArray()) {
                throw new DensewireException(Category.INVALID_FIELD, "not an array of rows", -1, "[" + i + "]");
            }
            for (JsonNode row : m) {
                d = d < 0 ? row.size() : d;
            }
            offsets[i + 1] = Math.addExact(offsets[i], m.size());
        }
        d = Math.max(d, 0);
        ByteBuffer rows = ByteBuffer.allocate(Math.multiplyExact(offsets[n], 4 * d)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            JsonNode m = doc.get(i);
            for (int r = 0; r < m.size(); r++) {
                JsonNode row = m.get(r);
                if (!row.isArray() || row.size() != d) {
                    throw new DensewireException(Category.SHAPE_MISMATCH, "row " + r + " of input " + i + " is not " + d
                            + " numbers", -1, "[" + i + "][" + r + "]");
                }
                for (JsonNode x : row) {
                    if (!x.isNumber()) {
                        throw new DensewireException(Category.INVALID_FIELD, "not a number", -1, "[" + i + "][" + r + "]");
                    }
                    rows.putFloat((float) x.doubleValue());
                }
            }
        }
        rows.flip();
        return RaggedEmbeddings.of(RaggedTensor.of(offsets, Tensor.of(Dtype.FLOAT32, offsets[n], d, rows)));
    }
}
