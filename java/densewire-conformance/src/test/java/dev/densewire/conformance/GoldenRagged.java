package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedMsgpack;
import dev.densewire.RaggedProtobuf;
import dev.densewire.RaggedRaw;
import dev.densewire.RaggedTensor;
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.Tensor;
import dev.densewire.arrow.RaggedArrow;
import dev.densewire.jackson.RaggedJson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The cases of testdata/golden/ragged.json and sparse.json (SPEC.md 20.8) that Java claims: each body decodes to
 * its parts (dtype, shape, offsets, the rows or the indices and values bit for bit, model and usage), binary bodies
 * other than Arrow with the parts as views of the body (changing the body changes them); where byte-exact, encoding
 * the parts gives the body (JSON: the same JSON value), and our encoding decodes to the same parts. Invalid bodies
 * fail with their category, offset and field.
 */
final class GoldenRagged {
    private static final ObjectMapper JSON = new ObjectMapper();

    private GoldenRagged() {
    }

    private static byte[] body(JsonNode c) {
        for (String k : new String[] {"encoded_text", "input_text"}) {
            if (c.has(k)) {
                return c.get(k).asText().getBytes(StandardCharsets.UTF_8);
            }
        }
        for (String k : new String[] {"encoded_hex", "input_hex"}) {
            if (c.has(k)) {
                return Golden.hex(c.get(k).asText());
            }
        }
        return new byte[0];
    }

    private static byte[] itemsLe(JsonNode c) {
        JsonNode items = c.get("items");
        int size = Dtype.fromWireName(c.get("dtype").asText()).itemBytes();
        byte[] out = new byte[items.size() * size];
        for (int i = 0; i < items.size(); i++) {
            byte[] b = Golden.hex(items.get(i).asText());
            for (int k = 0; k < size; k++) {
                out[i * size + k] = b[size - 1 - k];
            }
        }
        return out;
    }

