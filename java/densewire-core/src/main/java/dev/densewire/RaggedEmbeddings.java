package dev.densewire;

/**
 * A ragged response (token embeddings, multi-vectors): the {@link RaggedTensor} with the model id and token usage
 * when the body gives them (null otherwise).
 */
public record RaggedEmbeddings(RaggedTensor tensor, String model, Embeddings.Usage usage) {
    /** A bare tensor. */
    public static RaggedEmbeddings of(RaggedTensor tensor) {
        return new RaggedEmbeddings(tensor, null, null);
    }
}
