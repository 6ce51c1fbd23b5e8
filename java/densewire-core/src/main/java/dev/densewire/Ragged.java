package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The checks every format of ragged and sparse tensors shares (SPEC.md 20.1 and 20.2, in the spec's order), and the
 * constructors the decoders of every module use: each error carries its category, its offset ({@code base} plus the
 * position in the part) and its field.
 */
public final class Ragged {
    private Ragged() {
    }

    /** A body's kind ({@code kind}, {@code Densewire-Kind}, {@code densewire.kind}): {@code invalid_field} on {@code field}. */
    public static void checkKind(Object got, String want, String field) {
        if (got == null) {
            throw new DensewireException(Category.INVALID_FIELD, "missing; a " + want + " body says its kind", -1, field);
        }
        if (!want.equals(got)) {
            throw new DensewireException(Category.INVALID_FIELD, "is " + got + "; this decoder reads " + want, -1, field);
        }
    }

    /**
     * SPEC.md 20: a tensor body says no kind. {@code present} is whether the body has the marker {@code field}
     * ({@code kind}, {@code Densewire-Kind}, {@code densewire.kind}), whatever its value.
     */
    public static void checkNoKind(boolean present, Object value, String field) {
        if (present) {
            throw new DensewireException(Category.INVALID_FIELD, "a tensor body says no kind, this one says " + value
                    + ": decode it with the ragged or sparse decoder", -1, field);
        }
    }

    /** {@code V} from 1 to 2^32: {@code invalid_field} on {@code field} otherwise. */
    public static void checkVocabulary(long v, String field) {
        if (v < 1 || v > SparseTensor.MAX_VOCABULARY) {
            throw new DensewireException(Category.INVALID_FIELD, "the vocabulary size " + Long.toUnsignedString(v)
                    + " is not from 1 to 2^32", -1, field);
        }
    }

    /** Sparse values are float32, float16, bfloat16 or float64: {@code invalid_field} on {@code field} otherwise. */
    public static void checkValuesDtype(Dtype d, String field) {
        if (!d.isFloat()) {
            throw new DensewireException(Category.INVALID_FIELD, "sparse values are float32, float16, bfloat16 or "
                    + "float64, not " + d.wireName(), -1, field);
        }
    }

    /** {@code offsets[0] == 0} and non-decreasing (unsigned): {@code invalid_field} on {@code offsets} at {@code base + 4k}. */
    public static void checkOffsets(int[] offsets, long base) {
        if (offsets.length == 0) {
            throw new DensewireException(Category.INVALID_FIELD, "there are no offsets: n + 1 are needed", base, "offsets");
        }
        if (offsets[0] != 0) {
            throw new DensewireException(Category.INVALID_FIELD, "the first offset is "
                    + Integer.toUnsignedString(offsets[0]) + ", not 0", base, "offsets");
        }
        for (int k = 1; k < offsets.length; k++) {
            if (Integer.compareUnsigned(offsets[k], offsets[k - 1]) < 0) {
                throw new DensewireException(Category.INVALID_FIELD, "offset " + k + " is "
                        + Integer.toUnsignedString(offsets[k]) + ", below the one before it", base + 4L * k, "offsets");
            }
            if (offsets[k] < 0) {
                throw new DensewireException(Category.INVALID_FIELD, "more than 2^31 - 1 rows or entries are not "
                        + "supported by this implementation", base + 4L * k, "offsets");
            }
        }
    }

    /** The {@code n + 1} offsets of {@code bytes} (exactly {@code 4 (n + 1)} of them, else {@code length_mismatch}). */
    public static int[] readOffsets(ByteBuffer bytes, long n, long base) {
        long want = 4 * (n + 1);
        int len = bytes.remaining();
        if (n < 0 || n >= Integer.MAX_VALUE / 4 || len != want) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "offsets are " + len + " bytes, " + (n + 1)
                    + " offsets need " + want, base + Math.min(len, want), "offsets");
        }
        int[] offsets = new int[(int) n + 1];
        bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(offsets);
        checkOffsets(offsets, base);
        return offsets;
    }

    /** The rows part of a ragged body ({@code offsets[n] x row_bytes}, else {@code length_mismatch} on {@code data}). */
    public static RaggedTensor ragged(Dtype dtype, long d, int[] offsets, ByteBuffer data, long base) {
        long n = offsets[offsets.length - 1];
        long rb = dtype.rowBytes(d);
        long want = rb < 0 || d > Integer.MAX_VALUE ? -1 : Shapes.expectedBytes(dtype, n, d);
        if (want < 0) {
            throw new DensewireException(Category.INVALID_FIELD, "d = " + d + " is too large", -1, "shape");
        }
        int len = data.remaining();
        if (len != want) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the rows are " + len + " bytes, " + n
                    + " rows need " + want, base + Math.min(len, want), "data");
        }
        return RaggedTensor.checked(offsets, Tensor.of(dtype, (int) n, (int) d, data));
    }

    /** The indices and values of a sparse body (SPEC.md 20.2 steps 4 and 5); {@code base*} the parts' offsets. */
    public static SparseTensor sparse(Dtype dtype, long vocabularySize, int[] offsets, ByteBuffer indices,
            ByteBuffer values, long baseIndices, long baseValues) {
        checkVocabulary(vocabularySize, "shape");
        checkValuesDtype(dtype, "dtype");
        checkOffsets(offsets, 0);
        long k = offsets[offsets.length - 1];
        int il = indices.remaining();
        if (il != 4 * k) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the indices are " + il + " bytes, " + k + " need "
                    + 4 * k, baseIndices + Math.min(il, 4 * k), "indices");
        }
        long want = k * dtype.itemBytes();
        int vl = values.remaining();
        if (vl != want) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the values are " + vl + " bytes, " + k + " need "
                    + want, baseValues + Math.min(vl, want), "data");
        }
        ByteBuffer le = indices.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int p0 = le.position();
        for (int i = 0; i + 1 < offsets.length; i++) {
            for (int j = offsets[i]; j < offsets[i + 1]; j++) {
                long x = Integer.toUnsignedLong(le.getInt(p0 + 4 * j));
                String why = null;
                if (x >= vocabularySize) {
                    why = "index " + x + " is not below the vocabulary size " + vocabularySize;
                } else if (j > offsets[i] && x <= Integer.toUnsignedLong(le.getInt(p0 + 4 * (j - 1)))) {
                    why = "index " + x + " does not follow the one before it in ascending order";
                }
                if (why != null) {
                    throw new DensewireException(Category.INVALID_FIELD, why, baseIndices + 4L * j, "indices");
                }
            }
        }
        return SparseTensor.checked(vocabularySize, offsets, indices, Tensor.of(dtype, 1, (int) k, values));
    }

    /** The little-endian bytes of offsets. */
    public static byte[] offsetsBytes(int[] offsets) {
        ByteBuffer b = ByteBuffer.allocate(4 * offsets.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(offsets);
        return b.array();
    }
}
