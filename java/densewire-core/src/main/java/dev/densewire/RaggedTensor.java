package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;

/**
 * {@code n} matrices of {@code m_i x d} rows of one dtype (token embeddings, ColBERT multi-vectors; SPEC.md section
 * 19 "Ragged and sparse tensors"): one {@code (N, d)} rows {@link Tensor} and {@code n + 1} offsets. {@link #matrix}
 * is a view of the rows (one buffer, not {@code n} copies).
 */
public final class RaggedTensor {
    private final int[] offsets;
    private final Tensor rows;

    private RaggedTensor(int[] offsets, Tensor rows) {
        this.offsets = offsets;
        this.rows = rows;
    }

    /**
     * A ragged tensor over {@code rows}; {@code offsets} are {@code n + 1} non-decreasing row numbers from 0 to
     * {@code N}, read as unsigned.
     *
     * @throws DensewireException {@code invalid_field} on {@code offsets} (offset {@code 4k} of the entry that breaks
     *     the rule) or {@code length_mismatch} on {@code data} when the rows are not {@code offsets[n]}
     */
    public static RaggedTensor of(int[] offsets, Tensor rows) {
        int[] copy = offsets.clone();
        Ragged.checkOffsets(copy, 0);
        long last = Integer.toUnsignedLong(copy[copy.length - 1]);
        if (last != rows.rows()) {
            Tensor.checkLength(rows.byteLength(), last * rows.rowBytes(), "data");
        }
        return new RaggedTensor(copy, rows);
    }

    /** From per-input matrices of one dtype and {@code d}, copied once into one buffer. */
    public static RaggedTensor ofMatrices(Dtype dtype, int dims, List<Tensor> matrices) {
        int[] offsets = new int[matrices.size() + 1];
        long bytes = 0;
        for (int i = 0; i < matrices.size(); i++) {
            Tensor m = matrices.get(i);
            if (m.dtype() != dtype || m.dims() != dims) {
                throw new DensewireException(Category.SHAPE_MISMATCH, "matrix " + i + " is not " + dtype + " x " + dims,
                        -1, "data");
            }
            offsets[i + 1] = Math.addExact(offsets[i], m.rows());
            bytes += m.byteLength();
        }
        ByteBuffer buf = ByteBuffer.allocate(Math.toIntExact(bytes));
        for (Tensor m : matrices) {
            buf.put(m.data());
        }
        buf.flip();
        return new RaggedTensor(offsets, Tensor.of(dtype, offsets[matrices.size()], dims, buf));
    }

    /** Internal: offsets already checked against the rows. */
    static RaggedTensor checked(int[] offsets, Tensor rows) {
        return new RaggedTensor(offsets, rows);
    }

    /** {@code n}, the number of matrices. */
    public int size() {
        return offsets.length - 1;
    }

    public Dtype dtype() {
        return rows.dtype();
    }

    /** {@code d}, the columns of every matrix. */
    public int dims() {
        return rows.dims();
    }

    /** The {@code n + 1} offsets (a copy). */
    public int[] offsets() {
        return offsets.clone();
    }

    /** Offset {@code i}. */
    public int offset(int i) {
        return offsets[i];
    }

    /** All rows, {@code (N, d)}. */
    public Tensor rows() {
        return rows;
    }

    /** Matrix {@code i}, {@code (m_i, d)}: a view of the rows. */
    public Tensor matrix(int i) {
        int rb = rows.rowBytes();
        ByteBuffer view = rows.data().position(offsets[i] * rb).limit(offsets[i + 1] * rb);
        return Tensor.of(rows.dtype(), offsets[i + 1] - offsets[i], rows.dims(), view);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RaggedTensor && Arrays.equals(offsets, ((RaggedTensor) o).offsets)
                && rows.equals(((RaggedTensor) o).rows);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(offsets) * 31 + rows.hashCode();
    }

    @Override
    public String toString() {
        return "RaggedTensor(" + dtype() + ", n=" + size() + ", d=" + dims() + ", offsets="
                + Arrays.toString(offsets.length > 8 ? Arrays.copyOf(offsets, 8) : offsets) + ")";
    }
}
