package dev.densewire;

import java.util.Objects;

/**
 * A decoded body: the {@link Tensor}, and for embeddings responses the model id and token usage (absent for a
 * bare tensor); for {@code int8} and {@code uint8} responses of a server, the {@linkplain #quantization()
 * quantization id} of the ranges the codes were quantized with (SPEC.md section 17.4, see {@link Quantization}).
 */
public final class Embeddings {
    /** Token counts of an embeddings response. */
    public record Usage(long promptTokens, long totalTokens) {
        /** The largest count a decoder accepts: 2^53 - 1, which every language's JSON numbers hold exactly. */
        public static final long MAX_COUNT = (1L << 53) - 1;
    }

    private final Tensor tensor;
    private final String model;
    private final Usage usage;
    private final String quantization;

    public Embeddings(Tensor tensor, String model, Usage usage) {
        this(tensor, model, usage, null);
    }

    /** With the quantization id of an {@code int8}/{@code uint8} response (null: none). */
    public Embeddings(Tensor tensor, String model, Usage usage, String quantization) {
        this.tensor = Objects.requireNonNull(tensor, "tensor");
        this.model = model;
        this.usage = usage;
        this.quantization = quantization;
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

    /**
     * The id of the ranges an {@code int8} or {@code uint8} response was quantized with (SPEC.md section 17.4), as
     * every format carries it; null when the body has none. {@link Quantization#dequantize} turns the codes back
     * into float32 with those ranges, published at {@code GET /v1/quantization/{id}}.
     */
    public String quantization() {
        return quantization;
    }

    /** The same embeddings with another tensor (model, usage and quantization kept). */
    public Embeddings withTensor(Tensor other) {
        return new Embeddings(other, model, usage, quantization);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Embeddings && tensor.equals(((Embeddings) o).tensor)
                && Objects.equals(model, ((Embeddings) o).model) && Objects.equals(usage, ((Embeddings) o).usage)
                && Objects.equals(quantization, ((Embeddings) o).quantization);
    }

    @Override
    public int hashCode() {
        return Objects.hash(tensor, model, usage, quantization);
    }

    @Override
    public String toString() {
        return "Embeddings(" + tensor + (model == null ? "" : ", model=" + model) + (usage == null ? "" : ", " + usage)
                + (quantization == null ? "" : ", quantization=" + quantization) + ")";
    }
}
