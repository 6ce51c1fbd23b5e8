package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import dev.densewire.Base64Codec;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Endianness;
import dev.densewire.MsgpackCodec;
import dev.densewire.RawCodec;
import dev.densewire.Tensor;
import dev.densewire.client.DensewireApiException;
import dev.densewire.client.DensewireClient;
import dev.densewire.jackson.DensewireBase64;
import dev.densewire.jackson.DensewireJsonException;
import dev.densewire.jackson.DensewireModule;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The code of java/README.md, compiled and run. Each example sits between {@code // README:name} and
 * {@code // END} markers; {@link #readmeShowsTheseExamplesVerbatim} checks that the README contains every one of
 * them, character for character (after removing the method's indentation).
 */
class ReadmeExamplesTest {

    public static class Doc {
        public String id;
        public float[] emb;
    }

    public static class EsDoc {
        public String id;
        @DensewireBase64(byteOrder = Endianness.BIG)
        public float[] emb;
    }

    @Test
    void jacksonModule() throws Exception {
        // README:jackson
        ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());
        Doc doc = new Doc();
        doc.id = "a";
        doc.emb = new float[] {1.0f, -2.5f, 0.1f};
        String json = mapper.writeValueAsString(doc);
        // {"id":"a","emb":"AACAPwAAIMDNzMw9"}: float32 little-endian, like OpenAI's encoding_format=base64
        Doc back = mapper.readValue(json, Doc.class);
        // reading also accepts the plain array form: {"id":"a","emb":[1.0,-2.5,0.1]}
        // END
        assertEquals("{\"id\":\"a\",\"emb\":\"AACAPwAAIMDNzMw9\"}", json);
        assertArrayEquals(doc.emb, back.emb);
        assertArrayEquals(doc.emb, mapper.readValue("{\"id\":\"a\",\"emb\":[1.0,-2.5,0.1]}", Doc.class).emb);
    }

    @Test
    void bigEndian() throws Exception {
        ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());
        // README:bigendian
        EsDoc es = new EsDoc(); // @DensewireBase64(byteOrder = Endianness.BIG) float[] emb
        es.id = "a";
        es.emb = new float[] {1.0f, -2.5f, 0.1f};
        String json = mapper.writeValueAsString(es);
        // {"id":"a","emb":"P4AAAMAgAAA9zMzN"}: what Elasticsearch's pack_dense_vector and Jackson's
        // @JsonFormat(shape = BINARY) write. A whole mapper can default to big-endian instead:
        ObjectMapper esMapper = new ObjectMapper().registerModule(new DensewireModule(Endianness.BIG));
        // END
        assertEquals("{\"id\":\"a\",\"emb\":\"P4AAAMAgAAA9zMzN\"}", json);
        Doc d = new Doc();
        d.id = "a";
        d.emb = es.emb;
        assertEquals(json, esMapper.writeValueAsString(d));
    }

    @Test
    void badInput() {
        ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());
        String body = "{\"id\":\"a\",\"emb\":\"AACA*wAAAEA=\"}";
        // README:errors
        try {
            mapper.readValue(body, Doc.class);
        } catch (DensewireJsonException e) { // a JsonMappingException
            e.category(); // INVALID_BASE64
            e.offset();   // 4: the '*'
            e.jsonPath(); // "emb"
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
        // END
        DensewireJsonException e = org.junit.jupiter.api.Assertions.assertThrows(DensewireJsonException.class,
                () -> mapper.readValue(body, Doc.class));
        assertEquals(DensewireException.Category.INVALID_BASE64, e.category());
        assertEquals(4, e.offset().getAsLong());
        assertEquals("emb", e.jsonPath());
    }

    @Test
    void tensorsAndBodies() {
        // README:tensor
        Tensor t = Tensor.ofFloats(2, 3, new float[] {1f, -2.5f, 0.1f, 3f, 0.5f, -1f});
        byte[] body = MsgpackCodec.encode(new Embeddings(t, "my-model", new Embeddings.Usage(7, 7)));
        Embeddings e = MsgpackCodec.decode(body);
        FloatBuffer view = e.tensor().asFloatBuffer(); // a view of body, no copy
        float[] row1 = e.tensor().row(1);              // {3.0, 0.5, -1.0}
        String b64 = Base64Codec.encode(t, Endianness.LITTLE);
        Tensor same = Base64Codec.decode(b64, Dtype.FLOAT32, 2, 3, Endianness.LITTLE);
        Tensor half = t.convert(Dtype.FLOAT16);        // round-to-nearest-even, SPEC.md section 3
        Map<String, String> headers = RawCodec.headers(Embeddings.of(half));
        // {Densewire-Version=1, Densewire-Dtype=float16, Densewire-Shape=2,3, Densewire-Byteorder=little}
        // END
        assertEquals(-2.5f, view.get(1));
        assertArrayEquals(new float[] {3f, 0.5f, -1f}, row1);
        assertEquals(t, same);
        assertEquals("float16", headers.get("Densewire-Dtype"));
        assertEquals(12, RawCodec.encode(half).length);
    }

    @Test
    void strictBase64() {
        // README:strict
        try {
            Base64Codec.decode("AACAPwAA AEA=", Dtype.FLOAT32, 1, 2, Endianness.LITTLE);
        } catch (DensewireException e) {
            e.category(); // INVALID_BASE64
            e.offset();   // OptionalLong[8]: the space
            e.getMessage(); // "invalid Base64 character ' ' at offset 8 [invalid_base64]"
        }
        // END
        DensewireException e = org.junit.jupiter.api.Assertions.assertThrows(DensewireException.class,
                () -> Base64Codec.decode("AACAPwAA AEA=", Dtype.FLOAT32, 1, 2, Endianness.LITTLE));
        assertEquals("invalid Base64 character ' ' at offset 8 [invalid_base64]", e.getMessage());
    }

    @Test
    void client() throws Exception {
        HttpServer http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        http.createContext("/v1/embeddings", ex -> {
            ex.getRequestBody().readAllBytes();
            Tensor t = Tensor.ofFloats(2, 3, new float[] {1f, -2.5f, 0.1f, 3f, 0.5f, -1f});
            RawCodec.headers(new Embeddings(t, "m", new Embeddings.Usage(2, 2))).forEach(ex.getResponseHeaders()::add);
            ex.getResponseHeaders().add("Content-Type", "application/octet-stream");
            byte[] body = RawCodec.encode(t);
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        http.start();
        String server = "http://127.0.0.1:" + http.getAddress().getPort();
        List<String> texts = new ArrayList<>(List.of("hello", "world"));
        try {
            // README:client
            DensewireClient client = DensewireClient.builder(URI.create(server))
                    .model("sentence-transformers/all-MiniLM-L6-v2")
                    .batchSize(256)      // rows per request
                    .maxConcurrency(4)   // requests in flight
                    .build();
            try {
                Embeddings e = client.embedMany(texts); // raw float32 bodies when the server offers them
                float[] first = e.tensor().row(0);
            } catch (DensewireApiException err) {
                err.status();   // 400, 401, 422, 503, ...
                err.category(); // e.g. INVALID_FIELD
                err.param();    // e.g. "input[3]"
            }
            // END
            assertEquals(2, client.embedMany(texts).tensor().rows());
        } finally {
            http.stop(0);
        }
    }

    // ------------------------------------------------------------------ the README shows these examples

    @Test
    void readmeShowsTheseExamplesVerbatim() throws IOException {
        ReadmeSnippets.assertShownVerbatim(ReadmeExamplesTest.class, 6);
    }
}
