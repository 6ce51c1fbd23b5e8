package dev.densewire;

import dev.densewire.DensewireException.Category;

/**
 * The column types of a table (SPEC.md section 15.1). The ordinal + 1 is the Protobuf {@code ColumnType} enum of
 * {@code table.proto}. A {@link #FLOAT32_VECTOR} column also has dimensions ({@link ColumnSpec#dimensions()}).
 */
public enum ColumnType {
    /** One byte a value, {@code 0x00} or {@code 0x01}. */
    BOOL("bool", 1),
    /** Little-endian two's complement. */
    INT32("int32", 4),
    /** Little-endian two's complement. */
    INT64("int64", 8),
    /** IEEE 754 binary32, little-endian. */
    FLOAT32("float32", 4),
    /** IEEE 754 binary64, little-endian. */
    FLOAT64("float64", 8),
    /** UTF-8 text (variable width). */
    STRING("string", 0),
    /** 16 bytes in RFC 9562 order (that of the canonical text). */
    UUID("uuid", 16),
    /** {@code float32[d]}: d little-endian float32 items a value. */
    FLOAT32_VECTOR("float32[]", 4);

    /** The largest d of a {@code float32[d]} type this library reads (so that n * 4d stays far from overflow). */
    public static final int MAX_DIMENSIONS = 1 << 24;

    private final String wireName;
    private final int width;

    ColumnType(String wireName, int width) {
        this.wireName = wireName;
        this.width = width;
    }

    /** The type name ({@code "int32"}; {@code "float32[]"} for vectors: {@link ColumnSpec#typeName()} adds d). */
    public String wireName() {
        return wireName;
    }

    /** The Protobuf enum value (1 to 8). */
    public int protoValue() {
        return ordinal() + 1;
    }

    /** Bytes of one value (of one item for vectors), 0 for strings. */
    public int itemWidth() {
        return width;
    }

    /** The type of a Protobuf enum value; {@code unknown_dtype} for any other value, {@code invalid_field} for 0. */
    public static ColumnType fromProtoValue(long value) {
        if (value >= 1 && value <= 8) {
            return values()[(int) value - 1];
        }
        throw new DensewireException(value == 0 ? Category.INVALID_FIELD : Category.UNKNOWN_DTYPE,
                value == 0 ? "the column type is missing (absent or 0)" : "unknown column type enum value " + value, -1, null);
    }

    @Override
    public String toString() {
        return wireName;
    }
}
