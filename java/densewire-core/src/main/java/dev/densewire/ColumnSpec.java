package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.util.Objects;

/**
 * A column's name and type: one entry of the {@code Densewire-Columns} header (SPEC.md section 15.2).
 *
 * @param name       the column name: non-empty UTF-8 text
 * @param type       the column type
 * @param dimensions d of a {@code float32[d]} column (1 to {@link ColumnType#MAX_DIMENSIONS}); 0 for the other types
 */
public record ColumnSpec(String name, ColumnType type, int dimensions) {
    public ColumnSpec {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(type, "type");
        if ((type == ColumnType.FLOAT32_VECTOR) != (dimensions > 0) || dimensions > ColumnType.MAX_DIMENSIONS) {
            throw new IllegalArgumentException("dimensions must be 1.." + ColumnType.MAX_DIMENSIONS
                    + " for float32[d] and 0 for " + type + ", got " + dimensions);
        }
    }

    /** A column of a type without dimensions. */
    public static ColumnSpec of(String name, ColumnType type) {
        return new ColumnSpec(name, type, 0);
    }

    /** A {@code float32[d]} column. */
    public static ColumnSpec vector(String name, int dimensions) {
        return new ColumnSpec(name, ColumnType.FLOAT32_VECTOR, dimensions);
    }

    /**
     * A column of the type named {@code typeName} (SPEC.md 15.1: exact lowercase ASCII, {@code float32[d]} with d in
     * decimal without leading zeros, d &ge; 1).
     *
     * @throws DensewireException {@code unknown_dtype} (no field: the caller knows where the name came from)
     */
    public static ColumnSpec parse(String name, String typeName) {
        for (ColumnType t : ColumnType.values()) {
            if (t != ColumnType.FLOAT32_VECTOR && t.wireName().equals(typeName)) {
                return new ColumnSpec(name, t, 0);
            }
        }
        if (typeName.startsWith("float32[") && typeName.endsWith("]") && typeName.length() > 9) {
            String digits = typeName.substring(8, typeName.length() - 1);
            if (digits.length() <= 8 && digits.charAt(0) != '0' && digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
                int d = Integer.parseInt(digits);
                if (d <= ColumnType.MAX_DIMENSIONS) {
                    return new ColumnSpec(name, ColumnType.FLOAT32_VECTOR, d);
                }
            }
        }
        throw new DensewireException(Category.UNKNOWN_DTYPE, "unknown column type " + Tables.quote(typeName)
                + " (want bool, int32, int64, float32, float64, string, uuid or float32[d])", -1, null);
    }

    /** The wire name of the type: {@code "int32"}, {@code "float32[384]"}. */
    public String typeName() {
        return type == ColumnType.FLOAT32_VECTOR ? "float32[" + dimensions + "]" : type.wireName();
    }

    /** Bytes of one value ({@code 4d} for vectors), 0 for strings. */
    public int width() {
        return type == ColumnType.FLOAT32_VECTOR ? 4 * dimensions : type.itemWidth();
    }

    @Override
    public String toString() {
        return name + "=" + typeName();
    }
}
