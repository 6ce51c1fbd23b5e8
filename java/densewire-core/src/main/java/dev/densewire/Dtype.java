package dev.densewire;

import dev.densewire.DensewireException.Category;

/** The element types of SPEC.md section 2. Names are exact, lowercase ASCII. */
public enum Dtype {
    FLOAT32("float32", 4, 1),
    FLOAT16("float16", 2, 2),
    BFLOAT16("bfloat16", 2, 3),
    FLOAT64("float64", 8, 4),
    INT8("int8", 1, 5),
    UINT8("uint8", 1, 6),
    /** Packed bits, most significant bit first, each row padded to a whole byte. */
    BINARY("binary", 1, 7);

    private static final Dtype[] BY_PROTO = {null, FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT8, UINT8, BINARY};

    private final String wireName;
    private final int itemBytes;
    private final int protoValue;

    Dtype(String wireName, int itemBytes, int protoValue) {
        this.wireName = wireName;
        this.itemBytes = itemBytes;
        this.protoValue = protoValue;
    }

    /** The name on the wire, e.g. {@code float32}. */
    public String wireName() {
        return wireName;
    }

    /** Bytes per stored item; for {@link #BINARY} the item is one packed byte of 8 dimensions. */
    public int itemBytes() {
        return itemBytes;
    }

    /** The value of the Protobuf enum {@code densewire.v1.DType}. */
    public int protoValue() {
        return protoValue;
    }

    /** True for float32, float16, bfloat16 and float64. */
    public boolean isFloat() {
        return this == FLOAT32 || this == FLOAT16 || this == BFLOAT16 || this == FLOAT64;
    }

    /** {@code row_bytes(dtype, d)}: bytes of one row of {@code d} dimensions. */
    public long rowBytes(long d) {
        return this == BINARY ? (d + 7) / 8 : d * itemBytes;
    }

    /** Stored items in one row: {@code d}, or {@code ceil(d / 8)} packed bytes for binary. */
    public long rowItems(long d) {
        return this == BINARY ? (d + 7) / 8 : d;
    }

    @Override
    public String toString() {
        return wireName;
    }

    /** The dtype of an exact wire name; anything else is {@code unknown_dtype} on the field {@code dtype}. */
    public static Dtype fromWireName(String name) {
        return fromWireName(name, "dtype");
    }

    /** As {@link #fromWireName(String)}, reporting errors on {@code field} (e.g. a header name). */
    public static Dtype fromWireName(String name, String field) {
        if (name != null) {
            for (Dtype d : values()) {
                if (d.wireName.equals(name)) {
                    return d;
                }
            }
        }
        throw DensewireException.on(Category.UNKNOWN_DTYPE, field, "unknown dtype " + quote(name)
                + " (expected one of float32, float16, bfloat16, float64, int8, uint8, binary)");
    }

    /** The dtype of a Protobuf enum value; 0 is {@code invalid_field}, other unknown values {@code unknown_dtype}. */
    public static Dtype fromProtoValue(long value) {
        if (value == 0) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", "dtype is missing (DTYPE_UNSPECIFIED)");
        }
        if (value < 0 || value >= BY_PROTO.length) {
            throw DensewireException.on(Category.UNKNOWN_DTYPE, "dtype", "unknown dtype enum value " + value);
        }
        return BY_PROTO[(int) value];
    }

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        return '"' + (s.length() > 40 ? s.substring(0, 40) + "..." : s) + '"';
    }
}
