package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The quantization rule of SPEC.md section 17 at its edges, the id, and the published object's checks. */
class QuantizationTest {
    private static final float[] LOWER = {-1f, -0.5f, 0f, -0.25f};
    private static final float[] UPPER = {1f, 0.5f, 1f, 0.75f};
    private static final String LOWER_B64 = "AACAvwAAAL8AAAAAAACAvg==";
    private static final String UPPER_B64 = "AACAPwAAAD8AAIA/AABAPw==";

    private static int[] codes(Tensor t) {
        byte[] b = t.toByteArray();
        int[] out = new int[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = t.dtype() == Dtype.UINT8 ? b[i] & 0xFF : b[i];
        }
        return out;
    }

    @Test
    void edgesOfTheRule() {
        float[] lo = {-1f, -1f, -1f, -1f, -1f, -1f, -1f, -1f, -1f};
        float[] hi = {1f, 1f, 1f, 1f, 1f, 1f, 1f, 1f, 1f};
        float[] x = {-1f, 1f, 0f, -2f, 3f, Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -0f};
        Tensor values = Tensor.ofFloats(1, 9, x);
        // 0 is (0 - -1) / (2/255) = 127.5 above lower: code 127; -0.0 the same
        assertArrayEquals(new int[] {0, 255, 127, 0, 255, 0, 255, 0, 127}, codes(Quantization.quantize(values, lo, hi, Dtype.UINT8)));
        assertArrayEquals(new int[] {-128, 127, -1, -128, 127, -128, 127, -128, -1},
                codes(Quantization.quantize(values, lo, hi, Dtype.INT8)));
    }

    @Test
    void aZeroStepSplitsAtLower() {
        float[] lo = {0.5f, 0.5f, 0.5f, 0.5f};
        Tensor values = Tensor.ofFloats(1, 4, new float[] {0.5f, 0.6f, 0.4f, Float.NaN});
        assertArrayEquals(new int[] {0, 255, 0, 0}, codes(Quantization.quantize(values, lo, lo, Dtype.UINT8)));
        Tensor back = Quantization.dequantize(Tensor.of(Dtype.UINT8, 1, 4, new byte[] {0, (byte) 255, 7, 0}), lo, lo);
        assertArrayEquals(new float[] {0.5f, 0.5f, 0.5f, 0.5f}, back.toFloatArray());
    }

    @Test
    void dequantizeGivesTheMiddleOfEachInterval() {
        float[] lo = {0f, -128f};
        float[] hi = {255f, 127f};
        Tensor u = Tensor.of(Dtype.UINT8, 2, 2, new byte[] {0, 0, (byte) 255, (byte) 128});
        assertArrayEquals(new float[] {0.5f, -127.5f, 255.5f, 0.5f}, Quantization.dequantize(u, lo, hi).toFloatArray());
        Tensor i = Tensor.of(Dtype.INT8, 1, 2, new byte[] {-128, 127});
        assertArrayEquals(new float[] {0.5f, 127.5f}, Quantization.dequantize(i, lo, hi).toFloatArray());
        assertEquals(Dtype.FLOAT32, Quantization.dequantize(i, lo, hi).dtype());
    }

    @Test
    void dequantizedValuesQuantizeBackToTheirCodes() {
        Random rng = new Random(17);
        int n = 50;
        int d = 33;
        float[] lo = new float[d];
        float[] hi = new float[d];
        for (int j = 0; j < d; j++) {
            lo[j] = (float) (-0.3 * rng.nextDouble());
            hi[j] = lo[j] + (float) (0.6 * rng.nextDouble());
        }
        byte[] raw = new byte[n * d];
        rng.nextBytes(raw);
        for (Dtype dt : new Dtype[] {Dtype.INT8, Dtype.UINT8}) {
            Tensor c = Tensor.of(dt, n, d, raw);
            assertEquals(c, Quantization.quantize(Quantization.dequantize(c, lo, hi), lo, hi, dt), dt.toString());
        }
        Quantization.Ranges r = Quantization.Ranges.of(lo, hi);
        Tensor c = Tensor.of(Dtype.UINT8, n, d, raw);
        assertEquals(Quantization.dequantize(c, lo, hi), Quantization.dequantize(c, r));
    }

    @Test
    void idOfTheSpecExampleAndItsPublishedObject() {
        assertEquals("455fc59476466b04", Quantization.id(LOWER, UPPER));
        Quantization.Ranges r = Quantization.published("455fc59476466b04", "minmax-per-dimension", 4, LOWER_B64, UPPER_B64);
        assertArrayEquals(LOWER, r.lower());
        assertArrayEquals(UPPER, r.upper());
        assertEquals(4, r.dims());
        assertEquals(r, Quantization.Ranges.of(LOWER, UPPER));
        float[] other = UPPER.clone();
        other[3] = Math.nextUp(other[3]);
        assertNotEquals("455fc59476466b04", Quantization.id(LOWER, other));
    }

