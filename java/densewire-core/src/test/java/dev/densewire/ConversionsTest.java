package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class ConversionsTest {

    @Test
    void everyFloat16RoundTripsThroughFloat32() {
        for (int h = 0; h < 0x10000; h++) {
            float f = Conversions.float16ToFloat((short) h);
            int back = Conversions.floatToFloat16(f) & 0xFFFF;
            boolean nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
            assertEquals(nan ? (h & 0x8000) | 0x7E00 : h, back, Integer.toHexString(h));
        }
    }

    @Test
    void everyBfloat16RoundTrips() {
        for (int h = 0; h < 0x10000; h++) {
            float f = Conversions.bfloat16ToFloat((short) h);
            boolean nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
            assertEquals(nan ? (h & 0x8000) | 0x7FC0 : h, Conversions.floatToBfloat16(f) & 0xFFFF, Integer.toHexString(h));
            assertEquals(nan ? (h & 0x8000) | 0x7FC0 : h, Conversions.doubleToBfloat16(f) & 0xFFFF, Integer.toHexString(h));
        }
    }

    /** Rounding checked against an exact reference: the nearest float16 by BigDecimal distance, ties to even. */
    @Test
    void float16RoundingMatchesAnExactReference() {
        List<BigDecimal> values = new ArrayList<>();
        for (int h = 0; h <= 0x7BFF; h++) {
            values.add(new BigDecimal(Conversions.float16ToFloat((short) h)));
        }
        BigDecimal overflow = new BigDecimal(65520);
        SplittableRandom r = new SplittableRandom(3);
        for (int i = 0; i < 50_000; i++) {
            double x = i % 2 == 0 ? Float.intBitsToFloat(r.nextInt()) : Math.scalb(r.nextDouble(), r.nextInt(-30, 18));
            if (Double.isNaN(x)) {
                continue;
            }
            int got = Conversions.doubleToFloat16(x) & 0x7FFF;
            BigDecimal a = new BigDecimal(Math.abs(x));
            int want;
            if (Double.isInfinite(x) || a.compareTo(overflow) >= 0) {
                want = 0x7C00;
            } else {
                int lo = 0;
                int hi = values.size() - 1;
                while (lo < hi) { // first value >= a
                    int mid = (lo + hi) >>> 1;
                    if (values.get(mid).compareTo(a) >= 0) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                if (values.get(lo).compareTo(a) < 0) {
                    want = 0x7BFF; // above 65504 but below the overflow threshold 65520: rounds to 65504
                } else if (lo == 0) {
                    want = 0;
                } else {
                    int c = a.subtract(values.get(lo - 1)).compareTo(values.get(lo).subtract(a));
                    want = c < 0 ? lo - 1 : c > 0 ? lo : ((lo & 1) == 0 ? lo : lo - 1);
                }
            }
            assertEquals(want, got, () -> "x = " + x);
        }
    }

    @Test
    void bfloat16FormulaAgreesWithDirectRounding() {
        SplittableRandom r = new SplittableRandom(5);
        for (int i = 0; i < 200_000; i++) {
            float f = Float.intBitsToFloat(r.nextInt());
            if (Float.isNaN(f)) {
                continue;
            }
            assertEquals(Conversions.doubleToBfloat16(f), Conversions.floatToBfloat16(f), () -> "f = " + f);
        }
    }

    @Test
    void doubleToFloatKeepsTheNanSignOnly() {
        assertEquals(0x7FC00000, Float.floatToRawIntBits(Conversions.doubleToFloat(Double.longBitsToDouble(0x7FF0000000000001L))));
        assertEquals(0xFFC00000, Float.floatToRawIntBits(Conversions.doubleToFloat(Double.longBitsToDouble(0xFFF8000000000123L))));
        assertEquals(0.1f, Conversions.doubleToFloat(0.1));
    }

    @Test
    void packBitsMostSignificantFirst() {
        float[] v = {1, -1, 2, 3, 0, -0f, Float.NaN, Float.POSITIVE_INFINITY, 5, 0};
        byte[] out = new byte[2];
        Conversions.packBits(v, 0, 10, out, 0);
        assertEquals(0xB1, out[0] & 0xFF);
        assertEquals(0x80, out[1] & 0xFF);
        assertEquals(1, Conversions.bit(out, 0, 8));
        assertEquals(0, Conversions.bit(out, 0, 9));
    }
}
