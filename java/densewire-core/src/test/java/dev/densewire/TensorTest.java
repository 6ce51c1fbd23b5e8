package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException.Category;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TensorTest {
    @Test
    void floatBufferIsAViewAndArraysAreCopies() {
        byte[] body = {0, 0, (byte) 0x80, 0x3F, 0, 0, 0, 0x40};
        Tensor t = RawCodec.decode(Map.of("densewire-dtype", "float32", "DENSEWIRE-SHAPE", "1,2"), body).tensor();
        FloatBuffer view = t.asFloatBuffer();
        float[] copy = t.toFloatArray();
        body[7] = 0x41;
        assertEquals(8f, view.get(1));
        assertEquals(2f, copy[1]);
        assertTrue(view.isReadOnly());
    }

    @Test
    void wideningEveryDtype() {
        Tensor f32 = Tensor.ofFloats(1, 4, new float[] {1f, -2.5f, 0.1f, 0f});
        assertArrayEquals(new float[] {1f, -2.5f, 0.099975586f, 0f}, f32.convert(Dtype.FLOAT16).toFloatArray());
        assertArrayEquals(new float[] {1f, -2.5f, 0.10009765625f, 0f}, f32.convert(Dtype.BFLOAT16).toFloatArray());
        assertArrayEquals(new float[] {1f, 0f, 1f, 0f}, f32.convert(Dtype.BINARY).toFloatArray());
        assertArrayEquals(new float[] {-1f, 127f}, Tensor.of(Dtype.INT8, 1, 2, new byte[] {-1, 127}).toFloatArray());
        assertArrayEquals(new float[] {255f, 127f}, Tensor.of(Dtype.UINT8, 1, 2, new byte[] {-1, 127}).toFloatArray());
        Tensor f64 = Tensor.ofDoubles(1, 2, new double[] {0.1, Double.NaN});
        assertEquals(0x7FC00000, Float.floatToRawIntBits(f64.convert(Dtype.FLOAT32).toFloatArray()[1]));
        assertArrayEquals(new double[] {0.1, Double.NaN}, f64.toDoubleArray());
    }

    @Test
    void byteOrders() {
        Tensor t = Tensor.ofFloats(1, 1, new float[] {1f});
        assertArrayEquals(new byte[] {0x3F, (byte) 0x80, 0, 0}, t.toByteArray(Endianness.BIG));
        assertEquals(t, Tensor.of(Dtype.FLOAT32, 1, 1, new byte[] {0x3F, (byte) 0x80, 0, 0}, Endianness.BIG));
    }

    @Test
    void shapeErrors() {
        DensewireException e = assertThrows(DensewireException.class, () -> Tensor.of(Dtype.FLOAT16, 2, 3, new byte[10]));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(10, e.offset().getAsLong());
        DensewireException ragged = assertThrows(DensewireException.class,
                () -> Tensor.ofFloatRows(new float[] {1, 2}, new float[] {1}));
        assertEquals(Category.SHAPE_MISMATCH, ragged.category());
        assertEquals("binary", Dtype.fromProtoValue(7).wireName());
        assertEquals(Category.UNKNOWN_DTYPE, assertThrows(DensewireException.class, () -> Dtype.fromWireName("fp16")).category());
    }

    @Test
    void rawHeadersAndTokens() {
        Embeddings e = new Embeddings(Tensor.ofFloats(1, 1, new float[] {1f}), "m", new Embeddings.Usage(2, 3));
        Map<String, String> h = RawCodec.headers(e);
        assertEquals("[Densewire-Version, Densewire-Dtype, Densewire-Shape, Densewire-Byteorder, Densewire-Model, "
                + "Densewire-Prompt-Tokens, Densewire-Total-Tokens]", h.keySet().toString());
        assertEquals(e, RawCodec.decode(h, RawCodec.encode(e.tensor())));
        DensewireException bad = assertThrows(DensewireException.class,
                () -> RawCodec.decode(Map.of("Densewire-Dtype", "float32", "Densewire-Shape", "1,1",
                        "Densewire-Total-Tokens", "x"), new byte[4]));
        assertEquals("Densewire-Total-Tokens", bad.field().orElseThrow());
    }

    @Test
    void jsonNumbersForHalfPrecisionAreShortest() {
        assertEquals("0.1", JsonEnvelope.shortestDecimal(Conversions.float16ToFloat((short) 0x2E66), Dtype.FLOAT16));
        assertEquals("0.1", JsonEnvelope.shortestDecimal(Conversions.bfloat16ToFloat((short) 0x3DCD), Dtype.BFLOAT16));
        assertEquals("65500.0", JsonEnvelope.shortestDecimal(65504f, Dtype.FLOAT16)); // reads back as 65504
        assertEquals("6E-8", JsonEnvelope.shortestDecimal(Conversions.float16ToFloat((short) 1), Dtype.FLOAT16));
        assertEquals("3.39E+38", JsonEnvelope.shortestDecimal(Conversions.bfloat16ToFloat((short) 0x7F7F), Dtype.BFLOAT16));
    }

    @Test
    void aHugeDeclaredDimensionsIsTheRowsErrorNotAnAllocation() {
        // 400,000,000 float32 dimensions for a 4-byte row: the row's length_mismatch, before 1.6 GB are allocated
        List<JsonEnvelope.Row> rows = List.of(new JsonEnvelope.Row(0, 0L, "AACAPw=="));
        DensewireException e = assertThrows(DensewireException.class,
                () -> JsonEnvelope.assemble(rows, null, null, 400_000_000L));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(4, e.offset().getAsLong());
        assertEquals("data[0].embedding", e.field().orElseThrow());
    }
}