    @Test
    void publishedObjectErrorsInTheSpecsOrder() {
        Map<String, DensewireException> errors = Map.of(
                "method", assertThrows(DensewireException.class,
                        () -> Quantization.published("455fc59476466b04", "absmax", 4, LOWER_B64, UPPER_B64)),
                "lower", assertThrows(DensewireException.class,
                        () -> Quantization.published("455fc59476466b04", Quantization.METHOD, 4, "AACA*wAA", UPPER_B64)),
                "upper", assertThrows(DensewireException.class,
                        () -> Quantization.published("455fc59476466b04", Quantization.METHOD, 4, LOWER_B64, "AACAPwAAAD8=")),
                "id", assertThrows(DensewireException.class,
                        () -> Quantization.published("455fc59476466b05", Quantization.METHOD, 4, LOWER_B64, UPPER_B64)),
                "upper[0]", assertThrows(DensewireException.class,
                        () -> Quantization.published("x", Quantization.METHOD, 4, UPPER_B64, LOWER_B64)));
        errors.forEach((field, e) -> assertEquals(field, e.field().orElse(null), e.getMessage()));
        assertEquals(Category.INVALID_BASE64, errors.get("lower").category());
        assertEquals(4, errors.get("lower").offset().getAsLong());
        assertEquals(Category.LENGTH_MISMATCH, errors.get("upper").category());
        assertEquals(8, errors.get("upper").offset().getAsLong());
        assertEquals(Category.INVALID_FIELD, errors.get("id").category());
        assertEquals(Category.INVALID_FIELD, errors.get("upper[0]").category());
    }

    @Test
    void rangeErrorsNameTheFirstBadDimension() {
        Tensor c = Tensor.of(Dtype.UINT8, 1, 3, new byte[3]);
        DensewireException lowerLength = assertThrows(DensewireException.class,
                () -> Quantization.dequantize(c, new float[4], new float[3]));
        assertEquals(Category.SHAPE_MISMATCH, lowerLength.category());
        assertEquals("lower", lowerLength.field().orElse(null));
        DensewireException upperLength = assertThrows(DensewireException.class,
                () -> Quantization.dequantize(c, new float[3], new float[2]));
        assertEquals("upper", upperLength.field().orElse(null));
        DensewireException nan = assertThrows(DensewireException.class,
                () -> Quantization.dequantize(c, new float[] {0f, Float.NaN, 0f}, new float[] {1f, Float.NaN, 1f}));
        assertEquals(Category.INVALID_FIELD, nan.category());
        assertEquals("lower[1]", nan.field().orElse(null));
        DensewireException below = assertThrows(DensewireException.class,
                () -> Quantization.quantize(Tensor.ofFloats(1, 3, new float[3]), new float[] {0f, 0f, 2f},
                        new float[] {1f, Float.POSITIVE_INFINITY, 1f}, Dtype.INT8));
        assertEquals("upper[1]", below.field().orElse(null));
        assertThrows(IllegalArgumentException.class,
                () -> Quantization.quantize(Tensor.ofFloats(1, 1, new float[1]), new float[1], new float[1], Dtype.FLOAT16));
        assertEquals(Category.INVALID_FIELD, assertThrows(DensewireException.class,
                () -> Quantization.dequantize(Tensor.ofFloats(1, 1, new float[1]), new float[1], new float[1])).category());
    }

    @Test
    void everyFormatCarriesTheId() {
        Embeddings e = new Embeddings(Tensor.of(Dtype.INT8, 1, 3, new byte[] {-128, 0, 127}), "m",
                new Embeddings.Usage(2, 2), "455fc59476466b04");
        assertEquals(e, MsgpackCodec.decode(MsgpackCodec.encode(e)));
        assertEquals(e, ProtobufCodec.decodeResponse(ProtobufCodec.encodeResponse(e)));
        assertEquals(e, RawCodec.decode(RawCodec.headers(e), RawCodec.encode(e.tensor())));
        assertEquals("455fc59476466b04", RawCodec.headers(e).get("Densewire-Quantization"));
        Embeddings none = Embeddings.of(e.tensor());
        assertEquals(none, MsgpackCodec.decode(MsgpackCodec.encode(none)));
        assertEquals(null, ProtobufCodec.decodeResponse(ProtobufCodec.encodeResponse(none)).quantization());
    }
}
