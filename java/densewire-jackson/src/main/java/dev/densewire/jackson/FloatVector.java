package dev.densewire.jackson;

import java.nio.FloatBuffer;
import java.util.Arrays;

/**
 * A float32 vector for POJOs: written by {@link DensewireModule} as Base64, read from Base64 or a JSON array.
 * Immutable; {@link #wrap} takes ownership of an array without copying.
 */
public final class FloatVector {
    private final float[] values;

    private FloatVector(float[] values) {
        this.values = values;
    }

    /** A vector of a copy of {@code values}. */
    public static FloatVector of(float... values) {
        return new FloatVector(values.clone());
    }

    /** A vector over {@code values} without copying; the caller must not modify the array afterwards. */
    public static FloatVector wrap(float[] values) {
        return new FloatVector(values);
    }

    public int dims() {
        return values.length;
    }

    public float get(int i) {
        return values[i];
    }

    /** A copy of the values. */
    public float[] toArray() {
        return values.clone();
    }

    /** A read-only view of the values. */
    public FloatBuffer asFloatBuffer() {
        return FloatBuffer.wrap(values).asReadOnlyBuffer();
    }

    /** The backing array, for serializers in this package (not copied). */
    float[] array() {
        return values;
    }

    /** Bit-exact equality: NaN payloads and signed zeros count. */
    @Override
    public boolean equals(Object o) {
        if (!(o instanceof FloatVector)) {
            return false;
        }
        float[] other = ((FloatVector) o).values;
        if (other.length != values.length) {
            return false;
        }
        for (int i = 0; i < values.length; i++) {
            if (Float.floatToRawIntBits(values[i]) != Float.floatToRawIntBits(other[i])) {
                return false;
            }
        }
        return true;
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(values);
    }

    @Override
    public String toString() {
        return values.length <= 8 ? "FloatVector" + Arrays.toString(values)
                : "FloatVector[" + values.length + " dims: " + values[0] + ", " + values[1] + ", ...]";
    }
}
