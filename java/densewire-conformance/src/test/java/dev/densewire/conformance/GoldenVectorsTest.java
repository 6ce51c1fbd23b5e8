package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.Base64Codec;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.MsgpackCodec;
import dev.densewire.ProtobufCodec;
import dev.densewire.RawCodec;
import dev.densewire.Tensor;
import dev.densewire.arrow.ArrowCodec;
import dev.densewire.jackson.DensewireJson;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.function.Executable;

/**
 * The golden vectors of testdata/golden/ (SPEC.md section 13): every case Java claims (capabilities.json), one
 * dynamic test each, named by its case id. A claimed format this library did not support would fail here; the
 * cases of unclaimed features are listed in the output (Capabilities), never silently skipped.
 */
class GoldenVectorsTest {
    /** The version of SPEC.md this library implements; generate.py --check keeps it equal to SPEC.md's. */
    static final String IMPLEMENTED_SPEC_VERSION = "1.4";

    @TestFactory
    Stream<DynamicNode> golden() {
        Map<String, CaseRunner> runners = new LinkedHashMap<>();
        runners.put("tensors.json", GoldenVectorsTest::tensorCase);
        runners.put("conversions.json", GoldenVectorsTest::conversionCase);
        runners.put("invalid.json", GoldenVectorsTest::invalidCase);
        runners.put("interop.json", GoldenVectorsTest::interopCase);
        runners.put("tables.json", GoldenTablesTest::tableCase);
        runners.put("pgcopy.json", GoldenPgCopy::run);
        runners.put("quantization.json", GoldenQuantization::run);
        runners.put("retry.json", GoldenRetry::run);
        Map<String, JsonNode> cases = new LinkedHashMap<>();
        for (String name : runners.keySet()) {
            JsonNode doc = Golden.load(name);
            assertEquals(IMPLEMENTED_SPEC_VERSION, doc.get("spec_version").asText(), name + " spec_version");
            if (doc.get("cases").isEmpty()) {
                throw new IllegalStateException(name + " has no cases");
            }
            cases.put(name, doc.get("cases"));
        }
        Set<String> claimed = Capabilities.claimed(cases);
        return runners.entrySet().stream().map(e -> file(e.getKey(), cases.get(e.getKey()), claimed, e.getValue()));
    }

    private interface CaseRunner {
        void run(JsonNode c) throws Exception;
    }

