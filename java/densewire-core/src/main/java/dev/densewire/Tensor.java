package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.Arrays;

/**
 * A row-major {@code (rows, dims)} matrix of one {@link Dtype} (SPEC.md section 1), held as its little-endian
 * bytes. Decoders wrap the body they were given without copying; {@link #asFloatBuffer()} is a view of those
 * bytes, {@link #toFloatArray()} a bulk copy. Instances are immutable.
 */
public final class Tensor {
    private final Dtype dtype;
    private final int rows;
    private final int dims;
    private final ByteBuffer data; // little-endian, read-only, position 0, limit = byteLength

    private Tensor(Dtype dtype, int rows, int dims, ByteBuffer data) {
        this.dtype = dtype;
        this.rows = rows;
        this.dims = dims;
        this.data = data;
    }

    // ------------------------------------------------------------------ construction

    /**
     * A tensor over {@code littleEndianData} (from its position to its limit, not copied).
     *
     * @throws DensewireException {@code length_mismatch} when the byte count is not {@code rows * row_bytes}
     */
    public static Tensor of(Dtype dtype, int rows, int dims, ByteBuffer littleEndianData) {
        if (rows < 0 || dims < 0) {
            throw DensewireException.on(Category.INVALID_FIELD, "shape", "negative shape " + rows + "," + dims);
        }
        long expected = (long) rows * dtype.rowBytes(dims);
        checkLength(littleEndianData.remaining(), expected, null);
        ByteBuffer view = littleEndianData.slice().asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
        return new Tensor(dtype, rows, dims, view);
    }

    /** A tensor over {@code littleEndianData} (not copied). */
    public static Tensor of(Dtype dtype, int rows, int dims, byte[] littleEndianData) {
        return of(dtype, rows, dims, ByteBuffer.wrap(littleEndianData));
    }

    /** A float32 tensor of {@code rows * dims} values, row-major (copied). */
    public static Tensor ofFloats(int rows, int dims, float[] values) {
        checkCount(values.length, rows, dims);
        ByteBuffer bb = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        bb.asFloatBuffer().put(values);
        return of(Dtype.FLOAT32, rows, dims, bb);
    }

    /** A float32 tensor of equally long rows (copied); ragged rows are {@code shape_mismatch}. */
    public static Tensor ofFloatRows(float[]... rows) {
        int d = rows.length == 0 ? 0 : rows[0].length;
        ByteBuffer bb = ByteBuffer.allocate(rows.length * d * 4).order(ByteOrder.LITTLE_ENDIAN);
        FloatBuffer fb = bb.asFloatBuffer();
        for (int i = 0; i < rows.length; i++) {
            if (rows[i].length != d) {
                throw new DensewireException(Category.SHAPE_MISMATCH,
                        "row " + i + " has " + rows[i].length + " values, row 0 has " + d, -1, "[" + i + "]");
            }
            fb.put(rows[i]);
        }
        return of(Dtype.FLOAT32, rows.length, d, bb);
    }

    /** A float64 tensor of {@code rows * dims} values, row-major (copied). */
    public static Tensor ofDoubles(int rows, int dims, double[] values) {
        checkCount(values.length, rows, dims);
        ByteBuffer bb = ByteBuffer.allocate(values.length * 8).order(ByteOrder.LITTLE_ENDIAN);
        bb.asDoubleBuffer().put(values);
        return of(Dtype.FLOAT64, rows, dims, bb);
    }

    /**
     * A tensor from bytes in the given byte order (copied and swapped to little-endian when {@code order} is
     * big).
     */
    public static Tensor of(Dtype dtype, int rows, int dims, byte[] data, Endianness order) {
        if (order == Endianness.LITTLE || dtype.itemBytes() == 1) {
            return of(dtype, rows, dims, data);
        }
        long expected = (long) rows * dtype.rowBytes(dims);
        checkLength(data.length, expected, null);
        return of(dtype, rows, dims, swap(dtype, ByteBuffer.wrap(data)));
    }

