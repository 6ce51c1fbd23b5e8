package dev.densewire;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

/**
 * One column of a {@link Table} (SPEC.md section 15.8). A fixed-width column holds its values as
 * {@code rows * width} little-endian bytes ({@link #data()}: bool one byte a value, uuid 16 bytes in RFC 9562
 * order, {@code float32[d]} {@code rows * d} float32 items row-major), which may be a view of the decoded body;
 * the typed accessors ({@link #int32s()}, {@link #float64s()}, {@link #vectors()}, ...) are views of those bytes,
 * never boxed. A string column holds a {@link #strings() list}.
 */
public final class Column {
    private final ColumnSpec spec;
    private final ByteBuffer data; // little-endian, position 0; null for strings
    private final List<String> strings; // null for fixed-width types

    private Column(ColumnSpec spec, ByteBuffer data, List<String> strings) {
        this.spec = spec;
        this.data = data;
        this.strings = strings;
    }

    /** A fixed-width column over {@code data}'s remaining bytes (not copied), which must be {@code rows * width}. */
    public static Column fixed(ColumnSpec spec, ByteBuffer data) {
        if (spec.type() == ColumnType.STRING) {
            throw new IllegalArgumentException("a string column holds strings, not bytes");
        }
        return new Column(spec, data.slice().order(ByteOrder.LITTLE_ENDIAN), null);
    }

    /** A fixed-width column over little-endian bytes (not copied). */
    public static Column fixed(ColumnSpec spec, byte[] data) {
        return fixed(spec, ByteBuffer.wrap(data));
    }

    /** A string column. */
    public static Column strings(String name, List<String> values) {
        return new Column(ColumnSpec.of(name, ColumnType.STRING), null, List.copyOf(values));
    }

    static Column stringsUnchecked(ColumnSpec spec, List<String> values) {
        return new Column(spec, null, values);
    }

    public static Column ofBools(String name, boolean... values) {
        byte[] b = new byte[values.length];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (values[i] ? 1 : 0);
        }
        return fixed(ColumnSpec.of(name, ColumnType.BOOL), b);
    }

    public static Column ofInt32(String name, int... values) {
        ByteBuffer b = allocate(4 * values.length);
        b.asIntBuffer().put(values);
        return fixed(ColumnSpec.of(name, ColumnType.INT32), b);
    }

    public static Column ofInt64(String name, long... values) {
        ByteBuffer b = allocate(8 * values.length);
        b.asLongBuffer().put(values);
        return fixed(ColumnSpec.of(name, ColumnType.INT64), b);
    }

    public static Column ofFloat32(String name, float... values) {
        ByteBuffer b = allocate(4 * values.length);
        b.asFloatBuffer().put(values);
        return fixed(ColumnSpec.of(name, ColumnType.FLOAT32), b);
    }

    public static Column ofFloat64(String name, double... values) {
        ByteBuffer b = allocate(8 * values.length);
        b.asDoubleBuffer().put(values);
        return fixed(ColumnSpec.of(name, ColumnType.FLOAT64), b);
    }

    public static Column ofUuids(String name, UUID... values) {
        ByteBuffer b = ByteBuffer.allocate(16 * values.length); // RFC order: the most significant byte first
        for (UUID u : values) {
            b.putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits());
        }
        return fixed(ColumnSpec.of(name, ColumnType.UUID), b.flip());
    }

    /** A {@code float32[d]} column of {@code values.length / d} rows, items row-major. */
    public static Column ofVectors(String name, int d, float[] values) {
        if (d < 1 || values.length % d != 0) {
            throw new IllegalArgumentException(values.length + " items are not rows of " + d);
        }
        ByteBuffer b = allocate(4 * values.length);
        b.asFloatBuffer().put(values);
        return fixed(ColumnSpec.vector(name, d), b);
    }

    private static ByteBuffer allocate(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    public ColumnSpec spec() {
        return spec;
    }

    public String name() {
        return spec.name();
    }

    public ColumnType type() {
        return spec.type();
    }

    /** d of a {@code float32[d]} column, 0 otherwise. */
    public int dimensions() {
        return spec.dimensions();
    }

    /** The number of values (rows). */
    public int size() {
        if (strings != null) {
            return strings.size();
        }
        int w = spec.width();
        return w == 0 ? 0 : data.capacity() / w;
    }

    /** The values' little-endian bytes (a read-only view, position 0); a string column has none. */
    public ByteBuffer data() {
        want(null);
        return data.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    ByteBuffer rawData() {
        return data;
    }

    private void want(ColumnType t) {
        if (t == null ? spec.type() == ColumnType.STRING : spec.type() != t) {
            throw new IllegalStateException("column " + Tables.quote(spec.name()) + " is " + spec.typeName()
                    + (t == null ? ", which has no bytes" : ", not " + t));
        }
    }

    public boolean bool(int row) {
        want(ColumnType.BOOL);
        return data.get(row) != 0;
    }

    /** The values of a bool column (a copy). */
    public boolean[] bools() {
        want(ColumnType.BOOL);
        boolean[] out = new boolean[data.capacity()];
        for (int i = 0; i < out.length; i++) {
            out[i] = data.get(i) != 0;
        }
        return out;
    }

    /** The values of an int32 column (a view). */
    public IntBuffer int32s() {
        want(ColumnType.INT32);
        return data().asIntBuffer();
    }

    /** The values of an int64 column (a view). */
    public LongBuffer int64s() {
        want(ColumnType.INT64);
        return data().asLongBuffer();
    }

    /** The values of a float32 column (a view). */
    public FloatBuffer float32s() {
        want(ColumnType.FLOAT32);
        return data().asFloatBuffer();
    }

    /** The values of a float64 column (a view). */
    public DoubleBuffer float64s() {
        want(ColumnType.FLOAT64);
        return data().asDoubleBuffer();
    }

    /** The items of a {@code float32[d]} column, {@code rows * d} float32 row-major (a view). */
    public FloatBuffer vectors() {
        want(ColumnType.FLOAT32_VECTOR);
        return data().asFloatBuffer();
    }

    /** Row {@code row} of a {@code float32[d]} column (a copy of its d items). */
    public float[] vector(int row) {
        want(ColumnType.FLOAT32_VECTOR);
        float[] out = new float[spec.dimensions()];
        vectors().get(row * spec.dimensions(), out);
        return out;
    }

    /** A {@code float32[d]} column as a (rows, d) float32 {@link Tensor} sharing its bytes. */
    public Tensor tensor() {
        want(ColumnType.FLOAT32_VECTOR);
        return Tensor.of(Dtype.FLOAT32, size(), spec.dimensions(), data());
    }

    public UUID uuid(int row) {
        want(ColumnType.UUID);
        ByteBuffer be = data.duplicate().order(ByteOrder.BIG_ENDIAN);
        return new UUID(be.getLong(16 * row), be.getLong(16 * row + 8));
    }

    /** The values of a string column (unmodifiable). */
    public List<String> strings() {
        want(ColumnType.STRING);
        return strings;
    }

    public String string(int row) {
        return strings().get(row);
    }

    /** Same spec and the same values, bit for bit. */
    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Column)) {
            return false;
        }
        Column c = (Column) o;
        return spec.equals(c.spec) && Objects.equals(strings, c.strings)
                && (data == null ? c.data == null : c.data != null && data.duplicate().clear().equals(c.data.duplicate().clear()));
    }

    @Override
    public int hashCode() {
        return Objects.hash(spec, strings, data == null ? 0 : data.duplicate().clear().hashCode());
    }

    @Override
    public String toString() {
        return spec + " (" + size() + " values)";
    }
}
