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
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.Tensor;
import dev.densewire.jackson.DensewireJson;
import java.io.IOException;
import java.net.http.HttpHeaders;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * Per-token and sparse output (TEI's {@code POST /embed_all} and {@code POST /embed_sparse}, SPEC.md 6.4): the request,
 * and the answer read as densewire's ragged or sparse tensor in the negotiated format (section 20) or as TEI's own
 * JSON ({@code [[[f32]]]}, {@code [[{index, value}]]}).
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

    /** TEI's {@code /embed_sparse} request: {@code inputs} and the options that are set. */
    static byte[] sparseRequest(List<String> texts, SparseOptions o) {
        var doc = DensewireJson.mapper().createObjectNode();
        var inputs = doc.putArray("inputs");
        texts.forEach(inputs::add);
        if (o.truncate() != null) {
            doc.put("truncate", o.truncate());
        }
        if (o.truncationDirection() != null) {
            doc.put("truncation_direction", o.truncationDirection().wire());
        }
        if (o.promptName() != null) {
            doc.put("prompt_name", o.promptName());
        }
        if (o.maxActiveDims() != null) {
            doc.put("max_active_dims", o.maxActiveDims());
        }
        return doc.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** A 2xx answer's body (its Content-Encoding undone) and format; a non-2xx answer is thrown as its API error. */
    private record Body(byte[] bytes, Format format, HttpHeaders headers) {}

    private static Body body(HttpResponse<byte[]> response, int attempts) {
        HttpHeaders h = response.headers();
        int status = response.statusCode();
        if (status >= 300) {
            throw Responses.apiError(status, h, response.body(), attempts);
        }
        byte[] body = ContentCodings.decode(ContentCodings.coding(h.firstValue("Content-Encoding").orElse(null)),
                response.body(), Responses.MAX_RESPONSE_BYTES);
        String contentType = h.firstValue("Content-Type").orElse("application/json");
        Format format = Format.fromContentType(contentType).orElseThrow(() -> new DensewireException(
                Category.UNSUPPORTED_MEDIA_TYPE, "the server answered " + contentType + ", which densewire does not decode",
                -1, "Content-Type"));
        return new Body(body, format, h);
    }

    static RaggedEmbeddings decode(HttpResponse<byte[]> response, int attempts) {
        Body b = body(response, attempts);
        byte[] body = b.bytes();
        HttpHeaders h = b.headers();
        Format format = b.format();
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

    /**
     * An {@code /embed_sparse} answer: densewire's sparse tensor in any format, or TEI's JSON (its vocabulary
     * {@code vocabSize}, null: one past the largest index); {@code n} vectors.
     */
    static SparseEmbeddings decodeSparse(HttpResponse<byte[]> response, int attempts, int n, Long vocabSize) {
        Body b = body(response, attempts);
        SparseEmbeddings e = switch (b.format()) {
            case RAW -> RaggedRaw.decodeSparse(name -> b.headers().firstValue(name).orElse(null), ByteBuffer.wrap(b.bytes()));
            case MSGPACK -> RaggedMsgpack.decodeSparse(b.bytes());
            case PROTOBUF -> RaggedProtobuf.decodeSparse(b.bytes(), true);
            case ARROW -> ArrowSupport.decodeSparse(b.bytes());
            default -> teiSparseJson(b.bytes(), vocabSize);
        };
        if (e.tensor().size() != n) {
            throw new DensewireException(Category.SHAPE_MISMATCH, "the server returned " + e.tensor().size() + " vectors for "
                    + n + " inputs", -1, "data");
        }
        return e;
    }

    /**
     * TEI's sparse answer: per input an array of {@code {index, value}}; the vocabulary {@code vocabSize}, or one past
     * the largest index when null.
     */
    static SparseEmbeddings teiSparseJson(byte[] body, Long vocabSize) {
        JsonNode doc = readJson(body, "/embed_sparse");
        if (doc == null || !doc.isArray()) {
            throw new DensewireException(Category.MALFORMED, "the /embed_sparse answer is not an array of vectors", 0, null);
        }
        int n = doc.size();
        int[] offsets = new int[n + 1];
        for (int i = 0; i < n; i++) {
            if (!doc.get(i).isArray()) {
                throw new DensewireException(Category.INVALID_FIELD, "not an array of {index, value}", -1, "[" + i + "]");
            }
            offsets[i + 1] = Math.addExact(offsets[i], doc.get(i).size());
        }
        int[] indices = new int[offsets[n]];
        float[] values = new float[offsets[n]];
        long top = 0;
        int at = 0;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < doc.get(i).size(); j++) {
                JsonNode e = doc.get(i).get(j);
                String field = "[" + i + "][" + j + "]";
                JsonNode index = e.get("index");
                if (index == null || !index.canConvertToLong() || !index.isIntegralNumber() || index.longValue() < 0
                        || index.longValue() >= SparseTensor.MAX_VOCABULARY) {
                    throw new DensewireException(Category.INVALID_FIELD, "must be an integer from 0 to 2^32 - 1", -1, field + ".index");
                }
                JsonNode value = e.get("value");
                if (value == null || !value.isNumber()) {
                    throw new DensewireException(Category.INVALID_FIELD, "must be a number", -1, field + ".value");
                }
                indices[at] = (int) index.longValue();
                values[at++] = (float) value.doubleValue();
                top = Math.max(top, index.longValue() + 1);
            }
        }
        if (vocabSize != null && vocabSize < top) {
            throw new DensewireException(Category.INVALID_FIELD, "index " + (top - 1)
                    + " of the answer is past the vocabulary size " + vocabSize + " asked for", -1, "vocab_size");
        }
        long vocab = vocabSize != null ? vocabSize : Math.max(top, 1);
        return SparseEmbeddings.of(SparseTensor.of(vocab, offsets, indices, Tensor.ofFloats(1, values.length, values)));
    }

    private static JsonNode readJson(byte[] body, String route) {
        try {
            return DensewireJson.mapper().readTree(body);
        } catch (IOException e) {
            throw new DensewireException(Category.MALFORMED, "the " + route + " answer is not JSON: " + e.getMessage(), -1, null, e);
        }
    }

    /** TEI's answer: one array of token rows per input, every row {@code d} numbers. */
    static RaggedEmbeddings teiJson(byte[] body) {
        JsonNode doc = readJson(body, "/embed_all");
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
