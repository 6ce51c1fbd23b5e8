package dev.densewire.jackson;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.densewire.Tensor;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * One output of a KServe v2 inference response (SPEC.md section 19), as {@link Kserve#decode} reads it: a
 * {@link Tensor} for the datatypes with a densewire dtype (a view of the body when it came as a blob; shape
 * {@code [d]} is the tensor {@code (1, d)}), or the elements of a {@code BYTES} output (read-only views of the
 * body for a blob).
 *
 * @param name the output's name
 * @param datatype its KServe datatype ({@code FP32}, ..., {@code BYTES})
 * @param shape its shape as sent
 * @param parameters its parameters as sent (with {@code binary_data_size} for a blob; empty when absent)
 * @param binary whether it came as a blob of the binary extension
 * @param tensor the values, or null for {@code BYTES}
 * @param elements the {@code BYTES} elements, or null for a tensor
 */
public record KserveOutput(String name, String datatype, long[] shape, ObjectNode parameters, boolean binary,
        Tensor tensor, List<ByteBuffer> elements) {

    /** The quantization id of an int8/uint8 embeddings output (its {@code quantization} parameter), or null. */
    public String quantization() {
        JsonNode q = parameters.get("quantization");
        return q != null && q.isTextual() ? q.textValue() : null;
    }
}
