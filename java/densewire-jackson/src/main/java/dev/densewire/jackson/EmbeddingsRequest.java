package dev.densewire.jackson;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import dev.densewire.Dtype;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import java.util.List;
import java.util.Objects;

/**
 * The body of {@code POST /v1/embeddings} (SPEC.md section 6.1): OpenAI's fields plus densewire's {@code dtype},
 * {@code byteorder} and {@code truncate}. Null fields are not written (the server's defaults apply).
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
@JsonPropertyOrder({"input", "model", "encoding_format", "dimensions", "user", "dtype", "byteorder", "truncate"})
public final class EmbeddingsRequest {
    private Object input;
    private String model;
    private String encodingFormat;
    private Integer dimensions;
    private String user;
    private String dtype;
    private String byteorder;
    private Boolean truncate;

    public EmbeddingsRequest() {
    }

    /** A request for the embeddings of {@code texts} (at most 2048, none empty). */
    public static EmbeddingsRequest of(List<String> texts) {
        return new EmbeddingsRequest().input(List.copyOf(texts));
    }

    /** A string, a list of strings, a list of token ids, or a list of lists of token ids. */
    @JsonProperty("input")
    public Object input() {
        return input;
    }

    public EmbeddingsRequest input(Object input) {
        this.input = input;
        return this;
    }

    @JsonProperty("model")
    public String model() {
        return model;
    }

    public EmbeddingsRequest model(String model) {
        this.model = model;
        return this;
    }

    @JsonProperty("encoding_format")
    public String encodingFormat() {
        return encodingFormat;
    }

    @JsonProperty("encoding_format")
    public EmbeddingsRequest encodingFormat(String encodingFormat) {
        this.encodingFormat = encodingFormat;
        return this;
    }

    public EmbeddingsRequest encodingFormat(EncodingFormat format) {
        return encodingFormat(format == null ? null : format.wireName());
    }

    @JsonProperty("dimensions")
    public Integer dimensions() {
        return dimensions;
    }

    public EmbeddingsRequest dimensions(Integer dimensions) {
        this.dimensions = dimensions;
        return this;
    }

    @JsonProperty("user")
    public String user() {
        return user;
    }

    public EmbeddingsRequest user(String user) {
        this.user = user;
        return this;
    }

    @JsonProperty("dtype")
    public String dtype() {
        return dtype;
    }

    @JsonProperty("dtype")
    public EmbeddingsRequest dtype(String dtype) {
        this.dtype = dtype;
        return this;
    }

    public EmbeddingsRequest dtype(Dtype dtype) {
        return dtype(dtype == null ? null : dtype.wireName());
    }

    @JsonProperty("byteorder")
    public String byteorder() {
        return byteorder;
    }

    @JsonProperty("byteorder")
    public EmbeddingsRequest byteorder(String byteorder) {
        this.byteorder = byteorder;
        return this;
    }

    public EmbeddingsRequest byteorder(Endianness order) {
        return byteorder(order == null ? null : order.wireName());
    }

    @JsonProperty("truncate")
    public Boolean truncate() {
        return truncate;
    }

    public EmbeddingsRequest truncate(Boolean truncate) {
        this.truncate = truncate;
        return this;
    }

    /** A copy with another input (used to split a large request into batches). */
    public EmbeddingsRequest withInput(Object newInput) {
        EmbeddingsRequest r = new EmbeddingsRequest();
        r.input = newInput;
        r.model = model;
        r.encodingFormat = encodingFormat;
        r.dimensions = dimensions;
        r.user = user;
        r.dtype = dtype;
        r.byteorder = byteorder;
        r.truncate = truncate;
        return r;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof EmbeddingsRequest)) {
            return false;
        }
        EmbeddingsRequest r = (EmbeddingsRequest) o;
        return Objects.equals(input, r.input) && Objects.equals(model, r.model)
                && Objects.equals(encodingFormat, r.encodingFormat) && Objects.equals(dimensions, r.dimensions)
                && Objects.equals(user, r.user) && Objects.equals(dtype, r.dtype)
                && Objects.equals(byteorder, r.byteorder) && Objects.equals(truncate, r.truncate);
    }

    @Override
    public int hashCode() {
        return Objects.hash(input, model, encodingFormat, dimensions, user, dtype, byteorder, truncate);
    }

    @Override
    public String toString() {
        return "EmbeddingsRequest(model=" + model + ", dtype=" + dtype + ", dimensions=" + dimensions + ", input="
                + (input instanceof List ? ((List<?>) input).size() + " items" : "1 item") + ")";
    }
}
