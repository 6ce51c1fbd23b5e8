package dev.densewire;

import java.util.Objects;

/**
 * A decoded body: the {@link Tensor}, and for embeddings responses the model id and token usage (absent for a
 * bare tensor).
 */
public final class Embeddings {
    /** Token counts of an embeddings response. */
    public record Usage(long promptTokens, long totalTokens) {
    }

    private final Tensor tensor;
    private final String model;
    private final Usage usage;

    public Embeddings(Tensor tensor, String model, Usage usage) {
        this.tensor = Objects.requireNonNull(tensor, "tensor");
        this.model = model;
        this.usage = usage;
    }

    /** A bare tensor: no model, no usage. */
    public static Embeddings of(Tensor tensor) {
        return new Embeddings(tensor, null, null);
    }

    public Tensor tensor() {
        return tensor;
    }

    /** The model id, or null for a bare tensor. */
    public String model() {
        return model;
    }

    /** The token usage, or null for a bare tensor. */
    public Usage usage() {
        return usage;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Embeddings && tensor.equals(((Embeddings) o).tensor)
                && Objects.equals(model, ((Embeddings) o).model) && Objects.equals(usage, ((Embeddings) o).usage);
    }

    @Override
    public int hashCode() {
        return Objects.hash(tensor, model, usage);
    }

    @Override
    public String toString() {
        return "Embeddings(" + tensor + (model == null ? "" : ", model=" + model) + (usage == null ? "" : ", " + usage) + ")";
    }
}
