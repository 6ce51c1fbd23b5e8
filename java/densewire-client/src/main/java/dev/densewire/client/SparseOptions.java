package dev.densewire.client;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.SparseTensor;

/**
 * The options of {@link DensewireClient#embedSparse(java.util.List, SparseOptions)}: TEI's {@code /embed_sparse}
 * request fields ({@code truncate}, {@code truncation_direction}, {@code prompt_name}), densewire serve's
 * {@code max_active_dims}, and the vocabulary size given to a TEI JSON answer (which states none). A null component
 * sends nothing: the server's default.
 *
 * <pre>{@code
 * SparseOptions options = SparseOptions.builder().truncate(true)
 *         .truncationDirection(SparseOptions.TruncationDirection.LEFT).maxActiveDims(64).build();
 * SparseTensor top = client.embedSparse(List.of("a long document"), options).tensor();
 * }</pre>
 *
 * @param truncate            true cuts texts longer than the model's maximum, false refuses them (the server's 413);
 *                            null: the server's default ({@code densewire serve --auto-truncate})
 * @param truncationDirection which end of a cut text is kept (null: {@code Right}, the first tokens)
 * @param promptName          a prompt of the model's configuration put before each text; a server whose model defines
 *                            none refuses it (422, param {@code prompt_name})
 * @param maxActiveDims       keep each vector's k largest weights (sentence-transformers' {@code max_active_dims});
 *                            null: all; at least 1
 * @param vocabSize           the vocabulary size of a TEI JSON answer (null: one past the largest index); densewire's
 *                            binary answers carry their own; from 1 to 2^32
 */
public record SparseOptions(Boolean truncate, TruncationDirection truncationDirection, String promptName,
        Integer maxActiveDims, Long vocabSize) {

    /** No option set: every field the server's default. */
    public static final SparseOptions DEFAULTS = new SparseOptions(null, null, null, null, null);

    /** TEI's {@code truncation_direction}: which end of a text over the model's limit is kept when it is cut. */
    public enum TruncationDirection {
        /** Keep the first tokens (TEI's default). */
        RIGHT("Right"),
        /** Keep the last tokens. */
        LEFT("Left");

        private final String wire;

        TruncationDirection(String wire) {
            this.wire = wire;
        }

        /** TEI's spelling on the wire: {@code "Right"} or {@code "Left"}. */
        public String wire() {
            return wire;
        }
    }

    public SparseOptions {
        if (maxActiveDims != null && maxActiveDims < 1) {
            throw new DensewireException(Category.INVALID_FIELD, "must be a positive integer, not " + maxActiveDims, -1,
                    "max_active_dims");
        }
        if (vocabSize != null && (vocabSize < 1 || vocabSize > SparseTensor.MAX_VOCABULARY)) {
            throw new DensewireException(Category.INVALID_FIELD, "must be from 1 to " + SparseTensor.MAX_VOCABULARY
                    + ", not " + vocabSize, -1, "vocab_size");
        }
    }

    /** Only {@code truncate} set (null: the server's default). */
    public static SparseOptions truncating(Boolean truncate) {
        return new SparseOptions(truncate, null, null, null, null);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder starting from these options. */
    public Builder toBuilder() {
        return new Builder().truncate(truncate).truncationDirection(truncationDirection).promptName(promptName)
                .maxActiveDims(maxActiveDims).vocabSize(vocabSize);
    }

    /** Builds {@link SparseOptions}; every field unset (null) by default. */
    public static final class Builder {
        private Boolean truncate;
        private TruncationDirection truncationDirection;
        private String promptName;
        private Integer maxActiveDims;
        private Long vocabSize;

        private Builder() {
        }

        public Builder truncate(Boolean truncate) {
            this.truncate = truncate;
            return this;
        }

        public Builder truncationDirection(TruncationDirection direction) {
            this.truncationDirection = direction;
            return this;
        }

        public Builder promptName(String promptName) {
            this.promptName = promptName;
            return this;
        }

        public Builder maxActiveDims(Integer k) {
            this.maxActiveDims = k;
            return this;
        }

        public Builder vocabSize(Long vocabSize) {
            this.vocabSize = vocabSize;
            return this;
        }

        public SparseOptions build() {
            return new SparseOptions(truncate, truncationDirection, promptName, maxActiveDims, vocabSize);
        }
    }
}