    private static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (int) a.get(i).asLong();
        }
        return out;
    }

    private static Embeddings.Usage usage(JsonNode c) {
        JsonNode u = c.get("usage");
        return u == null || !u.isObject() ? null
                : new Embeddings.Usage(u.get("prompt_tokens").asLong(), u.get("total_tokens").asLong());
    }

    private static String model(JsonNode c) {
        return c.has("model") ? c.get("model").asText() : null;
    }

    private static boolean response(JsonNode c) {
        return c.has("message") && c.get("message").asText().endsWith("Response");
    }

    private static EncodingFormat encodingFormat(JsonNode c) {
        return c.has("encoding_format") && c.get("encoding_format").asText().equals("base64") ? EncodingFormat.BASE64
                : EncodingFormat.FLOAT;
    }

    private static Endianness order(JsonNode c) {
        return Endianness.fromWireName(c.has("byteorder") ? c.get("byteorder").asText() : "little");
    }

    static void run(JsonNode c) {
        String kind = c.get("kind").asText();
        String format = c.get("format").asText();
        byte[] body = body(c);
        Map<String, String> headers = c.has("headers") ? Golden.headers(c) : Map.of();
        if (Golden.id(c).startsWith("invalid.")) {
            GoldenVectorsTest.expectError(c, () -> {
                if (kind.equals("ragged")) {
                    decodeRagged(format, headers, body, response(c));
                } else {
                    decodeSparse(format, headers, body, response(c));
                }
            });
            return;
        }
        if (kind.equals("ragged")) {
            ragged(c, format, headers, body);
        } else {
            sparse(c, format, headers, body);
        }
    }

    static RaggedEmbeddings decodeRagged(String format, Map<String, String> headers, byte[] body, boolean response) {
        switch (format) {
            case "json":
                return RaggedJson.decodeRagged(body);
            case "raw":
                return RaggedRaw.decodeRagged(headers, body);
            case "msgpack":
                return RaggedMsgpack.decodeRagged(body);
            case "protobuf":
                return RaggedProtobuf.decodeRagged(body, response);
            case "arrow":
                return RaggedArrow.decodeRagged(body);
            default:
                throw new AssertionError("format " + format);
        }
    }

    static SparseEmbeddings decodeSparse(String format, Map<String, String> headers, byte[] body, boolean response) {
        switch (format) {
            case "json":
                return RaggedJson.decodeSparse(body);
            case "raw":
                return RaggedRaw.decodeSparse(headers, body);
            case "msgpack":
                return RaggedMsgpack.decodeSparse(body);
            case "protobuf":
                return RaggedProtobuf.decodeSparse(body, response);
            case "arrow":
                return RaggedArrow.decodeSparse(body);
            default:
                throw new AssertionError("format " + format);
        }
    }

    private static void ragged(JsonNode c, String format, Map<String, String> headers, byte[] body) {
        Dtype dtype = Dtype.fromWireName(c.get("dtype").asText());
        int[] offsets = ints(c.get("offsets"));
        int d = (int) c.get("shape").get(1).asLong();
        RaggedTensor want = RaggedTensor.of(offsets, Tensor.of(dtype, offsets[offsets.length - 1], d, itemsLe(c)));
        RaggedEmbeddings got = decodeRagged(format, headers, body, response(c));
        assertEquals(want, got.tensor());
        checkMeta(c, got.model(), got.usage());
        RaggedEmbeddings e = new RaggedEmbeddings(want, model(c), usage(c));
        byte[] ours;
        Map<String, String> ourHeaders = Map.of();
        switch (format) {
            case "json":
                ours = RaggedJson.encode(e, encodingFormat(c), order(c));
                break;
            case "raw":
                ours = RaggedRaw.encode(e);
                ourHeaders = RaggedRaw.headers(e);
                break;
            case "msgpack":
                ours = RaggedMsgpack.encode(e);
                break;
            case "protobuf":
                ours = response(c) ? RaggedProtobuf.encodeResponse(e) : RaggedProtobuf.encodeTensor(want);
                break;
            default:
                ours = RaggedArrow.encode(e);
        }
        compareEncoding(c, format, body, headers, ours, ourHeaders);
        assertEquals(want, decodeRagged(format, ourHeaders, ours, response(c)).tensor(), "our encoding");
        if (!format.equals("json") && !format.equals("arrow") && want.rows().byteLength() > 0) {
            byte[] before = got.tensor().rows().toByteArray();
            flip(body);
            assertNotEquals(ByteBuffer.wrap(before), got.tensor().rows().data(), "the rows are a copy, not a view of the body");
            flip(body);
        }
    }

    private static void sparse(JsonNode c, String format, Map<String, String> headers, byte[] body) {
        Dtype dtype = Dtype.fromWireName(c.get("dtype").asText());
        int[] offsets = ints(c.get("offsets"));
        int[] indices = ints(c.get("indices"));
        SparseTensor want = SparseTensor.of(c.get("shape").get(1).asLong(), offsets, indices,
                Tensor.of(dtype, 1, indices.length, itemsLe(c)));
        SparseEmbeddings got = decodeSparse(format, headers, body, response(c));
        assertEquals(want, got.tensor());
        checkMeta(c, got.model(), got.usage());
        SparseEmbeddings e = new SparseEmbeddings(want, model(c), usage(c));
        byte[] ours;
        Map<String, String> ourHeaders = Map.of();
        switch (format) {
            case "json":
                ours = RaggedJson.encode(e, encodingFormat(c), order(c));
                break;
            case "raw":
                ours = RaggedRaw.encode(e);
                ourHeaders = RaggedRaw.headers(e);
                break;
            case "msgpack":
                ours = RaggedMsgpack.encode(e);
                break;
            case "protobuf":
                ours = response(c) ? RaggedProtobuf.encodeResponse(e) : RaggedProtobuf.encodeTensor(want);
                break;
            default:
                ours = RaggedArrow.encode(e);
        }
        compareEncoding(c, format, body, headers, ours, ourHeaders);
        assertEquals(want, decodeSparse(format, ourHeaders, ours, response(c)).tensor(), "our encoding");
        if (!format.equals("json") && !format.equals("arrow") && want.nonZeros() > 0) {
            ByteBuffer before = ByteBuffer.wrap(want.values().toByteArray());
            flip(body);
            assertNotEquals(before, got.tensor().values().data(), "the values are a copy, not a view of the body");
            flip(body);
        }
    }

    private static void checkMeta(JsonNode c, String model, Embeddings.Usage usage) {
        if (c.has("model")) {
            assertEquals(model(c), model);
        }
        if (usage(c) != null) {
            assertEquals(usage(c), usage);
        }
    }

    private static void compareEncoding(JsonNode c, String format, byte[] body, Map<String, String> headers, byte[] ours,
            Map<String, String> ourHeaders) {
        if (format.equals("json")) {
            try {
                assertEquals(JSON.readTree(body), JSON.readTree(ours), new String(ours, StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        } else if (c.path("byte_exact").asBoolean(false)) {
            assertEquals(Golden.hex(body), Golden.hex(ours));
            if (format.equals("raw")) {
                assertEquals(headers, ourHeaders);
            }
        }
    }

    private static void flip(byte[] body) {
        for (int i = 0; i < body.length; i++) {
            body[i] = (byte) ~body[i];
        }
    }
}
