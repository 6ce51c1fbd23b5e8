package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Collects the values of one column, row after row, into its columnar form (what the text decoders use, and a way
 * to build a {@link Table} row by row). Fixed-width values go into one growing little-endian buffer, never boxed.
 */
public final class ColumnBuilder {
    private static final int MAX_BYTES = Integer.MAX_VALUE - 8;

    private final ColumnSpec spec;
    private final List<String> strings;
    private ByteBuffer data;

    /** A builder with room for about {@code rowsHint} values (it grows as needed). */
    public ColumnBuilder(ColumnSpec spec, int rowsHint) {
        this.spec = spec;
        int hint = Math.max(0, Math.min(rowsHint, 1 << 16));
        if (spec.type() == ColumnType.STRING) {
            strings = new ArrayList<>(hint);
        } else {
            strings = null;
            data = ByteBuffer.allocate((int) Math.min((long) hint * spec.width(), 1 << 24)).order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    public ColumnSpec spec() {
        return spec;
    }

    /** The values (vector items count 4 bytes each: a row of float32[d] is d items) put so far, in bytes; strings: count. */
    public long size() {
        return strings != null ? strings.size() : data.position();
    }

    private ByteBuffer room(int n) {
        if (data.remaining() < n) {
            long cap = Math.max(Math.max((long) data.capacity() * 2, 64), (long) data.position() + n);
            if ((long) data.position() + n > MAX_BYTES) {
                throw new DensewireException(Category.PAYLOAD_TOO_LARGE, "column " + Tables.quote(spec.name())
                        + " holds more than a Java array can", -1, null);
            }
            ByteBuffer bigger = ByteBuffer.allocate((int) Math.min(cap, MAX_BYTES)).order(ByteOrder.LITTLE_ENDIAN);
            data.flip();
            bigger.put(data);
            data = bigger;
        }
        return data;
    }

    public ColumnBuilder putBool(boolean v) {
        room(1).put((byte) (v ? 1 : 0));
        return this;
    }

    public ColumnBuilder putInt32(int v) {
        room(4).putInt(v);
        return this;
    }

    public ColumnBuilder putInt64(long v) {
        room(8).putLong(v);
        return this;
    }

    /** A float32 value, or one item of a {@code float32[d]} row. */
    public ColumnBuilder putFloat32(float v) {
        room(4).putFloat(v);
        return this;
    }

    public ColumnBuilder putFloat64(double v) {
        room(8).putDouble(v);
        return this;
    }

    /** Whole values as little-endian bytes ({@code len} a multiple of the width: vectors' items, uuids' 16 bytes). */
    public ColumnBuilder putRaw(byte[] littleEndian, int off, int len) {
        room(len).put(littleEndian, off, len);
        return this;
    }

    public ColumnBuilder putString(String v) {
        strings.add(v);
        return this;
    }

    /** A uuid from its text (either case); false (nothing put) when the text is not a uuid. */
    public boolean putUuid(CharSequence text) {
        ByteBuffer b = room(16);
        if (!Tables.parseUuid(text, b.array(), b.arrayOffset() + b.position())) {
            return false;
        }
        b.position(b.position() + 16);
        return true;
    }

    /** The column of what was put (its row count is what the table says: {@link Table#validate()} checks it). */
    public Column build() {
        if (strings != null) {
            return Column.stringsUnchecked(spec, List.copyOf(strings));
        }
        ByteBuffer out = data.duplicate();
        out.flip();
        return Column.fixed(spec, out);
    }
}
