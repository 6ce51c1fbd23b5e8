package dev.densewire;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.Arrays;

/**
 * {@code n} sparse vectors of vocabulary size {@code V} (SPLADE; SPEC.md section 20 "Ragged and sparse tensors"):
 * {@code K} uint32 indices, strictly ascending within each vector and below {@code V}, {@code K} values of a float
 * dtype, and {@code n + 1} offsets. The indices and values are views of the body they were decoded from.
 */
public final class SparseTensor {
    /** The largest vocabulary size: 2^32 (indices are uint32). */
    public static final long MAX_VOCABULARY = 1L << 32;

    private final long vocabularySize;
    private final int[] offsets;
    private final ByteBuffer indices; // little-endian, read-only, position 0
    private final Tensor values; // (1, K)

    private SparseTensor(long vocabularySize, int[] offsets, ByteBuffer indices, Tensor values) {
        this.vocabularySize = vocabularySize;
        this.offsets = offsets;
        this.indices = indices;
        this.values = values;
    }

    /**
     * A sparse tensor; {@code indices} the {@code K} indices (read as unsigned), {@code values} a {@code (1, K)}
     * tensor of a float dtype. Checked as SPEC.md 20.2 says.
     *
     * @throws DensewireException {@code invalid_field} on {@code indices} with offset {@code 4j} of the first index
     *     out of order or not below {@code vocabularySize}, and the other errors of the spec
     */
    public static SparseTensor of(long vocabularySize, int[] offsets, int[] indices, Tensor values) {
        ByteBuffer b = ByteBuffer.allocate(4 * indices.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(indices);
        return Ragged.sparse(values.dtype(), vocabularySize, offsets.clone(), b, values.data(), 0, 0);
    }

    /** Internal: parts already checked. */
    static SparseTensor checked(long vocabularySize, int[] offsets, ByteBuffer indices, Tensor values) {
        return new SparseTensor(vocabularySize, offsets,
                indices.slice().asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN), values);
    }

    /** {@code n}, the number of vectors. */
    public int size() {
        return offsets.length - 1;
    }

    /** The values' dtype. */
    public Dtype dtype() {
        return values.dtype();
    }

    /** {@code V}. */
    public long vocabularySize() {
        return vocabularySize;
    }

    /** The {@code n + 1} offsets (a copy). */
    public int[] offsets() {
        return offsets.clone();
    }

    public int offset(int i) {
        return offsets[i];
    }

    /** {@code K}, the non-zero entries of all vectors. */
    public int nonZeros() {
        return offsets[offsets.length - 1];
    }

    /** The indices as a view (read them with {@link Integer#toUnsignedLong}). */
    public IntBuffer indices() {
        return indices.duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
    }

    /** The indices' little-endian bytes (a read-only view). */
    public ByteBuffer indexBytes() {
        return indices.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The values, {@code (1, K)}. */
    public Tensor values() {
        return values;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof SparseTensor)) {
            return false;
        }
        SparseTensor s = (SparseTensor) o;
        return vocabularySize == s.vocabularySize && Arrays.equals(offsets, s.offsets) && indices.equals(s.indices)
                && values.equals(s.values);
    }

    @Override
    public int hashCode() {
        return (Long.hashCode(vocabularySize) * 31 + Arrays.hashCode(offsets)) * 31 + values.hashCode();
    }

    @Override
    public String toString() {
        return "SparseTensor(" + dtype() + ", n=" + size() + ", V=" + vocabularySize + ", K=" + nonZeros() + ")";
    }
}
