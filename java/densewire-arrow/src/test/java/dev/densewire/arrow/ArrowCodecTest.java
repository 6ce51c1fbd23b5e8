package dev.densewire.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.Tensor;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class ArrowCodecTest {
    private static final Tensor F32 = Tensor.ofFloats(3, 5, new float[] {
        1, 2, 3, 4, 5, -1, -2, -3, -4, -5, 0.25f, Float.NaN, -0f, Float.MIN_VALUE, Float.MAX_VALUE});

    @Test
    void everyDtypeRoundTrips() {
        Tensor[] tensors = {F32, F32.convert(Dtype.FLOAT16), F32.convert(Dtype.BFLOAT16), F32.convert(Dtype.BINARY),
            Tensor.ofDoubles(2, 2, new double[] {0.1, -0.0, Double.NaN, 1e300}),
            Tensor.of(Dtype.INT8, 2, 3, new byte[] {-128, -1, 0, 1, 2, 127}),
            Tensor.of(Dtype.UINT8, 1, 2, new byte[] {-1, 7}), Tensor.ofFloats(0, 4, new float[0])};
        for (Tensor t : tensors) {
            Embeddings e = new Embeddings(t, "model-x", new Embeddings.Usage(3, 4));
            assertEquals(e, ArrowCodec.decode(ArrowCodec.encode(e)), t.toString());
            assertEquals(Embeddings.of(t), ArrowCodec.decode(ArrowCodec.encode(t)), t.toString());
        }
    }

    @Test
    void everyCutBeforeTheEndOfTheBatchIsTruncated() {
        byte[] body = ArrowCodec.encode(F32);
        int batchEnd = body.length - 8; // the end-of-stream marker: 0xFFFFFFFF, then a zero length
        for (int n = 0; n < batchEnd; n++) {
            final int len = n;
            DensewireException e = assertThrows(DensewireException.class, () -> ArrowCodec.decode(Arrays.copyOf(body, len)));
            assertEquals(DensewireException.Category.TRUNCATED, e.category(), "cut at " + n + ": " + e.getMessage());
            assertEquals(n, e.offset().getAsLong());
        }
        // the end-of-stream marker is optional (SPEC.md section 10), but a body cut inside it was cut short
        assertEquals(Embeddings.of(F32), ArrowCodec.decode(Arrays.copyOf(body, batchEnd)));
        for (int n = batchEnd + 1; n < body.length; n++) {
            final int len = n;
            DensewireException e = assertThrows(DensewireException.class, () -> ArrowCodec.decode(Arrays.copyOf(body, len)));
            assertEquals(DensewireException.Category.TRUNCATED, e.category(), "cut at " + n + ": " + e.getMessage());
            assertEquals(n, e.offset().getAsLong());
        }
        assertEquals(Embeddings.of(F32), ArrowCodec.decode(body));
    }

    @Test
    void garbageAndTruncationFailWithACategory() {
        byte[] body = ArrowCodec.encode(F32);
        DensewireException cut = assertThrows(DensewireException.class, () -> ArrowCodec.decode(Arrays.copyOf(body, 100)));
        assertTrue(cut.category() == DensewireException.Category.TRUNCATED
                || cut.category() == DensewireException.Category.MALFORMED, cut.getMessage());
        DensewireException junk = assertThrows(DensewireException.class, () -> ArrowCodec.decode(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}));
        assertTrue(junk.category() == DensewireException.Category.TRUNCATED
                || junk.category() == DensewireException.Category.MALFORMED, junk.getMessage());
    }
}
