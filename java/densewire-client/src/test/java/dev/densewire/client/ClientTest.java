package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Base64Codec;
import dev.densewire.Endianness;
import dev.densewire.Format;
import dev.densewire.Quantization;
import dev.densewire.Tensor;
import dev.densewire.jackson.EmbeddingsRequest;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class ClientTest {
    private static final JsonNode GOLDEN = loadGolden();
    private TestServer server;

    private static JsonNode loadGolden() {
        try {
            Path p = Path.of(ClientTest.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            for (; p != null; p = p.getParent()) {
                Path f = p.resolve("testdata/golden/tensors.json");
                if (Files.isRegularFile(f)) {
                    return new ObjectMapper().readTree(f.toFile());
                }
            }
            throw new IllegalStateException("testdata/golden/tensors.json not found");
        } catch (IOException | URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static JsonNode golden(String id) {
        for (JsonNode c : GOLDEN.get("cases")) {
            if (c.get("id").asText().equals(id)) {
                return c;
            }
        }
        throw new IllegalArgumentException(id);
    }

    /** The tensor of the golden float32 envelope case: 2 x 3, model all-MiniLM-L6-v2, 7 tokens. */
    private static final Tensor EXPECTED = Tensor.ofFloats(2, 3, new float[] {1f, -2.5f, 0.1f, 3f, 0.5f, -1f});
    private static final String MODEL = "sentence-transformers/all-MiniLM-L6-v2";

    @BeforeEach
    void start() throws IOException {
        server = new TestServer(TestServer::numbered);
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private DensewireClient.Builder client() {
        return DensewireClient.builder(server.uri()).model("m");
    }

    private void serveGolden(Format format) {
        String tag = format == Format.JSON ? "json.base64.f32le" : format.queryName() + ".f32";
        JsonNode c = golden(tag + ".with_model_and_usage");
        server.fixedContentType = format.mediaType();
        if (c.has("encoded_text")) {
            server.fixedBody = c.get("encoded_text").asText().getBytes(StandardCharsets.UTF_8);
        } else {
            server.fixedBody = HexFormat.of().parseHex(c.get("encoded_hex").asText());
        }
        Map<String, String> headers = new LinkedHashMap<>();
        if (c.has("headers")) {
            c.get("headers").properties().forEach(e -> headers.put(e.getKey().toLowerCase(), e.getValue().asText()));
        }
        server.fixedHeaders = headers;
    }

    @Test
    void acceptPrefersRawThenMsgpackThenProtobufThenJson() {
        assertEquals("application/octet-stream, application/vnd.msgpack;q=0.9, application/protobuf;q=0.8, "
                + "application/json;q=0.5", client().build().accept());
    }

    @ParameterizedTest
    @EnumSource(Format.class)
    void decodesEveryGoldenBodyByContentType(Format format) {
        serveGolden(format);
        Embeddings e = client().build().embed(List.of("a", "b"));
        assertEquals(EXPECTED, e.tensor());
        assertEquals(MODEL, e.model());
        assertEquals(new Embeddings.Usage(7, 7), e.usage());
    }

    @Test
    void negotiatesRawByDefaultAndSendsTheRequestFields() {
        DensewireClient c = client().apiKey("k").dtype(Dtype.FLOAT32).dimensions(4).build();
        server.apiKey = "k";
        Embeddings e = c.embed(List.of("t 1", "t 2"));
        assertEquals(List.of(Format.RAW), new ArrayList<>(server.served));
        assertEquals(Tensor.ofFloats(2, 4, new float[] {1, 3, 0.5f, -1, 2, 3, 0.5f, -1}), e.tensor());
        EmbeddingsRequest sent = server.requests.peek();
        assertNotNull(sent);
        assertEquals("m", sent.model());
        assertEquals("base64", sent.encodingFormat());
        assertEquals("float32", sent.dtype());
        assertEquals(4, sent.dimensions());
    }

    @ParameterizedTest
    @EnumSource(Format.class)
    void eachFormatRoundTripsThroughTheNegotiation(Format format) {
        Embeddings e = client().formats(format).build().embed(List.of("t 7", "t 8", "t 9"));
        assertEquals(List.of(format), new ArrayList<>(server.served));
        assertEquals(3, e.tensor().rows());
        assertEquals(8f, e.tensor().row(1)[0]);
        assertEquals("m", e.model());
    }

    @Test
    void plainOpenAiJsonAnswersAreDecodedToo() {
        server.fixedBody = ("{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":1,\"embedding\":\"AABAQAAAAD8AAIC/\"},"
                + "{\"object\":\"embedding\",\"index\":0,\"embedding\":\"AACAPwAAIMDNzMw9\"}],\"model\":\"text-embedding-3-small\","
                + "\"usage\":{\"prompt_tokens\":6,\"total_tokens\":6}}").getBytes(StandardCharsets.UTF_8);
        server.fixedContentType = "application/json; charset=utf-8";
        Embeddings e = client().build().embed(List.of("a", "b"));
        assertEquals(EXPECTED, e.tensor());
        assertEquals("text-embedding-3-small", e.model());
    }

    @Test
    void gzipResponsesAreInflated() {
        Embeddings e = client().formats(Format.JSON).build().embed(List.of("t 1", "t 2", "t 3", "t 4", "t 5"));
        assertEquals(5, e.tensor().rows());
        Embeddings plain = client().formats(Format.JSON).gzip(false).build().embed(List.of("t 1", "t 2", "t 3", "t 4", "t 5"));
        assertEquals(plain, e);
    }

    @Test
    void errorEnvelopesBecomeApiExceptions() {
        server.fixedStatus = 400;
        server.fixedContentType = "application/json";
        server.fixedBody = ("{\"error\":{\"message\":\"data[1].embedding: invalid Base64 character '*' at offset 4\","
                + "\"type\":\"invalid_request_error\",\"param\":\"data[1].embedding\",\"code\":\"invalid_base64\",\"offset\":4}}")
                .getBytes(StandardCharsets.UTF_8);
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().build().embed(List.of("a")));
        assertEquals(400, e.status());
        assertEquals(Category.INVALID_BASE64, e.category());
        assertEquals("invalid_base64", e.code());
        assertEquals("data[1].embedding", e.param());
        assertEquals(4, e.offset().getAsLong());
        assertEquals("invalid_request_error", e.type());
        assertTrue(e.getMessage().contains("HTTP 400 invalid_base64"), e.getMessage());
        assertTrue(e.serverMessage().contains("'*' at offset 4"));
    }

    @Test
    void serverSideErrorsCarryTheirCategory() {
        server.apiKey = "secret";
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().apiKey("wrong").build().embed(List.of("a")));
        assertEquals(401, e.status());
        assertEquals(Category.UNAUTHORIZED, e.category());

        server.apiKey = null;
        server.responder = req -> {
            throw new DensewireException(Category.UNAVAILABLE, "model is loading", -1, null);
        };
        DensewireApiException u = assertThrows(DensewireApiException.class, () -> client().build().embed(List.of("a")));
        assertEquals(503, u.status());
        assertEquals(Category.UNAVAILABLE, u.category());
        assertEquals("server_error", u.type());
    }

    @Test
    void requestFieldErrorsNameTheField() {
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().build()
                .embed(new EmbeddingsRequest().input(List.of("t 1")).dtype("float8")));
        assertEquals(400, e.status());
        assertEquals(Category.UNKNOWN_DTYPE, e.category());
        assertEquals("dtype", e.param());
    }

    @Test
    void nonJsonErrorBodiesStillGiveTheStatus() {
        server.fixedStatus = 502;
        server.fixedContentType = "text/html";
        server.fixedBody = "<html>bad gateway</html>".getBytes(StandardCharsets.UTF_8);
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client().build().embed(List.of("a")));
        assertEquals(502, e.status());
        assertEquals(Category.UNAVAILABLE, e.category());
        assertTrue(e.getMessage().contains("bad gateway"));
    }

    @Test
    void embedManyKeepsInputOrderSumsUsageAndBoundsConcurrency() {
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            texts.add("text " + i);
        }
        server.delayMillis = 20;
        Embeddings e = client().batchSize(64).maxConcurrency(3).build().embedMany(texts);
        assertEquals(1000, e.tensor().rows());
        float[] all = e.tensor().toFloatArray();
        for (int i = 0; i < 1000; i++) {
            assertEquals(i, all[i * 4], "row " + i);
        }
        assertEquals(new Embeddings.Usage(2000, 2000), e.usage());
        assertEquals(16, server.requests.size());
        assertTrue(server.maxInFlight.get() <= 3, "in flight: " + server.maxInFlight.get());
    }

    @Test
    void embedManyFailsWithTheFirstError() {
        server.responder = req -> {
            @SuppressWarnings("unchecked")
            List<String> texts = (List<String>) req.input();
            if (texts.contains("text 300")) {
                throw new DensewireException(Category.INVALID_FIELD, "input too long", -1, "input[44]");
            }
            return TestServer.numbered(req);
        };
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            texts.add("text " + i);
        }
        DensewireApiException e = assertThrows(DensewireApiException.class,
                () -> client().batchSize(64).maxConcurrency(2).build().embedMany(texts));
        assertEquals(422, e.status());
        assertEquals("input[44]", e.param());
    }

    @Test
    void badBodiesFailWithTheirCategory() {
        server.fixedContentType = "application/octet-stream";
        server.fixedHeaders = Map.of("densewire-dtype", "float32", "densewire-shape", "2,3");
        server.fixedBody = new byte[10];
        DensewireException e = assertThrows(DensewireException.class, () -> client().build().embed(List.of("a")));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(10, e.offset().getAsLong());
    }

    // ------------------------------------------------------------------ quantized embeddings (SPEC.md 17)

    private static final float[] Q_LOWER = {-1f, -0.5f, 0f, -0.25f};
    private static final float[] Q_UPPER = {1f, 0.5f, 1f, 0.75f};

    /** The row of text "tI" (or of any other text: I = 0): {0.3 * I - 0.9, 0.1, 0.5, -0.25} before quantization. */
    private static Tensor floats(List<?> texts) {
        float[] v = new float[texts.size() * 4];
        for (int i = 0; i < texts.size(); i++) {
            String t = String.valueOf(texts.get(i));
            int number = t.matches("t[0-9]+") ? Integer.parseInt(t.substring(1)) : 0;
            v[i * 4] = 0.3f * number - 0.9f;
            v[i * 4 + 1] = 0.1f;
            v[i * 4 + 2] = 0.5f;
            v[i * 4 + 3] = -0.25f;
        }
        return Tensor.ofFloats(texts.size(), 4, v);
    }

    private String publishQuantization() {
        String id = Quantization.id(Q_LOWER, Q_UPPER);
        String object = "{\"object\":\"quantization\",\"id\":\"" + id + "\",\"model\":\"m\",\"method\":\"minmax-per-dimension\","
                + "\"calibration\":{\"name\":\"python-docs-v1\",\"texts\":1000,\"sha256\":\"00\"},\"dimensions\":4,"
                + "\"lower\":\"" + Base64Codec.encodeFloats(Q_LOWER, Endianness.LITTLE) + "\",\"upper\":\""
                + Base64Codec.encodeFloats(Q_UPPER, Endianness.LITTLE) + "\"}";
        server.quantizationObjects = Map.of(id, object.getBytes(StandardCharsets.UTF_8));
        server.responder = req -> new Embeddings(Quantization.quantize(floats((List<?>) req.input()), Q_LOWER, Q_UPPER,
                Dtype.fromWireName(req.dtype())), "m", new Embeddings.Usage(1, 1), id);
        return id;
    }

    @ParameterizedTest
    @EnumSource(value = Format.class, names = {"RAW", "MSGPACK", "PROTOBUF", "JSON", "ARROW"})
    void quantizedAnswersCarryTheirIdAndAreDequantizedWithRangesFetchedOnce(Format format) {
        String id = publishQuantization();
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            texts.add("t" + i);
        }
        for (Dtype dtype : new Dtype[] {Dtype.INT8, Dtype.UINT8}) {
            Tensor codes = Quantization.quantize(floats(texts), Q_LOWER, Q_UPPER, dtype);
            Embeddings raw = DensewireClient.builder(server.uri()).formats(format).dtype(dtype).build().embed(texts);
            assertEquals(codes, raw.tensor());
            assertEquals(id, raw.quantization());
            assertEquals(0, server.quantizationFetches.get());

            DensewireClient client = DensewireClient.builder(server.uri()).formats(format).dtype(dtype).dequantize(true)
                    .batchSize(3).maxConcurrency(2).build();
            Embeddings e = client.embedMany(texts);
            assertEquals(Quantization.dequantize(codes, Q_LOWER, Q_UPPER), e.tensor());
            assertEquals(id, e.quantization());
            client.embed(texts.subList(0, 2));
            assertEquals(1, server.quantizationFetches.get(), "one GET /v1/quantization/{id} per client and id");
            assertEquals(Quantization.Ranges.of(Q_LOWER, Q_UPPER), client.quantization(id));
            server.quantizationFetches.set(0);
        }
    }

    @Test
    void anUnknownQuantizationIdIsA404AndIsAskedAgain() {
        publishQuantization();
        server.quantizationObjects = Map.of();
        DensewireClient client = DensewireClient.builder(server.uri()).dtype(Dtype.INT8).dequantize(true).build();
        DensewireApiException e = assertThrows(DensewireApiException.class, () -> client.embed(List.of("a")));
        assertEquals(404, e.status());
        assertEquals(Category.NOT_FOUND, e.category());
        assertThrows(DensewireApiException.class, () -> client.embed(List.of("a")));
        assertEquals(2, server.quantizationFetches.get(), "a failed fetch is not kept");
    }

    @Test
    void codesWithoutAnIdCannotBeDequantized() {
        server.responder = req -> Embeddings.of(Tensor.of(Dtype.INT8, 1, 2, new byte[] {1, 2}));
        DensewireClient client = DensewireClient.builder(server.uri()).dtype(Dtype.INT8).dequantize(true).build();
        DensewireException e = assertThrows(DensewireException.class, () -> client.embed(List.of("a")));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("quantization", e.field().orElse(null));
        // floats are left as they are
        server.responder = req -> Embeddings.of(Tensor.ofFloats(1, 2, new float[] {1f, 2f}));
        assertEquals(Dtype.FLOAT32, client.embed(List.of("a")).tensor().dtype());
    }
}
