package dev.densewire;

/**
 * The element conversions of SPEC.md section 3, bit-exact: float32 to float16 / bfloat16 / binary, float64 to
 * float32, and the exact widenings back. All rounding is round-to-nearest, ties-to-even; NaN becomes the
 * canonical quiet NaN of the target with its sign kept.
 */
public final class Conversions {
    private Conversions() {
    }

    // ------------------------------------------------------------------ widening (exact)

    /** The float32 value of float16 bits (exact). */
    public static float float16ToFloat(short bits) {
        int h = bits & 0xFFFF;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1F;
        int man = h & 0x3FF;
        if (exp == 0x1F) { // Inf / NaN: keep the payload in the top fraction bits
            return Float.intBitsToFloat(sign | 0x7F800000 | (man << 13));
        }
        if (exp == 0) { // zero or subnormal: man * 2^-24
            float v = man * 0x1p-24f;
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
    }

    /** The float32 value of bfloat16 bits (exact: the top 16 bits of a float32). */
    public static float bfloat16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    // ------------------------------------------------------------------ narrowing (section 3)

    /** float32 to float16 bits (section 3.1). */
    public static short floatToFloat16(float value) {
        return doubleToFloat16(value); // every float is exactly a double, so rounding once is exact
    }

    /** float64 to float16 bits, rounding directly from float64 (section 3.5). */
    public static short doubleToFloat16(double value) {
        return (short) roundDouble(value, 5, 10);
    }

    /** float32 to bfloat16 bits by the formula of section 3.2. */
    public static short floatToBfloat16(float value) {
        int b = Float.floatToRawIntBits(value);
        if ((b & 0x7FFFFFFF) > 0x7F800000) { // NaN
            return (short) (((b >>> 16) & 0x8000) | 0x7FC0);
        }
        return (short) ((b + 0x7FFF + ((b >>> 16) & 1)) >>> 16);
    }

    /** float64 to bfloat16 bits, rounding directly from float64 (section 3.5). */
    public static short doubleToBfloat16(double value) {
        return (short) roundDouble(value, 8, 7);
    }

    /** float64 to float32 (section 3.3): IEEE rounding; NaN becomes {@code 0x7FC00000} with the sign kept. */
    public static float doubleToFloat(double value) {
        if (value != value) {
            long bits = Double.doubleToRawLongBits(value);
            return Float.intBitsToFloat((int) ((bits >>> 32) & 0x80000000L) | 0x7FC00000);
        }
        return (float) value;
    }

    /**
     * Rounds a float64 to an IEEE binary format of {@code ebits} exponent and {@code mbits} fraction bits,
     * ties to even; returns the bit pattern.
     */
    static int roundDouble(double value, int ebits, int mbits) {
        long raw = Double.doubleToRawLongBits(value);
        int sign = raw < 0 ? 1 << (ebits + mbits) : 0;
        int infBits = ((1 << ebits) - 1) << mbits;
        if (value != value) {
            return sign | infBits | (1 << (mbits - 1));
        }
        double a = Math.abs(value);
        int bias = (1 << (ebits - 1)) - 1;
        // first value that rounds to infinity: (2 - 2^-(mbits+1)) * 2^bias
        if (a >= Math.scalb(2.0 - Math.scalb(1.0, -(mbits + 1)), bias)) {
            return sign | infBits;
        }
        int emin = 1 - bias;
        if (a < Math.scalb(1.0, emin)) { // subnormal result: units of 2^(emin - mbits)
            return sign | (int) Math.rint(Math.scalb(a, mbits - emin));
        }
        int e = Math.getExponent(a);
        int r = (int) Math.rint(Math.scalb(a, mbits - e)); // in [2^mbits, 2^(mbits+1)], exact scaling
        return sign | (((e + bias - 1) << mbits) + r); // r's implicit bit carries into the exponent
    }

    // ------------------------------------------------------------------ binary (section 3.4)

    /**
     * Packs {@code d} floats into {@code ceil(d / 8)} bytes, most significant bit first; a bit is 1 iff the value
     * is greater than zero. Unused low bits of the last byte are 0.
     */
    public static void packBits(float[] src, int srcOffset, int d, byte[] dst, int dstOffset) {
        int full = d >>> 3;
        int s = srcOffset;
        for (int k = 0; k < full; k++, s += 8) {
            int b = (src[s] > 0 ? 0x80 : 0) | (src[s + 1] > 0 ? 0x40 : 0) | (src[s + 2] > 0 ? 0x20 : 0)
                    | (src[s + 3] > 0 ? 0x10 : 0) | (src[s + 4] > 0 ? 0x08 : 0) | (src[s + 5] > 0 ? 0x04 : 0)
                    | (src[s + 6] > 0 ? 0x02 : 0) | (src[s + 7] > 0 ? 0x01 : 0);
            dst[dstOffset + k] = (byte) b;
        }
        int rest = d & 7;
        if (rest != 0) {
            int b = 0;
            for (int j = 0; j < rest; j++) {
                if (src[s + j] > 0) {
                    b |= 0x80 >>> j;
                }
            }
            dst[dstOffset + full] = (byte) b;
        }
    }

    /** Bit {@code j} of a packed binary row (MSB first) as 0 or 1. */
    public static int bit(byte[] packed, int rowOffset, int j) {
        return (packed[rowOffset + (j >>> 3)] >>> (7 - (j & 7))) & 1;
    }
}
