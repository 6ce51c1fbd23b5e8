package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.densewire.Base64Codec;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Endianness;
import dev.densewire.MsgpackCodec;
import dev.densewire.Quantization;
import dev.densewire.Tensor;
import dev.densewire.client.DensewireClient;
import dev.densewire.jackson.DensewireJson;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The quantized-embeddings examples of java/README.md (SPEC.md section 17), compiled and run against an in-process
 * server answering int8 MessagePack bodies with their quantization id and publishing the ranges at
 * {@code GET /v1/quantization/{id}}. Each example sits between {@code // README:name} and {@code // END}.
 */
class ReadmeQuantizationExamplesTest {
    private static final float[] LOWER = {-1f, -0.5f, 0f, -0.25f};
    private static final float[] UPPER = {1f, 0.5f, 1f, 0.75f};
    private static final String OBJECT = "{\"object\":\"quantization\",\"id\":\"455fc59476466b04\",\"model\":\"m\","
            + "\"method\":\"minmax-per-dimension\",\"calibration\":{\"name\":\"python-docs-v1\",\"texts\":1000,\"sha256\":"
            + "\"81929a2d3728bde37f0c0e1316befb814dae9cafa3050c6fb3a84c4fd112a6d4\"},\"dimensions\":4,"
            + "\"lower\":\"AACAvwAAAL8AAAAAAACAvg==\",\"upper\":\"AACAPwAAAD8AAIA/AABAPw==\"}";
    private static final Tensor FLOATS = Tensor.ofFloats(2, 4, new float[] {0.5f, 0.1f, 0.9f, 0f, -0.7f, -0.4f, 0.2f, 0.7f});

    private static byte[] int8Body() {
        return MsgpackCodec.encode(new Embeddings(Quantization.quantize(FLOATS, LOWER, UPPER, Dtype.INT8), "m",
                new Embeddings.Usage(2, 2), "455fc59476466b04"));
    }

    @Test
    void decodeAndDequantize() {
        byte[] body = int8Body();
        String objectJson = OBJECT;
        // README:dequantize
        Embeddings codes = MsgpackCodec.decode(body);           // an int8 answer: codes.quantization() names its ranges
        Quantization.Ranges ranges = DensewireJson.readQuantization(objectJson); // GET /v1/quantization/{id}
        Tensor floats = Quantization.dequantize(codes.tensor(), ranges);        // float32, within half a step
        // END
        assertEquals("455fc59476466b04", codes.quantization());
        assertEquals(ranges.id(), codes.quantization());
        float[] got = floats.toFloatArray();
        float[] want = FLOATS.toFloatArray();
        for (int k = 0; k < got.length; k++) {
            double halfStep = (UPPER[k % 4] - LOWER[k % 4]) / 255.0 / 2;
            assertTrue(Math.abs(got[k] - want[k]) <= halfStep * 1.0001, k + ": " + got[k] + " vs " + want[k]);
        }
        assertEquals(Base64Codec.encodeFloats(LOWER, Endianness.LITTLE), "AACAvwAAAL8AAAAAAACAvg==");
    }

    @Test
    void clientDequantizes() throws IOException {
        HttpServer http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        AtomicInteger fetches = new AtomicInteger();
        http.createContext("/v1/embeddings", ex -> {
            ex.getRequestBody().readAllBytes();
            byte[] body = int8Body();
            ex.getResponseHeaders().add("Content-Type", "application/vnd.msgpack");
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        http.createContext("/v1/quantization/455fc59476466b04", ex -> {
            fetches.incrementAndGet();
            byte[] body = OBJECT.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        http.start();
        String server = "http://127.0.0.1:" + http.getAddress().getPort();
        List<String> texts = List.of("hello", "world");
        try {
            // README:quantized-client
            DensewireClient client = DensewireClient.builder(URI.create(server))
                    .dtype(Dtype.INT8)  // 1 byte a dimension on the wire instead of 4
                    .dequantize(true)   // back to float32 with the ranges of GET /v1/quantization/{id}, fetched once
                    .build();
            Embeddings e = client.embed(texts);
            e.tensor().dtype();         // FLOAT32
            e.quantization();           // the id of the ranges the server quantized with
            // END
            assertEquals(Dtype.FLOAT32, e.tensor().dtype());
            assertEquals("455fc59476466b04", e.quantization());
            assertEquals(Quantization.dequantize(Quantization.quantize(FLOATS, LOWER, UPPER, Dtype.INT8), LOWER, UPPER), e.tensor());
            client.embed(texts);
            assertEquals(1, fetches.get());
        } finally {
            http.stop(0);
        }
    }

    @Test
    void readmeShowsTheseExamplesVerbatim() throws IOException {
        ReadmeSnippets.assertShownVerbatim(ReadmeQuantizationExamplesTest.class, 2);
    }
}
