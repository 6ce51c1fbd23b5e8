package dev.densewire.jackson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

class KserveTest {
    private static byte[] concat(String header, byte... blobs) {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[h.length + blobs.length];
        System.arraycopy(h, 0, out, 0, h.length);
        System.arraycopy(blobs, 0, out, h.length, blobs.length);
        return out;
    }

    @Test
    void aBodyInsideALargerBufferKeepsItsOffsets() {
        String header = "{\"outputs\":[{\"name\":\"e\",\"datatype\":\"UINT8\",\"shape\":[2],"
                + "\"parameters\":{\"binary_data_size\":2,\"quantization\":\"q\"}}]}";
        byte[] body = concat(header, (byte) 7, (byte) 9);
        byte[] framed = new byte[body.length + 10];
        System.arraycopy(body, 0, framed, 5, body.length);
        ByteBuffer slice = ByteBuffer.wrap(framed, 5, body.length);
        String len = Integer.toString(header.length());
        KserveResponse r = Kserve.decode(name -> name.equalsIgnoreCase(Kserve.HEADER_LENGTH) ? len : null, slice);
        KserveOutput e = r.output("e");
        assertEquals(Dtype.UINT8, e.tensor().dtype());
        assertEquals(1, e.tensor().rows());
        assertEquals(9, e.tensor().data().get(1));
        assertEquals("q", r.embeddings("e").quantization());
        assertNull(r.output("missing"));
        // an error offset counts from the buffer's position, not from the array's start
        ByteBuffer cut = ByteBuffer.wrap(framed, 5, body.length - 1);
        DensewireException x = assertThrows(DensewireException.class,
                () -> Kserve.decode(name -> name.equalsIgnoreCase(Kserve.HEADER_LENGTH) ? len : null, cut));
        assertEquals(Category.TRUNCATED, x.category());
        assertEquals(body.length - 1, x.offset().orElse(-1));
    }

    @Test
    void integralFloatsAreIntegersOfInt8JsonData() {
        byte[] body = "{\"outputs\":[{\"name\":\"e\",\"datatype\":\"INT8\",\"shape\":[1,2],\"data\":[3.0,-128]}]}"
                .getBytes(StandardCharsets.UTF_8);
        assertEquals(3, Kserve.decode(Map.of(), body).output("e").tensor().data().get(0));
        byte[] bad = "{\"outputs\":[{\"name\":\"e\",\"datatype\":\"UINT8\",\"shape\":[1,1],\"data\":[2.5]}]}"
                .getBytes(StandardCharsets.UTF_8);
        DensewireException x = assertThrows(DensewireException.class, () -> Kserve.decode(Map.of(), bad));
        assertEquals("outputs[0].data[0]", x.field().orElse(null));
    }

    @Test
    void shapesNoBodyHoldsAreErrorsNotOverflows() {
        String[][] cases = {
            {"{\"outputs\":[{\"name\":\"e\",\"datatype\":\"FP64\",\"shape\":[4294967296,4294967296],"
                + "\"parameters\":{\"binary_data_size\":0}}]}", "invalid_field"},
            {"{\"outputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[4294967296,4294967296,4294967296],"
                + "\"parameters\":{\"binary_data_size\":0}}]}", "shape_mismatch"},
            {"{\"outputs\":[{\"name\":\"e\",\"datatype\":\"FP32\",\"shape\":[1,1],"
                + "\"parameters\":{\"binary_data_size\":18446744073709551616}}]}", "invalid_field"}, // past 2^53 - 1 (SPEC 19.3)
            {"{\"outputs\":[{\"name\":\"e\",\"datatype\":\"FP32\",\"shape\":[0,4294967296],\"data\":[]}]}", "invalid_field"},
        };
        for (String[] c : cases) {
            byte[] body = concat(c[0]);
            DensewireException x = assertThrows(DensewireException.class,
                    () -> Kserve.decode(Map.of(Kserve.HEADER_LENGTH, Integer.toString(body.length)), body), c[0]);
            assertEquals(c[1], x.category().code(), c[0] + ": " + x.getMessage());
        }
    }
}
