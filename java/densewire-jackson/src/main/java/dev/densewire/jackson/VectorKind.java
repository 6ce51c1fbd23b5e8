package dev.densewire.jackson;

/** The Java types the module reads and writes as vectors. */
enum VectorKind {
    FLOATS(float[].class),
    DOUBLES(double[].class),
    FLOAT_VECTOR(FloatVector.class);

    private final Class<?> type;

    VectorKind(Class<?> type) {
        this.type = type;
    }

    @SuppressWarnings("unchecked")
    <T> Class<T> type() {
        return (Class<T>) type;
    }

    float[] floats(Object value) {
        return this == FLOAT_VECTOR ? ((FloatVector) value).array() : (float[]) value;
    }

    int length(Object value) {
        return this == DOUBLES ? ((double[]) value).length : floats(value).length;
    }

    /** The value for decoded floats or doubles. */
    Object fromFloats(float[] v) {
        return this == FLOAT_VECTOR ? FloatVector.wrap(v) : v;
    }
}