    static void checkLength(long actual, long expected, String field) {
        if (actual != expected) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "expected " + expected + " bytes for the shape, got "
                    + actual, Math.min(actual, expected), field);
        }
    }

    private static void checkCount(int count, int rows, int dims) {
        if (rows < 0 || dims < 0 || (long) rows * dims != count) {
            throw new DensewireException(Category.SHAPE_MISMATCH,
                    count + " values do not make a " + rows + " x " + dims + " tensor", -1, "shape");
        }
    }

    // ------------------------------------------------------------------ shape and bytes

    public Dtype dtype() {
        return dtype;
    }

    /** {@code n}: the number of rows (vectors). */
    public int rows() {
        return rows;
    }

    /** {@code d}: dimensions per row (for binary, bits per row). */
    public int dims() {
        return dims;
    }

    /** {@code row_bytes(dtype, d)}. */
    public int rowBytes() {
        return (int) dtype.rowBytes(dims);
    }

    public int byteLength() {
        return data.limit();
    }

    /** A read-only little-endian view of the bytes (position 0); not a copy. */
    public ByteBuffer data() {
        return data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The bytes, little-endian (a copy). */
    public byte[] toByteArray() {
        byte[] out = new byte[data.limit()];
        data.duplicate().get(out);
        return out;
    }

    /** The bytes in the given byte order (a copy); big-endian swaps each item of 2, 4 or 8 bytes. */
    public byte[] toByteArray(Endianness order) {
        if (order == Endianness.LITTLE || dtype.itemBytes() == 1) {
            return toByteArray();
        }
        ByteBuffer swapped = swap(dtype, data.duplicate());
        byte[] out = new byte[swapped.remaining()];
        swapped.get(out);
        return out;
    }

    /** Copies the items of {@code src} into a new buffer with each item's bytes reversed. */
    static ByteBuffer swap(Dtype dtype, ByteBuffer src) {
        ByteBuffer in = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer out = ByteBuffer.allocate(in.remaining()).order(ByteOrder.BIG_ENDIAN);
        switch (dtype.itemBytes()) {
            case 2:
                out.asShortBuffer().put(in.asShortBuffer());
                break;
            case 4:
                out.asIntBuffer().put(in.asIntBuffer());
                break;
            case 8:
                out.asLongBuffer().put(in.asLongBuffer());
                break;
            default:
                out.put(in);
                out.flip();
        }
        return out.clear();
    }

    // ------------------------------------------------------------------ typed views and copies

    /** A float32 view of the bytes without copying. */
    public FloatBuffer asFloatBuffer() {
        requireDtype(Dtype.FLOAT32);
        return data().asFloatBuffer();
    }

    /** A float64 view of the bytes without copying. */
    public DoubleBuffer asDoubleBuffer() {
        requireDtype(Dtype.FLOAT64);
        return data().asDoubleBuffer();
    }

    /** The raw 16-bit items of a float16 or bfloat16 tensor, without copying. */
    public ShortBuffer asShortBuffer() {
        if (dtype != Dtype.FLOAT16 && dtype != Dtype.BFLOAT16) {
            throw new IllegalStateException("asShortBuffer needs float16 or bfloat16, this tensor is " + dtype);
        }
        return data().asShortBuffer();
    }

    private void requireDtype(Dtype expected) {
        if (dtype != expected) {
            throw new IllegalStateException("this tensor is " + dtype + ", not " + expected);
        }
    }

    /**
     * All values as float32, row-major: a bulk copy for float32; exact widening for float16, bfloat16, int8 and
     * uint8; IEEE rounding for float64; 0 or 1 per dimension for binary.
     */
    public float[] toFloatArray() {
        float[] out = new float[Math.multiplyExact(rows, dims)];
        readFloats(0, rows, out, 0);
        return out;
    }

    /** Row {@code i} as float32 values (see {@link #toFloatArray()}). */
    public float[] row(int i) {
        if (i < 0 || i >= rows) {
            throw new IndexOutOfBoundsException("row " + i + " of " + rows);
        }
        float[] out = new float[dims];
        readFloats(i, 1, out, 0);
        return out;
    }

    /** Every row as float32 values. */
    public float[][] toFloatRows() {
        float[][] out = new float[rows][];
        for (int i = 0; i < rows; i++) {
            out[i] = row(i);
        }
        return out;
    }

    private void readFloats(int firstRow, int count, float[] out, int outOffset) {
        int n = count * dims;
        ByteBuffer b = data();
        switch (dtype) {
            case FLOAT32:
                b.asFloatBuffer().position(firstRow * dims).get(out, outOffset, n);
                break;
            case FLOAT64: {
                DoubleBuffer db = b.asDoubleBuffer().position(firstRow * dims);
                for (int k = 0; k < n; k++) {
                    out[outOffset + k] = Conversions.doubleToFloat(db.get());
                }
                break;
            }
            case FLOAT16: {
                ShortBuffer sb = b.asShortBuffer().position(firstRow * dims);
                for (int k = 0; k < n; k++) {
                    out[outOffset + k] = Conversions.float16ToFloat(sb.get());
                }
                break;
            }
            case BFLOAT16: {
                ShortBuffer sb = b.asShortBuffer().position(firstRow * dims);
                for (int k = 0; k < n; k++) {
                    out[outOffset + k] = Conversions.bfloat16ToFloat(sb.get());
                }
                break;
            }
            case INT8:
                for (int k = 0; k < n; k++) {
                    out[outOffset + k] = b.get(firstRow * dims + k);
                }
                break;
            case UINT8:
                for (int k = 0; k < n; k++) {
                    out[outOffset + k] = b.get(firstRow * dims + k) & 0xFF;
                }
                break;
            case BINARY: {
                int rb = rowBytes();
                for (int r = 0; r < count; r++) {
                    int base = (firstRow + r) * rb;
                    for (int j = 0; j < dims; j++) {
                        out[outOffset + r * dims + j] = (b.get(base + (j >>> 3)) >>> (7 - (j & 7))) & 1;
                    }
                }
                break;
            }
            default:
                throw new AssertionError(dtype);
        }
    }

    /** All values as float64 (exact for every dtype but binary, which gives 0 or 1). */
    public double[] toDoubleArray() {
        if (dtype == Dtype.FLOAT64) {
            double[] out = new double[Math.multiplyExact(rows, dims)];
            data().asDoubleBuffer().get(out);
            return out;
        }
        float[] f = toFloatArray();
        double[] out = new double[f.length];
        for (int k = 0; k < f.length; k++) {
            out[k] = f[k];
        }
        return out;
    }

    // ------------------------------------------------------------------ conversion (section 3)

    /**
     * This tensor in another dtype by the rules of SPEC.md section 3: float32 to float16, bfloat16 or binary;
     * float64 to float32. The same dtype returns this tensor.
     *
     * @throws IllegalArgumentException for a conversion the spec does not define
     */
    public Tensor convert(Dtype target) {
        if (target == dtype) {
            return this;
        }
        if (dtype == Dtype.FLOAT64 && target == Dtype.FLOAT32) {
            return ofFloats(rows, dims, toFloatArray());
        }
        if (dtype != Dtype.FLOAT32 || !(target == Dtype.FLOAT16 || target == Dtype.BFLOAT16 || target == Dtype.BINARY)) {
            throw new IllegalArgumentException("no conversion from " + dtype + " to " + target + " (SPEC.md section 3)");
        }
        float[] src = toFloatArray();
        if (target == Dtype.BINARY) {
            int rb = (int) target.rowBytes(dims);
            byte[] out = new byte[rows * rb];
            for (int r = 0; r < rows; r++) {
                Conversions.packBits(src, r * dims, dims, out, r * rb);
            }
            return of(target, rows, dims, out);
        }
        ByteBuffer bb = ByteBuffer.allocate(src.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : src) {
            bb.putShort(target == Dtype.FLOAT16 ? Conversions.floatToFloat16(v) : Conversions.floatToBfloat16(v));
        }
        bb.flip();
        return of(target, rows, dims, bb);
    }

    // ------------------------------------------------------------------ identity

    /** Same dtype, shape and bytes (bit-exact: NaN payloads and signed zeros count). */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof Tensor)) {
            return false;
        }
        Tensor t = (Tensor) o;
        return dtype == t.dtype && rows == t.rows && dims == t.dims && data.equals(t.data);
    }

    @Override
    public int hashCode() {
        return (dtype.hashCode() * 31 + rows) * 31 + dims;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("Tensor(").append(dtype).append(", ").append(rows).append('x').append(dims);
        if (dtype.isFloat() && rows > 0 && dims > 0) {
            float[] first = row(0);
            sb.append(", row 0 = ").append(Arrays.toString(first.length > 6 ? Arrays.copyOf(first, 6) : first));
        }
        return sb.append(')').toString();
    }
}
