package dev.densewire.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Tensor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;

/** Loading the golden files of testdata/golden/ and turning their fields into densewire values. */
final class Golden {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private Golden() {
    }

    /** testdata/golden, found by walking up from this test's class directory to the repository root. */
    static Path goldenDir() {
        try {
            Path p = Path.of(Golden.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            for (; p != null; p = p.getParent()) {
                Path candidate = p.resolve("testdata/golden");
                if (Files.isRegularFile(candidate.resolve("tensors.json"))) {
                    return candidate;
                }
            }
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("testdata/golden not found above " + Golden.class.getName());
    }

    static JsonNode load(String name) {
        try {
            return MAPPER.readTree(goldenDir().resolve(name).toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static byte[] hex(String h) {
        return HexFormat.of().parseHex(h);
    }

    static String hex(byte[] b) {
        return HexFormat.of().formatHex(b);
    }

    /** Items (hex in natural big-endian notation) laid out little-endian. */
    static byte[] itemsLittleEndian(JsonNode items, Dtype dtype) {
        int w = dtype.itemBytes();
        byte[] out = new byte[items.size() * w];
        for (int i = 0; i < items.size(); i++) {
            byte[] b = hex(items.get(i).asText());
            if (b.length != w) {
                throw new IllegalArgumentException("item " + items.get(i) + " is not " + w + " bytes");
            }
            for (int k = 0; k < w; k++) {
                out[i * w + k] = b[w - 1 - k];
            }
        }
        return out;
    }

    static Tensor tensor(JsonNode c) {
        Dtype dtype = Dtype.fromWireName(c.get("dtype").asText());
        JsonNode shape = c.get("shape");
        return Tensor.of(dtype, shape.get(0).asInt(), shape.get(1).asInt(), itemsLittleEndian(c.get("items"), dtype));
    }

    /** The expected Embeddings of a case: model, usage and quantization id when the case gives them. */
    static Embeddings embeddings(JsonNode c) {
        Embeddings.Usage usage = null;
        if (c.hasNonNull("usage")) {
            usage = new Embeddings.Usage(c.get("usage").get("prompt_tokens").asLong(), c.get("usage").get("total_tokens").asLong());
        }
        return new Embeddings(tensor(c), c.hasNonNull("model") ? c.get("model").asText() : null, usage,
                c.hasNonNull("quantization") ? c.get("quantization").asText() : null);
    }

    static Map<String, String> headers(JsonNode c) {
        Map<String, String> h = new LinkedHashMap<>();
        c.get("headers").properties().forEach(e -> h.put(e.getKey(), e.getValue().asText()));
        return h;
    }

    static String id(JsonNode c) {
        return c.get("id").asText();
    }
}
