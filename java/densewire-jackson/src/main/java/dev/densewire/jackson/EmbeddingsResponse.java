package dev.densewire.jackson;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import dev.densewire.JsonEnvelope;
import dev.densewire.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * The JSON embeddings response of SPEC.md section 6.2 as Jackson reads it: OpenAI's fields plus densewire's
 * {@code dtype}, {@code byteorder}, {@code dimensions} and {@code quantization} (optional: OpenAI does not send
 * them). Unknown keys are
 * ignored. {@link #toEmbeddings()} places the rows by index and decodes them into one {@link Tensor}.
 */
@JsonIgnoreProperties(ignoreUnknown = true)
@JsonInclude(JsonInclude.Include.NON_NULL)
@JsonPropertyOrder({"object", "data", "model", "usage", "dtype", "byteorder", "dimensions", "quantization"})
public final class EmbeddingsResponse {
    /** One {@code data[i]} item. The embedding is a Base64 String, a double[] of numbers, or a marker. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonPropertyOrder({"object", "index", "embedding"})
    public static final class Item {
        @JsonProperty("object")
        public String object;
        /** As read: an integer is checked by {@link #toEmbeddings()}; anything else is {@code invalid_field}. */
        @JsonProperty("index")
        public JsonNode index;
        @JsonProperty("embedding")
        @JsonDeserialize(using = RawEmbeddingDeserializer.class)
        @JsonSerialize(using = RawEmbeddingSerializer.class)
        public Object embedding;
    }

    /**
     * Token counts, as read: {@link #toEmbeddings()} requires each present one to be an integer from 0 to 2^53 - 1
     * ({@code invalid_field} on {@code usage.prompt_tokens} / {@code usage.total_tokens} otherwise; a string,
     * a fraction or {@code null} is not coerced). An absent count is 0.
     */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public static final class Usage {
        @JsonProperty("prompt_tokens")
        public JsonNode promptTokens;
        @JsonProperty("total_tokens")
        public JsonNode totalTokens;

        Embeddings.Usage toUsage() {
            return new Embeddings.Usage(count(promptTokens, "usage.prompt_tokens"), count(totalTokens, "usage.total_tokens"));
        }

        private static long count(JsonNode v, String field) {
            if (v == null) {
                return 0;
            }
            if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0 || v.longValue() > Embeddings.Usage.MAX_COUNT) {
                String got = v.toString();
                throw new DensewireException(Category.INVALID_FIELD, "must be an integer from 0 to 2^53 - 1, got "
                        + (got.length() > 40 ? got.substring(0, 40) : got), -1, field);
            }
            return v.longValue();
        }
    }

    @JsonProperty("object")
    public String object;
    @JsonProperty("data")
    public List<Item> data;
    @JsonProperty("model")
    public String model;
    @JsonProperty("usage")
    public Usage usage;
    @JsonProperty("dtype")
    public String dtype;
    @JsonProperty("byteorder")
    public String byteorder;
    @JsonProperty("dimensions")
    public Long dimensions;
    /** The quantization id of an int8/uint8 response (SPEC.md 17.5): a string when present. */
    @JsonProperty("quantization")
    public JsonNode quantization;
    /** SPEC.md 20: a tensor body says no kind; set when the body has the key, whatever its value (null too). */
    private JsonNode kind;
    private boolean hasKind;

    @JsonProperty("kind")
    void setKind(JsonNode value) {
        kind = value;
        hasKind = true;
    }

    /**
     * The decoded tensor with model and usage.
     *
     * @throws DensewireException with the category and field of SPEC.md section 6 (e.g. {@code shape_mismatch}
     *     on {@code data[1].embedding})
     */
    public Embeddings toEmbeddings() {
        if (hasKind) {
            throw new DensewireException(Category.INVALID_FIELD, "a tensor body says no kind, this one says " + kind
                    + ": decode it with the ragged or sparse decoder", -1, "kind");
        }
        if (data == null) {
            throw new DensewireException(Category.INVALID_FIELD, "missing or not an array", -1, "data");
        }
        List<JsonEnvelope.Row> rows = new ArrayList<>(data.size());
        for (int i = 0; i < data.size(); i++) {
            Item item = data.get(i);
            if (item == null) {
                throw new DensewireException(Category.INVALID_FIELD, "each item must be an object with an embedding", -1,
                        "data[" + i + "]");
            }
            Object index = item.index == null || item.index.isNull() ? null
                    : item.index.isIntegralNumber() ? (Object) (item.index.canConvertToLong() ? item.index.longValue() : Long.MAX_VALUE)
                    : item.index.toString();
            rows.add(new JsonEnvelope.Row(i, index, item.embedding == null ? JsonEnvelope.wrongType() : item.embedding));
        }
        Tensor tensor = JsonEnvelope.assemble(rows, dtype, byteorder, dimensions);
        Embeddings.Usage u = usage == null ? null : usage.toUsage();
        String q = null;
        if (quantization != null && !quantization.isNull()) {
            if (!quantization.isTextual()) {
                throw new DensewireException(Category.INVALID_FIELD, "must be a string, got " + quantization, -1, "quantization");
            }
            q = quantization.textValue();
        }
        return new Embeddings(tensor, model, u, q);
    }
}
