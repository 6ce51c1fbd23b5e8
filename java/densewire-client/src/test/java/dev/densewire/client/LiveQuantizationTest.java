package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Format;
import dev.densewire.Quantization;
import dev.densewire.jackson.DensewireJson;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Quantized embeddings (SPEC.md section 17) against a real {@code densewire serve} ({@code DENSEWIRE_SERVER_URL}, as
 * LiveServerTest): the int8/uint8 codes of every format are the float32 answer quantized with the ranges the server
 * publishes, and {@code dequantize(true)} gives them back within half a step. A server whose {@code GET /v1/models}
 * publishes no {@code quantization} object (one older than SPEC 1.3) skips these tests with the reason printed.
 */
class LiveQuantizationTest {
    private static URI server;
    private static Quantization.Ranges ranges;

    @BeforeAll
    static void server() throws Exception {
        server = LiveEnv.require("DENSEWIRE_SERVER_URL", "densewire serve --model hash:384");
        HttpResponse<byte[]> models = HttpClient.newHttpClient().send(HttpRequest.newBuilder(server.resolve("/v1/models")).build(),
                HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(200, models.statusCode(), "GET /v1/models");
        JsonNode data = DensewireJson.mapper().readTree(models.body()).get("data");
        JsonNode object = data == null || data.isEmpty() ? null : data.get(0).get("quantization");
        if (object == null) {
            System.out.println("LiveQuantizationTest skipped: " + server + "/v1/models publishes no quantization object "
                    + "(a server before SPEC.md 1.3 section 17)");
        }
        assumeTrue(object != null, "the server publishes no quantization ranges");
        ranges = DensewireJson.readQuantization(object);
    }

    @Test
    void codesAreTheFloatAnswerQuantizedWithThePublishedRanges() {
        List<String> texts = List.of("hello", "world", "quantized embeddings, one byte a dimension");
        Embeddings floats = DensewireClient.builder(server).build().embed(texts);
        for (Dtype dtype : new Dtype[] {Dtype.INT8, Dtype.UINT8}) {
            for (Format f : Format.values()) {
                Embeddings codes = DensewireClient.builder(server).formats(f).dtype(dtype).build().embed(texts);
                assertEquals(ranges.id(), codes.quantization(), f + " " + dtype);
                assertEquals(Quantization.quantize(floats.tensor(), ranges, dtype), codes.tensor(), f + " " + dtype);
            }
            DensewireClient client = DensewireClient.builder(server).dtype(dtype).dequantize(true).build();
            Embeddings back = client.embed(texts);
            assertEquals(Dtype.FLOAT32, back.tensor().dtype());
            assertEquals(Quantization.dequantize(Quantization.quantize(floats.tensor(), ranges, dtype), ranges), back.tensor());
            assertNotNull(client.quantization(ranges.id()));
        }
    }
}
