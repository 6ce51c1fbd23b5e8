package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Tensor;
import dev.densewire.jackson.Kserve;
import dev.densewire.jackson.KserveOutput;
import dev.densewire.jackson.KserveResponse;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The cases of testdata/golden/kserve.json (SPEC.md section 19) that Java claims: each response body reads to its
 * outputs (name, datatype, shape, whether binary, parameters, the items bit for bit or the BYTES elements), binary
 * tensors and elements as views of the body; the invalid bodies fail with their category, offset and field
 * (checked by {@link GoldenVectorsTest#invalidCase}).
 */
final class GoldenKserve {
    private GoldenKserve() {
    }

    static void run(JsonNode c) {
        if (Golden.id(c).startsWith("invalid.")) {
            GoldenVectorsTest.invalidCase(c);
            return;
        }
        byte[] body = Golden.hex(c.get("encoded_hex").asText());
        KserveResponse r = Kserve.decode(Golden.headers(c), body);
        JsonNode want = c.get("outputs");
        List<String> names = new ArrayList<>();
        want.forEach(o -> names.add(o.get("name").asText()));
        assertEquals(names, r.outputs().stream().map(KserveOutput::name).toList());
        assertEquals(text(c, "model_name"), r.modelName());
        assertEquals(text(c, "model_version"), r.modelVersion());
        assertEquals(text(c, "response_id"), r.id());
        for (int i = 0; i < want.size(); i++) {
            JsonNode w = want.get(i);
            KserveOutput o = r.outputs().get(i);
            assertEquals(w.get("datatype").asText(), o.datatype());
            long[] shape = new long[w.get("shape").size()];
            for (int k = 0; k < shape.length; k++) {
                shape[k] = w.get("shape").get(k).asLong();
            }
            assertArrayEquals(shape, o.shape());
            assertEquals(w.get("binary").asBoolean(), o.binary());
            ObjectNode params = o.parameters().deepCopy();
            params.remove("binary_data_size");
            assertEquals(w.get("parameters"), params);
            assertEquals(text(w.get("parameters"), "quantization"), o.quantization());
            if (w.get("datatype").asText().equals("BYTES")) {
                assertNull(o.tensor());
                List<String> hex = new ArrayList<>();
                for (ByteBuffer e : o.elements()) {
                    byte[] b = new byte[e.remaining()];
                    e.duplicate().get(b);
                    hex.add(Golden.hex(b));
                }
                List<String> wantHex = new ArrayList<>();
                w.get("elements_hex").forEach(h -> wantHex.add(h.asText()));
                assertEquals(wantHex, hex);
                if (o.binary()) { // views of the body: they see it change
                    flipBlobs(c, body);
                    for (int j = 0; j < hex.size(); j++) {
                        ByteBuffer e = o.elements().get(j);
                        assertTrue(e.isReadOnly());
                        for (int k = 0; k < e.remaining(); k++) {
                            assertEquals((byte) ~Golden.hex(hex.get(j))[k], e.get(e.position() + k));
                        }
                    }
                    flipBlobs(c, body);
                }
                continue;
            }
            Tensor t = o.tensor();
            assertNotNull(t);
            long n = shape.length == 1 ? 1 : shape[0];
            long d = shape.length == 1 ? shape[0] : shape[1];
            assertEquals(Dtype.fromWireName(w.get("dtype").asText()), t.dtype());
            assertEquals(n, t.rows());
            assertEquals(d, t.dims());
            byte[] bytes = t.toByteArray();
            int item = t.dtype().itemBytes();
            List<String> items = new ArrayList<>();
            for (int j = 0; j < bytes.length; j += item) {
                StringBuilder sb = new StringBuilder();
                for (int k = item - 1; k >= 0; k--) {
                    sb.append(String.format("%02x", bytes[j + k]));
                }
                items.add(sb.toString());
            }
            List<String> wantItems = new ArrayList<>();
            w.get("items").forEach(h -> wantItems.add(h.asText()));
            assertEquals(wantItems, items, w.get("decimal").toString());
            if (o.binary()) { // zero copy: the tensor sees the body change under it
                flipBlobs(c, body);
                byte[] after = t.toByteArray();
                flipBlobs(c, body);
                for (int j = 0; j < bytes.length; j++) {
                    assertEquals((byte) ~bytes[j], after[j], o.name() + ": the tensor is a copy, not a view of the body");
                }
            }
        }
        KserveOutput first = r.outputs().stream().filter(o -> o.tensor() != null).findFirst().orElse(null);
        if (first != null) {
            Embeddings e = r.embeddings(first.name());
            assertEquals(r.modelName(), e.model());
            assertEquals(first.quantization(), e.quantization());
            assertSame(first.tensor(), e.tensor());
        }
    }

    private static String text(JsonNode node, String key) {
        return node != null && node.has(key) ? node.get(key).asText() : null;
    }

    /** Inverts every byte after the JSON header (the blobs), in place: twice restores the body. */
    private static void flipBlobs(JsonNode c, byte[] body) {
        int h = Integer.parseInt(c.get("headers").get(Kserve.HEADER_LENGTH).asText());
        for (int j = h; j < body.length; j++) {
            body[j] = (byte) ~body[j];
        }
    }
}
