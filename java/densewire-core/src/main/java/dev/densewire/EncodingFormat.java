package dev.densewire;

import dev.densewire.DensewireException.Category;

/** How the JSON envelope writes {@code embedding} values (SPEC.md section 6): numbers or Base64 strings. */
public enum EncodingFormat {
    FLOAT("float"),
    BASE64("base64");

    private final String wireName;

    EncodingFormat(String wireName) {
        this.wireName = wireName;
    }

    public String wireName() {
        return wireName;
    }

    @Override
    public String toString() {
        return wireName;
    }

    /** {@code float} or {@code base64}; anything else is {@code invalid_field} on {@code encoding_format}. */
    public static EncodingFormat fromWireName(String name) {
        for (EncodingFormat f : values()) {
            if (f.wireName.equals(name)) {
                return f;
            }
        }
        throw DensewireException.on(Category.INVALID_FIELD, "encoding_format",
                "must be \"float\" or \"base64\", got " + Dtype.quote(name));
    }
}
