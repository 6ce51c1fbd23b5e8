package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Endianness;
import dev.densewire.MsgpackCodec;
import dev.densewire.ProtobufCodec;
import dev.densewire.Quantization;
import dev.densewire.RawCodec;
import dev.densewire.Tensor;
import dev.densewire.arrow.ArrowCodec;
import dev.densewire.jackson.DensewireJson;

/**
 * The cases of testdata/golden/quantization.json (SPEC.md section 17.7), by their {@code operation}: quantize,
 * dequantize, id (and the published object), binary (Cohere's names), envelope (an int8/uint8 response with its id
 * in every format, run as the tensor cases are); the invalid ones fail with their category, field and offset.
 */
final class GoldenQuantization {
    private GoldenQuantization() {
    }

    static float[] floats(JsonNode hexItems) {
        float[] out = new float[hexItems.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = Float.intBitsToFloat((int) Long.parseLong(hexItems.get(i).asText(), 16));
        }
        return out;
    }

    static byte[] bytes(JsonNode hexItems) {
        byte[] out = new byte[hexItems.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hexItems.get(i).asText(), 16);
        }
        return out;
    }

    private static int[] shape(JsonNode c) {
        return new int[] {c.get("shape").get(0).asInt(), c.get("shape").get(1).asInt()};
    }

    static void run(JsonNode c) throws Exception {
        if (Golden.id(c).startsWith("invalid.")) {
            DensewireException e = assertThrows(DensewireException.class, () -> runInvalid(c));
            assertEquals(c.get("error").asText(), e.category().code(), e.getMessage());
            if (c.has("field")) {
                assertEquals(c.get("field").asText(), e.field().orElse(null), "field: " + e.getMessage());
            }
            if (c.has("offset")) {
                assertEquals(c.get("offset").asLong(), e.offset().orElse(-1), "offset: " + e.getMessage());
            }
            return;
        }
        switch (c.get("operation").asText()) {
            case "quantize": {
                int[] s = shape(c);
                Tensor in = Tensor.ofFloats(s[0], s[1], floats(c.get("input")));
                float[] lower = floats(c.get("lower"));
                float[] upper = floats(c.get("upper"));
                assertEquals(Golden.hex(bytes(c.get("uint8"))),
                        Golden.hex(Quantization.quantize(in, lower, upper, Dtype.UINT8).toByteArray()), "uint8");
                assertEquals(Golden.hex(bytes(c.get("int8"))),
                        Golden.hex(Quantization.quantize(in, lower, upper, Dtype.INT8).toByteArray()), "int8");
                break;
            }
            case "dequantize": {
                int[] s = shape(c);
                Tensor codes = Tensor.of(Dtype.fromWireName(c.get("dtype").asText()), s[0], s[1], bytes(c.get("codes")));
                Tensor got = Quantization.dequantize(codes, floats(c.get("lower")), floats(c.get("upper")));
                Tensor want = Tensor.ofFloats(s[0], s[1], floats(c.get("output")));
                assertEquals(Golden.hex(want.toByteArray(Endianness.BIG)), Golden.hex(got.toByteArray(Endianness.BIG)));
                break;
            }
            case "id": {
                float[] lower = floats(c.get("lower"));
                float[] upper = floats(c.get("upper"));
                assertEquals(c.get("dimensions").asInt(), lower.length);
                String id = c.get("quantization").asText();
                assertEquals(id, Quantization.id(lower, upper));
                Quantization.Ranges r = DensewireJson.readQuantization(c.get("encoded_text").asText());
                assertEquals(id, r.id());
                assertArrayEquals(lower, r.lower());
                assertArrayEquals(upper, r.upper());
                break;
            }
            case "binary": {
                int[] s = shape(c);
                Tensor packed = Tensor.ofFloats(s[0], s[1], floats(c.get("input"))).convert(Dtype.BINARY);
                assertEquals(Golden.hex(bytes(c.get("binary"))), Golden.hex(packed.toByteArray()), "binary (ubinary)");
                byte[] cohere = Quantization.toOffsetBinary(packed).toByteArray();
                JsonNode want = c.get("cohere_binary");
                assertEquals(want.size(), cohere.length);
                for (int i = 0; i < cohere.length; i++) {
                    assertEquals(want.get(i).asInt(), cohere[i], "cohere_binary[" + i + "]");
                }
                assertEquals(packed, Quantization.fromOffsetBinary(Quantization.toOffsetBinary(packed), s[1]));
                break;
            }
            case "envelope":
                GoldenVectorsTest.tensorCase(c);
                break;
            default:
                fail("operation " + c.get("operation").asText() + " is not supported by densewire-java");
        }
    }

    private static void runInvalid(JsonNode c) {
        switch (c.get("operation").asText()) {
            case "quantize": {
                int[] s = shape(c);
                Quantization.quantize(Tensor.ofFloats(s[0], s[1], floats(c.get("input"))), floats(c.get("lower")),
                        floats(c.get("upper")), Dtype.INT8);
                break;
            }
            case "dequantize": {
                int[] s = shape(c);
                Quantization.dequantize(Tensor.of(Dtype.fromWireName(c.get("dtype").asText()), s[0], s[1], bytes(c.get("codes"))),
                        floats(c.get("lower")), floats(c.get("upper")));
                break;
            }
            case "id":
                DensewireJson.readQuantization(c.get("input_text").asText());
                break;
            case "envelope": {
                String format = c.get("format").asText();
                switch (format) {
                    case "json":
                        DensewireJson.readResponse(c.get("input_text").asText());
                        break;
                    case "msgpack":
                        MsgpackCodec.decode(Golden.hex(c.get("input_hex").asText()));
                        break;
                    case "protobuf":
                        ProtobufCodec.decodeResponse(Golden.hex(c.get("input_hex").asText()));
                        break;
                    case "raw":
                        RawCodec.decode(Golden.headers(c), Golden.hex(c.get("input_hex").asText()));
                        break;
                    case "arrow":
                        ArrowCodec.decode(Golden.hex(c.get("input_hex").asText()));
                        break;
                    default:
                        fail("format " + format + " is not supported by densewire-java");
                }
                break;
            }
            default:
                fail("operation " + c.get("operation").asText() + " is not supported by densewire-java");
        }
    }
}
