package dev.densewire;

/**
 * A sparse response (SPLADE): the {@link SparseTensor} with the model id and token usage when the body gives them
 * (null otherwise).
 */
public record SparseEmbeddings(SparseTensor tensor, String model, Embeddings.Usage usage) {
    /** A bare tensor. */
    public static SparseEmbeddings of(SparseTensor tensor) {
        return new SparseEmbeddings(tensor, null, null);
    }
}
