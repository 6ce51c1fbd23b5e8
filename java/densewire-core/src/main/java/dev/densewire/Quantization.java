package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Quantized embeddings (SPEC.md section 17): the exact rule that turns float32 values into {@code uint8} /
 * {@code int8} codes with per-dimension ranges and back ({@link #quantize}, {@link #dequantize}), the
 * quantization id that names a pair of ranges ({@link #id}), and the ranges a server publishes at
 * {@code GET /v1/quantization/{id}} ({@link #published}). All arithmetic is IEEE binary64 on the float32 values
 * widened exactly, each operation rounded on its own (Java never fuses a multiply and an add).
 *
 * <pre>{@code
 * Embeddings e = MsgpackCodec.decode(body);          // an int8 response: e.quantization() names its ranges
 * Quantization.Ranges r = ...;                        // the published object of that id (DensewireJson.readQuantization)
 * Tensor floats = Quantization.dequantize(e.tensor(), r);
 * }</pre>
 */
public final class Quantization {
    /** The method of the published object: the only one this rule dequantizes. */
    public static final String METHOD = "minmax-per-dimension";

    private Quantization() {
    }

    /**
     * Checked ranges: {@code d} finite float32 items each, {@code lower[j] <= upper[j]}, and their
     * {@linkplain #id() id}. Immutable (the arrays are copied in and out).
     */
    public static final class Ranges {
        private final float[] lower;
        private final float[] upper;
        private final String id;

        private Ranges(float[] lower, float[] upper) {
            this.lower = lower;
            this.upper = upper;
            this.id = Quantization.id(lower, upper);
        }

        /**
         * Ranges of {@code lower.length} dimensions.
         *
         * @throws DensewireException {@code shape_mismatch} on {@code upper} when the lengths differ;
         *     {@code invalid_field} on {@code lower[j]} / {@code upper[j]} as {@link #checkRanges} says
         */
        public static Ranges of(float[] lower, float[] upper) {
            checkRanges(lower, upper, lower.length);
            return new Ranges(lower.clone(), upper.clone());
        }

        /** {@code d}: the number of dimensions. */
        public int dims() {
            return lower.length;
        }

        public float[] lower() {
            return lower.clone();
        }

        public float[] upper() {
            return upper.clone();
        }

        /** The quantization id of these ranges (SPEC.md section 17.4). */
        public String id() {
            return id;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Ranges && java.util.Arrays.equals(lower, ((Ranges) o).lower)
                    && java.util.Arrays.equals(upper, ((Ranges) o).upper);
        }

        @Override
        public int hashCode() {
            return id.hashCode();
        }

        @Override
        public String toString() {
            return "Quantization.Ranges(" + id + ", " + lower.length + " dimensions)";
        }
    }

    // ------------------------------------------------------------------ checks

    /**
     * SPEC.md 17.3: ranges of {@code d} items each ({@code shape_mismatch} on {@code lower}, then {@code upper},
     * otherwise), every item finite and {@code lower[j] <= upper[j]} ({@code invalid_field} on {@code lower[j]}
     * for a non-finite lower, on {@code upper[j]} for a non-finite upper or one below its lower; {@code j} the
     * first such dimension).
     */
    public static void checkRanges(float[] lower, float[] upper, int d) {
        if (lower.length != d) {
            throw DensewireException.on(Category.SHAPE_MISMATCH, "lower", lower.length + " items for " + d + " dimensions");
        }
        if (upper.length != d) {
            throw DensewireException.on(Category.SHAPE_MISMATCH, "upper", upper.length + " items for " + d + " dimensions");
        }
        for (int j = 0; j < d; j++) {
            if (!Float.isFinite(lower[j])) {
                throw DensewireException.on(Category.INVALID_FIELD, "lower[" + j + "]", lower[j] + " is not finite");
            }
            if (!Float.isFinite(upper[j]) || upper[j] < lower[j]) {
                throw DensewireException.on(Category.INVALID_FIELD, "upper[" + j + "]", Float.isFinite(upper[j])
                        ? upper[j] + " is below lower[" + j + "] = " + lower[j] : upper[j] + " is not finite");
            }
        }
    }

    // ------------------------------------------------------------------ the rule

    /** The lower ends widened exactly to binary64 (SPEC.md 17.3). */
    private static double[] widen(float[] lower) {
        double[] lo = new double[lower.length];
        for (int j = 0; j < lo.length; j++) {
            lo[j] = lower[j];
        }
        return lo;
    }

    /** {@code step[j] = (upper[j] - lower[j]) / 255} in binary64 (SPEC.md 17.3). */
    private static double[] steps(float[] lower, float[] upper) {
        double[] step = new double[lower.length];
        for (int j = 0; j < step.length; j++) {
            step[j] = ((double) upper[j] - lower[j]) / 255;
        }
        return step;
    }

    /**
     * The codes of float values (SPEC.md 17.3): {@code u = floor((x - lower[j]) / step)} clamped to 0..255 with
     * {@code step = (upper[j] - lower[j]) / 255}; NaN gives 0; when {@code step == 0}, 255 for
     * {@code x > lower[j]}, else 0. {@code int8} items are {@code u - 128}, {@code uint8} items {@code u}.
     *
     * @param values float32, float16 or bfloat16 (widened exactly), or float64 (rounded to float32 first)
     * @param dtype {@link Dtype#INT8} or {@link Dtype#UINT8}
     */
    public static Tensor quantize(Tensor values, float[] lower, float[] upper, Dtype dtype) {
        if (dtype != Dtype.INT8 && dtype != Dtype.UINT8) {
            throw new IllegalArgumentException("quantize gives int8 or uint8 codes, not " + dtype);
        }
        if (!values.dtype().isFloat()) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", "quantize takes float values, not " + values.dtype());
        }
        int n = values.rows();
        int d = values.dims();
        checkRanges(lower, upper, d);
        double[] lo = widen(lower);
        double[] step = steps(lower, upper);
        float[] x = values.dtype() == Dtype.FLOAT32 ? null : values.toFloatArray();
        java.nio.FloatBuffer xb = x == null ? values.asFloatBuffer() : java.nio.FloatBuffer.wrap(x);
        int offset = dtype == Dtype.INT8 ? 128 : 0;
        byte[] out = new byte[Math.multiplyExact(n, d)];
        for (int r = 0, k = 0; r < n; r++) {
            for (int j = 0; j < d; j++, k++) {
                out[k] = (byte) (code(xb.get(k), lo[j], step[j]) - offset);
            }
        }
        return Tensor.of(dtype, n, d, out);
    }

    /** The quantize of {@link #quantize(Tensor, float[], float[], Dtype)} with checked ranges. */
    public static Tensor quantize(Tensor values, Ranges ranges, Dtype dtype) {
        return quantize(values, ranges.lower, ranges.upper, dtype);
    }

    private static int code(float x, double lo, double step) {
        if (x != x) {
            return 0;
        }
        if (step == 0) {
            return x > lo ? 255 : 0;
        }
        double q = (x - lo) / step;
        if (q >= 255) {
            return 255;
        }
        if (q < 0) {
            return 0;
        }
        return (int) Math.floor(q);
    }

    /**
     * Codes back to float32 (SPEC.md 17.3): {@code x' = float32(lower[j] + (u + 0.5) * step)} in binary64 (the
     * product rounded, then the sum, then to float32 ties to even), {@code u} the {@code uint8} item or the
     * {@code int8} item + 128; {@code lower[j]} when {@code step == 0}.
     *
     * @param codes an {@code int8} or {@code uint8} tensor
     * @throws DensewireException {@code shape_mismatch} / {@code invalid_field} for bad ranges (see {@link #checkRanges})
     */
    public static Tensor dequantize(Tensor codes, float[] lower, float[] upper) {
        if (codes.dtype() != Dtype.INT8 && codes.dtype() != Dtype.UINT8) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", "dequantize takes int8 or uint8 codes, not "
                    + codes.dtype());
        }
        int n = codes.rows();
        int d = codes.dims();
        checkRanges(lower, upper, d);
        double[] lo = widen(lower);
        double[] step = steps(lower, upper);
        boolean signed = codes.dtype() == Dtype.INT8;
        ByteBuffer in = codes.data();
        float[] out = new float[Math.multiplyExact(n, d)];
        for (int r = 0, k = 0; r < n; r++) {
            for (int j = 0; j < d; j++, k++) {
                int u = signed ? in.get(k) + 128 : in.get(k) & 0xFF;
                out[k] = step[j] == 0 ? lower[j] : (float) (lo[j] + (u + 0.5) * step[j]);
            }
        }
        return Tensor.ofFloats(n, d, out);
    }

    /** {@link #dequantize(Tensor, float[], float[])} with checked ranges. */
    public static Tensor dequantize(Tensor codes, Ranges ranges) {
        return dequantize(codes, ranges.lower, ranges.upper);
    }

    // ------------------------------------------------------------------ binary names (SPEC.md 17.1)

    /**
     * Cohere's and sentence-transformers' {@code binary}: the packed bytes of a {@code binary} tensor (their
     * {@code ubinary}) each read as offset binary, {@code byte - 128}, as an {@code int8} tensor of
     * {@code (n, ceil(d / 8))} items.
     */
    public static Tensor toOffsetBinary(Tensor binary) {
        if (binary.dtype() != Dtype.BINARY) {
            throw new IllegalArgumentException("toOffsetBinary takes a binary tensor, not " + binary.dtype());
        }
        byte[] b = binary.toByteArray();
        for (int i = 0; i < b.length; i++) {
            b[i] ^= (byte) 0x80; // (b & 0xFF) - 128 in two's complement
        }
        return Tensor.of(Dtype.INT8, binary.rows(), binary.rowBytes(), b);
    }

    /** The inverse of {@link #toOffsetBinary}: offset-binary int8 items of {@code d} packed bits a row. */
    public static Tensor fromOffsetBinary(Tensor offsetBinary, int d) {
        if (offsetBinary.dtype() != Dtype.INT8 || offsetBinary.dims() != Dtype.BINARY.rowBytes(d)) {
            throw DensewireException.on(Category.SHAPE_MISMATCH, "shape", "an int8 tensor of " + Dtype.BINARY.rowBytes(d)
                    + " items a row holds " + d + " bits, got " + offsetBinary.dtype() + " x " + offsetBinary.dims());
        }
        byte[] b = offsetBinary.toByteArray();
        for (int i = 0; i < b.length; i++) {
            b[i] ^= (byte) 0x80;
        }
        return Tensor.of(Dtype.BINARY, offsetBinary.rows(), d, b);
    }

    // ------------------------------------------------------------------ the id

    /**
     * The quantization id (SPEC.md 17.4): the first 16 lowercase hex digits of the SHA-256 of {@code lower} and
     * {@code upper} as little-endian float32 followed by the decimal digits of {@code d}.
     */
    public static String id(float[] lower, float[] upper) {
        if (lower.length != upper.length) {
            throw DensewireException.on(Category.SHAPE_MISMATCH, "upper", upper.length + " items for " + lower.length
                    + " dimensions");
        }
        ByteBuffer bb = ByteBuffer.allocate(8 * lower.length).order(ByteOrder.LITTLE_ENDIAN);
        bb.asFloatBuffer().put(lower).put(upper);
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
        sha.update(bb.array());
        sha.update(Integer.toString(lower.length).getBytes(StandardCharsets.US_ASCII));
        return HexFormat.of().formatHex(sha.digest(), 0, 8);
    }

    // ------------------------------------------------------------------ the published object

    /**
     * The ranges of a published quantization object (SPEC.md 17.6) from its fields, checked in the spec's order
     * after the JSON types (step 1, done by the JSON reader): {@code method} is {@value #METHOD}
     * ({@code invalid_field} on {@code method}), {@code lower} then {@code upper} decode as Base64 to exactly
     * {@code 4 * dimensions} bytes ({@code invalid_base64} / {@code length_mismatch} on that field), the ranges
     * are valid ({@link #checkRanges}), and {@code id} is theirs ({@code invalid_field} on {@code id}).
     */
    public static Ranges published(String id, String method, long dimensions, String lower, String upper) {
        if (!METHOD.equals(method)) {
            throw DensewireException.on(Category.INVALID_FIELD, "method", "the method " + Dtype.quote(method)
                    + " cannot be dequantized by SPEC.md section 17.3 (" + METHOD + ")");
        }
        if (dimensions < 0 || dimensions > Integer.MAX_VALUE / 4) {
            throw DensewireException.on(Category.INVALID_FIELD, "dimensions", "must be an integer >= 0, got " + dimensions);
        }
        int d = (int) dimensions;
        float[] lo = floats(lower, d, "lower");
        float[] hi = floats(upper, d, "upper");
        checkRanges(lo, hi, d);
        Ranges r = new Ranges(lo, hi);
        if (!r.id.equals(id)) {
            throw DensewireException.on(Category.INVALID_FIELD, "id", "the object's id " + Dtype.quote(id)
                    + " is not the id of its ranges, " + r.id);
        }
        return r;
    }

    private static float[] floats(String base64, int d, String field) {
        byte[] bytes;
        try {
            bytes = Base64Codec.decode(base64);
        } catch (DensewireException e) {
            throw e.withField(field);
        }
        if (bytes.length != 4L * d) {
            throw new DensewireException(Category.LENGTH_MISMATCH, bytes.length + " bytes where " + d
                    + " float32 items need " + 4L * d, Math.min(bytes.length, 4L * d), field);
        }
        float[] out = new float[d];
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
        return out;
    }
}