    private static DynamicContainer file(String name, JsonNode cases, Set<String> claimed, CaseRunner runner) {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : cases) {
            String id = Golden.id(c);
            if (!claimed.contains(id)) {
                continue; // listed by Capabilities.claimed
            }
            Executable body = () -> {
                try {
                    runner.run(c);
                } catch (AssertionError | RuntimeException e) { // name the case in console failures too
                    throw new AssertionError(id + ": " + e.getMessage(), e);
                }
            };
            tests.add(DynamicTest.dynamicTest(id, body));
        }
        return DynamicContainer.dynamicContainer(name, tests);
    }

    // ------------------------------------------------------------------ tensors.json

    static void tensorCase(JsonNode c) {
        Embeddings expected = Golden.embeddings(c);
        Tensor tensor = expected.tensor();
        boolean exact = c.get("byte_exact").asBoolean();
        String format = c.get("format").asText();
        Endianness order = Endianness.fromWireName(c.get("byteorder").asText());
        switch (format) {
            case "base64": {
                String text = c.get("encoded_text").asText();
                assertEquals(tensor, Base64Codec.decode(text, tensor.dtype(), tensor.rows(), tensor.dims(), order));
                if (exact) {
                    assertEquals(text, Base64Codec.encode(tensor, order));
                }
                break;
            }
            case "raw": {
                byte[] body = Golden.hex(c.get("encoded_hex").asText());
                Embeddings got = RawCodec.decode(Golden.headers(c), body);
                assertEquals(expected, got);
                if (exact) {
                    assertArrayEquals(body, RawCodec.encode(tensor));
                    assertEquals(Golden.headers(c), RawCodec.headers(expected));
                }
                break;
            }
            case "msgpack": {
                byte[] body = Golden.hex(c.get("encoded_hex").asText());
                assertEquals(expected, MsgpackCodec.decode(body));
                if (exact) {
                    assertEquals(Golden.hex(body), Golden.hex(MsgpackCodec.encode(expected)));
                }
                break;
            }
            case "protobuf": {
                byte[] body = Golden.hex(c.get("encoded_hex").asText());
                boolean response = c.get("message").asText().equals("EmbeddingsResponse");
                if (response) {
                    assertEquals(expected, ProtobufCodec.decodeResponse(body));
                } else {
                    assertEquals(tensor, ProtobufCodec.decodeTensor(body));
                }
                if (exact) {
                    byte[] ours = response ? ProtobufCodec.encodeResponse(expected) : ProtobufCodec.encodeTensor(tensor);
                    assertEquals(Golden.hex(body), Golden.hex(ours));
                }
                break;
            }
            case "arrow": {
                byte[] body = Golden.hex(c.get("encoded_hex").asText());
                assertEquals(expected, ArrowCodec.decode(body));
                assertEquals(expected, ArrowCodec.decode(ArrowCodec.encode(expected)), "our own Arrow stream");
                break;
            }
            case "json": {
                Embeddings got = DensewireJson.readResponse(c.get("encoded_text").asText());
                assertEquals(tensor, got.tensor());
                if (expected.model() != null) {
                    assertEquals(expected.model(), got.model());
                    assertEquals(expected.usage(), got.usage());
                }
                assertEquals(expected.quantization(), got.quantization(), "quantization");
                EncodingFormat ef = EncodingFormat.fromWireName(c.get("encoding_format").asText());
                byte[] ours = DensewireJson.writeResponse(expected, ef, order);
                Embeddings back = DensewireJson.readResponse(ours);
                String what = "our own JSON: " + new String(ours, StandardCharsets.UTF_8);
                assertEquals(tensor, back.tensor(), what);
                assertEquals(expected.model() == null ? "" : expected.model(), back.model(), what);
                assertEquals(expected.quantization(), back.quantization(), what);
                break;
            }
            default:
                fail("format " + format + " is not supported by densewire-java");
        }
    }

    // ------------------------------------------------------------------ conversions.json

    static void conversionCase(JsonNode c) {
        Dtype from = Dtype.fromWireName(c.get("from").asText());
        Dtype to = Dtype.fromWireName(c.get("to").asText());
        JsonNode input = c.get("input");
        int rows = c.has("shape") ? c.get("shape").get(0).asInt() : 1;
        int dims = c.has("shape") ? c.get("shape").get(1).asInt() : input.size();
        Tensor src = Tensor.of(from, rows, dims, Golden.itemsLittleEndian(input, from));
        Tensor got = src.convert(to);
        Tensor want = Tensor.of(to, rows, dims, Golden.itemsLittleEndian(c.get("output"), to));
        assertEquals(Golden.hex(want.toByteArray(Endianness.BIG)), Golden.hex(got.toByteArray(Endianness.BIG)));
    }

    // ------------------------------------------------------------------ invalid.json

    static void invalidCase(JsonNode c) {
        DensewireException e = assertThrows(DensewireException.class, () -> runInvalid(c));
        assertEquals(c.get("error").asText(), e.category().code(), e.getMessage());
        if (c.has("offset")) {
            assertEquals(c.get("offset").asLong(), e.offset().orElse(-1), "offset: " + e.getMessage());
        }
        if (c.has("field")) {
            assertEquals(c.get("field").asText(), e.field().orElse(null), "field: " + e.getMessage());
        }
    }

    private static void runInvalid(JsonNode c) {
        String format = c.get("format").asText();
        if (c.get("direction").asText().equals("encode")) {
            EncodingFormat ef = EncodingFormat.fromWireName(c.get("encoding_format").asText());
            if (!format.equals("json")) {
                fail("encode direction for " + format + " is not supported");
            }
            DensewireJson.writeResponse(Embeddings.of(Golden.tensor(c)), ef, Endianness.LITTLE);
            return;
        }
        switch (format) {
            case "base64": {
                Dtype dtype = Dtype.fromWireName(c.get("dtype").asText());
                Endianness order = Endianness.fromWireName(c.get("byteorder").asText());
                JsonNode shape = c.get("shape");
                Base64Codec.decode(c.get("input_text").asText(), dtype, shape.get(0).asInt(), shape.get(1).asInt(), order);
                break;
            }
            case "raw":
                RawCodec.decode(Golden.headers(c), Golden.hex(c.get("input_hex").asText()));
                break;
            case "msgpack":
                MsgpackCodec.decode(Golden.hex(c.get("input_hex").asText()));
                break;
            case "protobuf":
                if (c.get("message").asText().equals("Tensor")) {
                    ProtobufCodec.decodeTensor(Golden.hex(c.get("input_hex").asText()));
                } else {
                    ProtobufCodec.decodeResponse(Golden.hex(c.get("input_hex").asText()));
                }
                break;
            case "json":
                if (c.has("input_hex")) { // bytes that are not UTF-8 text
                    DensewireJson.readResponse(Golden.hex(c.get("input_hex").asText()));
                } else {
                    DensewireJson.readResponse(c.get("input_text").asText());
                }
                break;
            case "arrow":
                ArrowCodec.decode(Golden.hex(c.get("input_hex").asText()));
                break;
            default:
                fail("format " + format + " is not supported by densewire-java");
        }
    }

    // ------------------------------------------------------------------ interop.json

    static void interopCase(JsonNode c) {
        Tensor tensor = Golden.tensor(c);
        Endianness order = Endianness.fromWireName(c.get("byteorder").asText());
        String text = c.get("encoded_text").asText();
        switch (c.get("format").asText()) {
            case "base64":
                assertEquals(tensor, Base64Codec.decode(text, tensor.dtype(), tensor.rows(), tensor.dims(), order));
                if (c.get("byte_exact").asBoolean()) {
                    assertEquals(text, Base64Codec.encode(tensor, order));
                }
                break;
            case "json":
                assertEquals(tensor, DensewireJson.readResponse(text).tensor());
                break;
            default:
                fail("format " + c.get("format").asText() + " is not supported by densewire-java");
        }
    }
}
