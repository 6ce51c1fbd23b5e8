package dev.densewire.jackson;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;

/**
 * The OpenAI error envelope with densewire's {@code offset} (SPEC.md section 11):
 * {@code {"error":{"message":..., "type":..., "param":..., "code":..., "offset":...}}}.
 */
@JsonIgnoreProperties(ignoreUnknown = true)
public final class ApiError {
    /** The inner object. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    @JsonInclude(JsonInclude.Include.ALWAYS)
    @JsonPropertyOrder({"message", "type", "param", "code", "offset"})
    public static final class Body {
        @JsonProperty("message")
        public String message;
        @JsonProperty("type")
        public String type;
        @JsonProperty("param")
        public String param;
        @JsonProperty("code")
        public String code;
        @JsonProperty("offset")
        @JsonInclude(JsonInclude.Include.NON_NULL)
        public Long offset;
    }

    @JsonProperty("error")
    public Body error;
}
