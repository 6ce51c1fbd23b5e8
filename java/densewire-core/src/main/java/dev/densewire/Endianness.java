package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteOrder;

/**
 * The byte order of Base64 strings (SPEC.md section 4). Little-endian is canonical and the only order of
 * binary bodies; big-endian exists for interoperability (Elasticsearch {@code dense_vector}, Jackson's
 * {@code @JsonFormat(shape = BINARY)}, pgvector).
 */
public enum Endianness {
    LITTLE("little", ByteOrder.LITTLE_ENDIAN),
    BIG("big", ByteOrder.BIG_ENDIAN);

    private final String wireName;
    private final ByteOrder order;

    Endianness(String wireName, ByteOrder order) {
        this.wireName = wireName;
        this.order = order;
    }

    public String wireName() {
        return wireName;
    }

    public ByteOrder nioOrder() {
        return order;
    }

    @Override
    public String toString() {
        return wireName;
    }

    /** {@code little} or {@code big}; anything else is {@code invalid_field} on the field {@code byteorder}. */
    public static Endianness fromWireName(String name) {
        return fromWireName(name, "byteorder");
    }

    public static Endianness fromWireName(String name, String field) {
        if ("little".equals(name)) {
            return LITTLE;
        }
        if ("big".equals(name)) {
            return BIG;
        }
        throw DensewireException.on(Category.INVALID_FIELD, field,
                "unknown byte order " + Dtype.quote(name) + " (expected little or big)");
    }
}
