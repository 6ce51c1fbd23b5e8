package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;

/** Shape checks shared by the decoders (SPEC.md section 1). */
final class Shapes {
    private Shapes() {
    }

    /** {@code n * row_bytes(dtype, d)}, or -1 when it overflows a long. */
    static long expectedBytes(Dtype dtype, long n, long d) {
        long rb = dtype.rowBytes(d);
        if (rb < 0) {
            return -1;
        }
        long hi = Math.multiplyHigh(n, rb);
        long lo = n * rb;
        return hi != 0 || lo < 0 ? -1 : lo;
    }

    /**
     * A tensor over {@code data}: {@code length_mismatch} (on {@code dataField}) when the length is not the
     * shape's, {@code invalid_field} (on {@code shapeField}) when the shape does not fit this implementation.
     */
    static Tensor tensor(Dtype dtype, long n, long d, ByteBuffer data, String dataField, String shapeField) {
        long expected = expectedBytes(dtype, n, d);
        long actual = data.remaining();
        if (expected != actual) {
            long at = expected < 0 ? actual : Math.min(actual, expected);
            throw new DensewireException(Category.LENGTH_MISMATCH, "expected " + (expected < 0 ? "more than 2^63" : expected)
                    + " bytes for shape " + n + "," + d + " of " + dtype + ", got " + actual, at, dataField);
        }
        if (n > Integer.MAX_VALUE || d > Integer.MAX_VALUE) {
            throw DensewireException.on(Category.INVALID_FIELD, shapeField, "shape " + n + "," + d
                    + " is larger than this implementation supports");
        }
        return Tensor.of(dtype, (int) n, (int) d, data);
    }
}
