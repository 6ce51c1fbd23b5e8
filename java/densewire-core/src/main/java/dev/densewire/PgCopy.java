package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.regex.Pattern;

/**
 * PostgreSQL binary COPY streams of a pgvector column (SPEC.md section 16): what {@code COPY table (columns) FROM
 * STDIN (FORMAT BINARY)} reads and {@code COPY ... TO STDOUT (FORMAT BINARY)} writes, for an optional id column
 * ({@code int8}, {@code int4}, {@code text}, {@code uuid}) and one {@code vector}, {@code halfvec}, {@code bit} or
 * {@code sparsevec} column. Every number of the stream is big-endian.
 *
 * <p>Writing takes a {@link Tensor}: each row's items are byte-swapped into the stream in one bulk copy (no loop
 * over the items of a {@code vector} or {@code halfvec} column that needs no conversion), and the whole input is
 * checked before any byte is written. {@link #inputStream} produces a large input in chunks, each checked before it
 * is produced, for PgJDBC's {@code CopyManager.copyIn(sql, InputStream)}, which cancels the COPY when the stream
 * fails. Reading gives one {@link Tensor} of the column type's dtype (a {@code sparsevec} densified) and the ids.
 */
public final class PgCopy {
    private static final byte[] SIGNATURE = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', (byte) 0xFF, '\r', '\n', 0};
    private static final byte[] HEADER = Arrays.copyOf(SIGNATURE, 19); // flags 0, header extension length 0
    private static final byte[] TRAILER = {(byte) 0xFF, (byte) 0xFF};
    private static final int MAX_SPARSE_NNZ = 16000;
    /** The bound of a sparsevec stream's dense tensor: this many times the stream's bytes, at least 64 MiB. */
    private static final long MAX_SPARSE_DENSE_FACTOR = 4096;
    private static final long MAX_SPARSE_DENSE_MIN = 64L << 20;
    private static final Pattern UUID_TEXT = Pattern.compile(
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32}");

    private PgCopy() {
    }

    /** The pgvector (and PostgreSQL) column types of the vector column, with the dtype a reader returns. */
    public enum VectorType {
        /** {@code vector(d)}: float32. */
        VECTOR("vector", Dtype.FLOAT32, 16000),
        /** {@code halfvec(d)}: float16. */
        HALFVEC("halfvec", Dtype.FLOAT16, 16000),
        /** PostgreSQL's {@code bit(d)}: packed bits, MSB first. */
        BIT("bit", Dtype.BINARY, Integer.MAX_VALUE),
        /** {@code sparsevec(d)}: read back as a dense float32 tensor. */
        SPARSEVEC("sparsevec", Dtype.FLOAT32, 1_000_000_000);

        private final String sqlName;
        private final Dtype dtype;
        private final int maxDims;

        VectorType(String sqlName, Dtype dtype, int maxDims) {
            this.sqlName = sqlName;
            this.dtype = dtype;
            this.maxDims = maxDims;
        }

        /** The type's name in SQL, e.g. {@code halfvec}. */
        public String sqlName() {
            return sqlName;
        }

        /** The dtype a reader returns for this column type. */
        public Dtype dtype() {
            return dtype;
        }

        /** The most dimensions pgvector accepts in this type. */
        public int maxDims() {
            return maxDims;
        }

        /** The type of an SQL name ({@code vector}, {@code halfvec}, {@code bit}, {@code sparsevec}). */
        public static VectorType fromSqlName(String name) {
            for (VectorType t : values()) {
                if (t.sqlName.equals(name)) {
                    return t;
                }
            }
            throw DensewireException.on(Category.INVALID_FIELD, "type", "unknown vector type " + Dtype.quote(name)
                    + "; expected one of vector, halfvec, bit, sparsevec");
        }

        @Override
        public String toString() {
            return sqlName;
        }
    }

    /** The types of the id column; ids are {@code Long}, {@code Integer}, {@code String} and {@code UUID} values. */
    public enum IdType {
        /** {@code bigint}: {@code Long} when read; any integral {@code Number} in range when written. */
        INT8("int8", 8),
        /** {@code integer}: {@code Integer} when read; any integral {@code Number} in range when written. */
        INT4("int4", 4),
        /** {@code text}: {@code String} (a {@code CharSequence} when written), UTF-8 on the wire. */
        TEXT("text", -1),
        /** {@code uuid}: {@code UUID} (or its 36- or 32-digit text when written). */
        UUID("uuid", 16);

        private final String sqlName;
        private final int width;

        IdType(String sqlName, int width) {
            this.sqlName = sqlName;
            this.width = width;
        }

        public String sqlName() {
            return sqlName;
        }

        /** The type of an SQL name ({@code int8}, {@code int4}, {@code text}, {@code uuid}). */
        public static IdType fromSqlName(String name) {
            for (IdType t : values()) {
                if (t.sqlName.equals(name)) {
                    return t;
                }
            }
            throw DensewireException.on(Category.INVALID_FIELD, "type", "unknown id type " + Dtype.quote(name)
                    + "; expected one of int8, int4, text, uuid");
        }

        @Override
        public String toString() {
            return sqlName;
        }
    }

    /**
     * The columns of one COPY, in their order on the wire: an optional id column ({@code idType} null: none), then
     * the vector column. Names appear in error fields ({@code embedding[3][7]}, {@code id[2]}) and in the SQL of
     * {@link #copyFromStdin} / {@link #copyToStdout}.
     */
    public record Columns(VectorType type, String column, IdType idType, String idColumn) {
        public Columns {
            Objects.requireNonNull(type, "type");
            Objects.requireNonNull(column, "column");
            idColumn = idColumn == null ? "id" : idColumn;
        }

        /** One vector column named {@code embedding}, no id column. */
        public static Columns of(VectorType type) {
            return new Columns(type, "embedding", null, "id");
        }

        /** One vector column, no id column. */
        public static Columns of(VectorType type, String column) {
            return new Columns(type, column, null, "id");
        }

        /** These columns with an id column first. */
        public Columns withId(IdType type, String name) {
            return new Columns(this.type, column, Objects.requireNonNull(type, "id type"), name);
        }

        /** The number of fields of every tuple: 1, or 2 with an id column. */
        public int count() {
            return idType == null ? 1 : 2;
        }

        /** The column names in COPY order. */
        public List<String> names() {
            return idType == null ? List.of(column) : List.of(idColumn, column);
        }
    }

    /**
     * A decoded stream: the vectors, and the ids in row order ({@code Long}, {@code Integer}, {@code String} or
     * {@code UUID}; null for NULL), or null when the COPY has no id column.
     */
    public record Data(Tensor tensor, List<Object> ids) {
    }

    // ------------------------------------------------------------------ SQL

    /**
     * {@code COPY table ("id", "embedding") FROM STDIN (FORMAT BINARY)}: {@code table} as written in SQL (it may be
     * schema-qualified or quoted already); the column names are quoted identifiers.
     */
    public static String copyFromStdin(String table, Columns cols) {
        return "COPY " + table + " (" + columnList(cols) + ") FROM STDIN (FORMAT BINARY)";
    }

    /** {@code COPY table ("id", "embedding") TO STDOUT (FORMAT BINARY)}, as {@link #copyFromStdin}. */
    public static String copyToStdout(String table, Columns cols) {
        return "COPY " + table + " (" + columnList(cols) + ") TO STDOUT (FORMAT BINARY)";
    }

    private static String columnList(Columns cols) {
        StringBuilder sb = new StringBuilder();
        for (String name : cols.names()) {
            if (sb.length() > 0) {
                sb.append(", ");
            }
            sb.append('"').append(name.replace("\"", "\"\"")).append('"');
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------ writing

    /** The 19 bytes before the tuples: signature, flags 0, header extension length 0. */
    public static byte[] header() {
        return HEADER.clone();
    }

    /** The 2 bytes after the tuples. */
    public static byte[] trailer() {
        return TRAILER.clone();
    }

    /** A whole stream of {@code vectors} into one vector column (no id column). */
    public static byte[] encode(Tensor vectors, Columns cols) {
        return encode(vectors, cols, null);
    }

    /**
     * A whole stream (header, one tuple per row, trailer) of {@code vectors} and {@code ids} (one per row, any may
     * be null; null without an id column). Everything is checked before the stream is written.
     *
     * @throws DensewireException {@code non_finite} ({@code embedding[ROW][DIM]}), {@code invalid_field} (the
     *     column for a dimension count out of range or a tensor that cannot fill it, {@code embedding[ROW]} for a
     *     sparsevec of too many values, {@code id[ROW]} for an id out of range or of the wrong kind),
     *     {@code shape_mismatch} (the id column) for a number of ids that is not the number of rows
     */
    public static byte[] encode(Tensor vectors, Columns cols, List<?> ids) {
        Tuples t = prepare(vectors, cols, ids, 0);
        byte[] out = new byte[Math.toIntExact(HEADER.length + t.size + TRAILER.length)];
        System.arraycopy(HEADER, 0, out, 0, HEADER.length);
        ByteBuffer bb = ByteBuffer.wrap(out).order(ByteOrder.BIG_ENDIAN).position(HEADER.length);
        t.write(bb);
        bb.put(TRAILER);
        return out;
    }

    /**
     * The tuples of these rows alone (no header, no trailer); {@code row0} is the number of the first row in error
     * fields (the rows before it having been written in earlier chunks).
     */
    public static byte[] encodeTuples(Tensor vectors, Columns cols, List<?> ids, long row0) {
        Tuples t = prepare(vectors, cols, ids, row0);
        byte[] out = new byte[Math.toIntExact(t.size)];
        t.write(ByteBuffer.wrap(out).order(ByteOrder.BIG_ENDIAN));
        return out;
    }

    /**
     * The stream as an {@code InputStream} (for PgJDBC's {@code CopyManager.copyIn(sql, in)}): the header, the
     * tuples of {@code rowsPerChunk} rows at a time, each chunk encoded and checked when it is first read, then the
     * trailer. Memory stays bounded by one chunk whatever the number of rows. A chunk that fails throws its
     * {@link DensewireException} from {@code read}; PgJDBC then cancels the COPY, so PostgreSQL keeps none of its
     * rows.
     */
    public static InputStream inputStream(Tensor vectors, Columns cols, List<?> ids, int rowsPerChunk) {
        if (rowsPerChunk < 1) {
            throw new IllegalArgumentException("rowsPerChunk must be at least 1, got " + rowsPerChunk);
        }
        if (cols.idType() != null) {
            checkIdCount(ids, cols, vectors.rows());
        }
        return new ChunkStream(vectors, cols, ids, rowsPerChunk);
    }

    private static final class ChunkStream extends InputStream {
        private final Tensor vectors;
        private final Columns cols;
        private final List<?> ids;
        private final int rowsPerChunk;
        private int nextRow; // the first row of the next chunk
        private int stage; // 0: header next, 1: tuples, 2: trailer given, 3: done
        private byte[] chunk = new byte[0];
        private int at;

        ChunkStream(Tensor vectors, Columns cols, List<?> ids, int rowsPerChunk) {
            this.vectors = vectors;
            this.cols = cols;
            this.ids = ids;
            this.rowsPerChunk = rowsPerChunk;
        }

        /** Makes sure {@code chunk} has unread bytes, unless the stream has ended; false at the end. */
        private boolean fill() {
            while (at == chunk.length) {
                at = 0;
                if (stage == 0) {
                    chunk = HEADER.clone();
                    stage = 1;
                } else if (stage == 1 && nextRow < vectors.rows()) {
                    int stop = (int) Math.min((long) nextRow + rowsPerChunk, vectors.rows());
                    chunk = encodeTuples(rows(vectors, nextRow, stop), cols,
                            ids == null ? null : ids.subList(nextRow, stop), nextRow);
                    nextRow = stop;
                } else if (stage == 1) {
                    chunk = TRAILER.clone();
                    stage = 2;
                } else {
                    stage = 3;
                    chunk = new byte[0];
                    return false;
                }
            }
            return true;
        }

        @Override
        public int read() {
            return fill() ? chunk[at++] & 0xFF : -1;
        }

        @Override
        public int read(byte[] b, int off, int len) {
            Objects.checkFromIndexSize(off, len, b.length);
            if (len == 0) {
                return 0;
            }
            int done = 0;
            while (done < len && fill()) {
                int k = Math.min(len - done, chunk.length - at);
                System.arraycopy(chunk, at, b, off + done, k);
                at += k;
                done += k;
            }
            return done == 0 ? -1 : done;
        }

        @Override
        public int available() {
            return chunk.length - at;
        }
    }

    /** Rows {@code [from, to)} of a tensor, as a view. */
    private static Tensor rows(Tensor t, int from, int to) {
        int rb = t.rowBytes();
        ByteBuffer data = t.data();
        data.position(from * rb).limit(to * rb);
        return Tensor.of(t.dtype(), to - from, t.dims(), data);
    }

    /** Checked tuples, ready to be written: their exact size is known before any byte is. */
    private static final class Tuples {
        final Columns cols;
        final int n;
        final int d;
        FloatBuffer floats; // vector, sparsevec: native-order values (a view of the tensor or a converted copy)
        ShortBuffer halves; // halfvec: float16 bits
        ByteBuffer bits; // bit: packed rows, pad bits cleared
        int[] nnz; // sparsevec: non-zero values per row
        byte[][] idBytes; // per row, null for NULL (int8/int4/uuid: fixed width; text: UTF-8)
        long size;

        Tuples(Columns cols, int n, int d) {
            this.cols = cols;
            this.n = n;
            this.d = d;
        }

        long valueLength(int row) {
            switch (cols.type()) {
                case VECTOR:
                    return 4 + 4L * d;
                case HALFVEC:
                    return 4 + 2L * d;
                case BIT:
                    return 4 + (d + 7L) / 8;
                default:
                    return 12 + 8L * nnz[row];
            }
        }

        void write(ByteBuffer out) {
            short count = (short) cols.count();
            int rowBits = (int) ((d + 7L) / 8);
            for (int r = 0; r < n; r++) {
                out.putShort(count);
                if (cols.idType() != null) {
                    byte[] id = idBytes[r];
                    if (id == null) {
                        out.putInt(-1);
                    } else {
                        out.putInt(id.length).put(id);
                    }
                }
                out.putInt((int) valueLength(r));
                switch (cols.type()) {
                    case VECTOR: {
                        out.putShort((short) d).putShort((short) 0);
                        // one bulk copy of the row, byte-swapped to big-endian on the way
                        out.asFloatBuffer().put(floats.slice(r * d, d));
                        out.position(out.position() + 4 * d);
                        break;
                    }
                    case HALFVEC: {
                        out.putShort((short) d).putShort((short) 0);
                        out.asShortBuffer().put(halves.slice(r * d, d));
                        out.position(out.position() + 2 * d);
                        break;
                    }
                    case BIT:
                        out.putInt(d).put(bits.slice(r * rowBits, rowBits));
                        break;
                    default: {
                        int k = nnz[r];
                        out.putInt(d).putInt(k).putInt(0);
                        int base = r * d;
                        int idx = out.position();
                        int val = idx + 4 * k;
                        for (int j = 0; j < d; j++) {
                            float v = floats.get(base + j);
                            if (v != 0) {
                                out.putInt(idx, j).putFloat(val, v);
                                idx += 4;
                                val += 4;
                            }
                        }
                        out.position(val);
                    }
                }
            }
        }
    }

    private static Tuples prepare(Tensor t, Columns cols, List<?> ids, long row0) {
        int n = t.rows();
        int d = t.dims();
        VectorType type = cols.type();
        if (d < 1 || d > type.maxDims()) {
            throw DensewireException.on(Category.INVALID_FIELD, cols.column(), "a " + type + " has 1 to "
                    + type.maxDims() + " dimensions, not " + d);
        }
        Tuples tu = new Tuples(cols, n, d);
        Dtype dtype = t.dtype();
        if (type == VectorType.BIT) {
            tu.bits = packedBits(t);
        } else {
            if (dtype == Dtype.INT8 || dtype == Dtype.UINT8 || dtype == Dtype.BINARY) {
                throw DensewireException.on(Category.INVALID_FIELD, cols.column(),
                        "a " + dtype + " tensor cannot fill a " + type + " column");
            }
            if (type == VectorType.HALFVEC) {
                tu.halves = halfValues(t);
                checkFiniteHalves(tu.halves, d, cols, row0);
            } else {
                tu.floats = floatValues(t);
                checkFiniteFloats(tu.floats, d, cols, row0);
            }
        }
        if (type == VectorType.SPARSEVEC) {
            tu.nnz = new int[n];
            for (int r = 0; r < n; r++) {
                int k = 0;
                for (int j = 0, base = r * d; j < d; j++) {
                    if (tu.floats.get(base + j) != 0) { // +0.0 and -0.0 are left out: pgvector refuses zero values
                        k++;
                    }
                }
                if (k > MAX_SPARSE_NNZ) {
                    throw DensewireException.on(Category.INVALID_FIELD, cols.column() + "[" + (row0 + r) + "]",
                            "a sparsevec holds at most " + MAX_SPARSE_NNZ + " non-zero values, row " + (row0 + r)
                                    + " has " + k);
                }
                tu.nnz[r] = k;
            }
        }
        long size = 2L * n;
        if (cols.idType() != null) {
            tu.idBytes = idBytes(ids, cols, n, row0);
            for (byte[] id : tu.idBytes) {
                size += 4 + (id == null ? 0 : id.length);
            }
        }
        for (int r = 0; r < n; r++) {
            size += 4 + tu.valueLength(r);
        }
        tu.size = size;
        return tu;
    }

    /** The items as native-order float32 for a vector or sparsevec column: float32 as is, others converted. */
    private static FloatBuffer floatValues(Tensor t) {
        switch (t.dtype()) {
            case FLOAT32:
                return t.asFloatBuffer();
            case FLOAT64: // section 3.3, and float16 / bfloat16 widen exactly
            case FLOAT16:
            case BFLOAT16:
                return FloatBuffer.wrap(t.toFloatArray());
            default:
                throw new AssertionError(t.dtype());
        }
    }

    /** float16 bits for a halfvec column: float16 as is, float32 and float64 rounded directly (section 3.1). */
    private static ShortBuffer halfValues(Tensor t) {
        switch (t.dtype()) {
            case FLOAT16:
                return t.asShortBuffer();
            case FLOAT64: {
                double[] src = t.toDoubleArray();
                short[] out = new short[src.length];
                for (int k = 0; k < src.length; k++) {
                    out[k] = Conversions.doubleToFloat16(src[k]);
                }
                return ShortBuffer.wrap(out);
            }
            case FLOAT32:
            case BFLOAT16: { // bfloat16 widens to float32 exactly first
                float[] src = t.toFloatArray();
                short[] out = new short[src.length];
                for (int k = 0; k < src.length; k++) {
                    out[k] = Conversions.floatToFloat16(src[k]);
                }
                return ShortBuffer.wrap(out);
            }
            default:
                throw new AssertionError(t.dtype());
        }
    }

    /** Packed rows for a bit column: binary as is with the pad bits cleared; other dtypes by {@code value > 0}. */
    private static ByteBuffer packedBits(Tensor t) {
        int n = t.rows();
        int d = t.dims();
        int rb = (int) Dtype.BINARY.rowBytes(d);
        byte[] out = new byte[Math.multiplyExact(n, rb)];
        if (t.dtype() == Dtype.BINARY) {
            t.data().get(out);
            if (d % 8 != 0) {
                byte mask = (byte) (0xFF << (8 - d % 8));
                for (int r = 0; r < n; r++) {
                    out[r * rb + rb - 1] &= mask;
                }
            }
        } else if (t.dtype() == Dtype.FLOAT64) {
            double[] src = t.toDoubleArray();
            for (int r = 0; r < n; r++) {
                for (int j = 0; j < d; j++) {
                    if (src[r * d + j] > 0) {
                        out[r * rb + (j >>> 3)] |= (byte) (0x80 >>> (j & 7));
                    }
                }
            }
        } else {
            float[] src = t.toFloatArray(); // exact for float32, float16, bfloat16, int8, uint8
            for (int r = 0; r < n; r++) {
                Conversions.packBits(src, r * d, d, out, r * rb);
            }
        }
        return ByteBuffer.wrap(out);
    }

    private static void checkFiniteFloats(FloatBuffer v, int d, Columns cols, long row0) {
        for (int k = 0, size = v.limit(); k < size; k++) {
            float x = v.get(k);
            if (x - x != 0) { // NaN or an infinity
                throw nonFinite(Float.toString(x), k / d, k % d, cols, row0);
            }
        }
    }

    private static void checkFiniteHalves(ShortBuffer v, int d, Columns cols, long row0) {
        for (int k = 0, size = v.limit(); k < size; k++) {
            short h = v.get(k);
            if ((h & 0x7C00) == 0x7C00) {
                throw nonFinite(Float.toString(Conversions.float16ToFloat(h)) + " (as float16)", k / d, k % d, cols, row0);
            }
        }
    }

    private static DensewireException nonFinite(String value, int r, int c, Columns cols, long row0) {
        return DensewireException.on(Category.NON_FINITE, cols.column() + "[" + (row0 + r) + "][" + c + "]",
                value + " cannot be stored in a " + cols.type() + " (pgvector refuses NaN and infinity)");
    }

    private static void checkIdCount(List<?> ids, Columns cols, int n) {
        if (ids == null) {
            throw DensewireException.on(Category.INVALID_FIELD, cols.idColumn(), "the COPY has an id column but no ids were given");
        }
        if (ids.size() != n) {
            throw DensewireException.on(Category.SHAPE_MISMATCH, cols.idColumn(), ids.size() + " ids for " + n + " vectors");
        }
    }

    private static byte[][] idBytes(List<?> ids, Columns cols, int n, long row0) {
        checkIdCount(ids, cols, n);
        byte[][] out = new byte[n][];
        IdType type = cols.idType();
        int r = 0;
        for (Object v : ids) {
            if (v != null) {
                String field = cols.idColumn() + "[" + (row0 + r) + "]";
                switch (type) {
                    case INT8:
                        out[r] = ByteBuffer.allocate(8).putLong(integral(v, 64, type, field)).array();
                        break;
                    case INT4:
                        out[r] = ByteBuffer.allocate(4).putInt((int) integral(v, 32, type, field)).array();
                        break;
                    case TEXT:
                        if (!(v instanceof CharSequence)) {
                            throw wrongKind(v, type, field);
                        }
                        out[r] = v.toString().getBytes(StandardCharsets.UTF_8);
                        break;
                    default:
                        out[r] = uuidBytes(v, field);
                }
            }
            r++;
        }
        return out;
    }

    private static long integral(Object v, int bits, IdType type, String field) {
        BigInteger b;
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            b = BigInteger.valueOf(((Number) v).longValue());
        } else if (v instanceof BigInteger) {
            b = (BigInteger) v;
        } else {
            throw wrongKind(v, type, field);
        }
        if (b.bitLength() > bits - 1) {
            throw DensewireException.on(Category.INVALID_FIELD, field, "id " + b + " is out of the " + type + " range");
        }
        return b.longValue();
    }

    private static byte[] uuidBytes(Object v, String field) {
        UUID u;
        if (v instanceof UUID) {
            u = (UUID) v;
        } else if (v instanceof CharSequence && UUID_TEXT.matcher((CharSequence) v).matches()) {
            String hex = v.toString().replace("-", "");
            u = new UUID(Long.parseUnsignedLong(hex.substring(0, 16), 16), Long.parseUnsignedLong(hex.substring(16), 16));
        } else {
            throw DensewireException.on(Category.INVALID_FIELD, field, "id " + describe(v) + " is not a uuid");
        }
        return ByteBuffer.allocate(16).putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits()).array();
    }

    private static DensewireException wrongKind(Object v, IdType type, String field) {
        return DensewireException.on(Category.INVALID_FIELD, field, "id " + describe(v) + " is not an " + type
                + (type == IdType.TEXT ? " (a String)" : " (an integral Number)"));
    }

    private static String describe(Object v) {
        String s = String.valueOf(v);
        return (v instanceof CharSequence ? Dtype.quote(s) : s.length() > 40 ? s.substring(0, 40) + "..." : s)
                + " (" + v.getClass().getSimpleName() + ")";
    }

    // ------------------------------------------------------------------ reading

    /** Reads a whole stream (as {@code COPY ... TO STDOUT (FORMAT BINARY)} sends it); see {@link #decode(ByteBuffer, Columns, int)}. */
    public static Data decode(byte[] stream, Columns cols) {
        return decode(ByteBuffer.wrap(stream), cols, 0);
    }

    /**
     * Reads a whole stream (from the buffer's position to its limit; offsets in errors count from its position)
     * into one tensor of the column type's dtype, and the ids. {@code emptyDims} is the {@code d} of the tensor
     * when the stream has no rows.
     *
     * @throws DensewireException with the category and offset of SPEC.md section 16: {@code truncated},
     *     {@code malformed}, {@code shape_mismatch}, {@code length_mismatch}, {@code invalid_field} (a NULL vector)
     */
    public static Data decode(ByteBuffer stream, Columns cols, int emptyDims) {
        return new Reader(stream.slice().order(ByteOrder.BIG_ENDIAN), cols).read(emptyDims);
    }

    /** The tuple-by-tuple reader: every check of SPEC.md section 16 with its offset. */
    private static final class Reader {
        private final ByteBuffer buf;
        private final Columns cols;
        private final int size;
        private int d = -1; // the first row's d
        private final IntList starts = new IntList(); // offset of each row's items (sparsevec: of its indices)
        private final IntList nnz = new IntList(); // sparsevec: non-zero values of each row
        private final List<Object> ids = new ArrayList<>();
        private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);

        Reader(ByteBuffer buf, Columns cols) {
            this.buf = buf;
            this.cols = cols;
            this.size = buf.limit();
        }

        private void need(long at, long k) {
            if (at + k > size) {
                throw DensewireException.at(Category.TRUNCATED, size, "the stream ends after " + size + " bytes, inside a tuple");
            }
        }

        private int header() {
            int prefix = Math.min(SIGNATURE.length, size);
            for (int i = 0; i < prefix; i++) {
                if (buf.get(i) != SIGNATURE[i]) {
                    throw DensewireException.at(Category.MALFORMED, 0,
                            "not a PostgreSQL binary COPY stream (the signature PGCOPY\\n\\377\\r\\n\\0 differs)");
                }
            }
            if (size < 19) {
                throw DensewireException.at(Category.TRUNCATED, size, "the stream ends inside its 19-byte header after "
                        + size + " bytes");
            }
            int flags = buf.getInt(11);
            if ((flags & 0x1FFFF) != 0) {
                throw DensewireException.at(Category.MALFORMED, 11, String.format("flags 0x%08x: tuples with OIDs (bit 16)"
                        + " or an unknown critical flag (bits 0 to 15)", flags));
            }
            int ext = buf.getInt(15);
            if (ext < 0) {
                throw DensewireException.at(Category.MALFORMED, 15, "negative header extension length " + ext);
            }
            if (19L + ext > size) {
                throw DensewireException.at(Category.TRUNCATED, size, "the stream ends inside its header extension");
            }
            return 19 + ext;
        }

        Data read(int emptyDims) {
            int pos = header();
            while (true) {
                need(pos, 2);
                short count = buf.getShort(pos);
                if (count == -1) {
                    if (pos + 2 != size) {
                        throw DensewireException.at(Category.MALFORMED, pos + 2, (size - pos - 2) + " bytes after the trailer");
                    }
                    break;
                }
                if (count != cols.count()) {
                    throw DensewireException.at(Category.SHAPE_MISMATCH, pos, "a tuple of " + count
                            + " fields, but the COPY has " + cols.count() + " columns (" + String.join(", ", cols.names()) + ")");
                }
                pos += 2;
                if (cols.idType() != null) {
                    int length = fieldLength(pos);
                    idValue(pos, length);
                    pos += 4 + Math.max(length, 0);
                }
                int length = fieldLength(pos);
                vectorValue(pos, length);
                pos += 4 + Math.max(length, 0);
            }
            return new Data(result(d < 0 ? emptyDims : d), cols.idType() == null ? null : Collections.unmodifiableList(ids));
        }

        private int fieldLength(int at) {
            need(at, 4);
            int length = buf.getInt(at);
            if (length < -1) {
                throw DensewireException.at(Category.MALFORMED, at, "field length " + length);
            }
            if (length >= 0) {
                need(at + 4L, length);
            }
            return length;
        }

        private DensewireException error(Category c, long offset, String field, String detail) {
            return new DensewireException(c, detail, offset, field);
        }

        private void idValue(int at, int length) {
            IdType type = cols.idType();
            int v = at + 4;
            if (length == -1) {
                ids.add(null);
                return;
            }
            if (type == IdType.TEXT) {
                ByteBuffer in = buf.duplicate().limit(v + length).position(v);
                CharBuffer chars = CharBuffer.allocate((int) (length * (double) utf8.maxCharsPerByte()) + 1);
                utf8.reset();
                CoderResult res = utf8.decode(in, chars, true);
                if (!res.isError()) {
                    res = utf8.flush(chars);
                }
                if (res.isError()) {
                    throw error(Category.MALFORMED, in.position(), cols.idColumn(), "a text id that is not UTF-8");
                }
                ids.add(chars.flip().toString());
                return;
            }
            if (length != type.width) {
                throw error(Category.LENGTH_MISMATCH, at, cols.idColumn(), "an " + type + " id of " + length
                        + " bytes (it has " + type.width + ")");
            }
            switch (type) {
                case INT8:
                    ids.add(buf.getLong(v));
                    break;
                case INT4:
                    ids.add(buf.getInt(v));
                    break;
                default:
                    ids.add(new UUID(buf.getLong(v), buf.getLong(v + 8)));
            }
        }

        private void vectorValue(int at, int length) {
            VectorType type = cols.type();
            String column = cols.column();
            int v = at + 4;
            int row = starts.size;
            if (length == -1) {
                throw error(Category.INVALID_FIELD, at, column, "row " + row + " has a NULL " + type);
            }
            int head = type == VectorType.SPARSEVEC ? 12 : 4;
            if (length < head) {
                throw error(Category.LENGTH_MISMATCH, at, column, "a " + type + " value of " + length + " bytes");
            }
            int dims;
            int k = 0;
            int unused = 0;
            long expected;
            switch (type) {
                case BIT:
                    dims = buf.getInt(v);
                    expected = 4 + ((long) dims + 7) / 8;
                    break;
                case SPARSEVEC:
                    dims = buf.getInt(v);
                    k = buf.getInt(v + 4);
                    unused = buf.getInt(v + 8);
                    expected = 12 + 8L * k;
                    break;
                default:
                    dims = buf.getShort(v);
                    unused = buf.getShort(v + 2);
                    expected = 4 + (type == VectorType.VECTOR ? 4L : 2L) * dims;
            }
            if (dims < 1) {
                throw error(Category.MALFORMED, v, column, "a " + type + " of " + dims + " dimensions");
            }
            if (type == VectorType.SPARSEVEC && (k < 0 || k > dims)) {
                throw error(Category.MALFORMED, v + 4, column, "a sparsevec of " + dims + " dimensions with " + k
                        + " non-zero values");
            }
            if (length != expected) {
                throw error(Category.LENGTH_MISMATCH, at, column, "a " + type + " of " + dims + " dimensions needs "
                        + expected + " bytes, the field has " + length);
            }
            if (type != VectorType.BIT && unused != 0) {
                throw error(Category.MALFORMED, v + (type == VectorType.SPARSEVEC ? 8 : 2), column,
                        "the unused word of a " + type + " is " + unused + ", not 0");
            }
            if (d < 0) {
                d = dims;
            } else if (dims != d) {
                throw error(Category.SHAPE_MISMATCH, v, column, "row " + row + " has " + dims
                        + " dimensions, the first row " + d);
            }
            if (type == VectorType.SPARSEVEC) {
                checkSparse(v + 12, k, dims);
                starts.add(v + 12);
                nnz.add(k);
            } else {
                starts.add(v + 4);
            }
        }

        private void checkSparse(int at, int k, int dims) {
            int prev = -1;
            for (int i = 0; i < k; i++) {
                int idx = buf.getInt(at + 4 * i);
                if (idx < 0 || idx >= dims || idx <= prev) {
                    throw error(Category.MALFORMED, at + 4L * i, cols.column(), "sparsevec index " + idx + " is out of 0.."
                            + (dims - 1) + " or not above the one before it");
                }
                prev = idx;
            }
            for (int i = 0; i < k; i++) {
                if (buf.getFloat(at + 4 * (k + i)) == 0) {
                    throw error(Category.MALFORMED, at + 4L * (k + i), cols.column(), "a sparsevec stores no zero value");
                }
            }
        }

        private Tensor result(int dims) {
            VectorType type = cols.type();
            Dtype dtype = type.dtype();
            int n = starts.size;
            long total = n * dtype.rowBytes(dims);
            // A sparsevec of a few bytes stands for up to 4 GB of dense values: the dense tensor is
            // bounded by the stream's size (as the Go and Rust decoders), so that a hostile stream
            // cannot exhaust memory.
            long limit = Math.max(MAX_SPARSE_DENSE_MIN, MAX_SPARSE_DENSE_FACTOR * (long) buf.limit());
            if (type == VectorType.SPARSEVEC && total > limit) {
                throw DensewireException.on(Category.INVALID_FIELD, cols.column(), "the dense tensor of these sparsevec rows"
                        + " would exceed " + limit + " bytes (" + MAX_SPARSE_DENSE_FACTOR + " times the stream, at least 64 MiB)");
            }
            if (total > Integer.MAX_VALUE - 8) {
                throw DensewireException.on(Category.INVALID_FIELD, cols.column(), n + " rows of " + dims + " dimensions ("
                        + total + " bytes as " + dtype + ") are more than one Java array holds");
            }
            ByteBuffer out = ByteBuffer.allocate((int) total).order(ByteOrder.LITTLE_ENDIAN);
            int rb = (int) dtype.rowBytes(dims);
            for (int r = 0; r < n; r++) {
                int s = starts.get(r);
                switch (type) {
                    case VECTOR: // one bulk copy per row, byte-swapped to little-endian on the way
                        out.position(r * rb);
                        out.asFloatBuffer().put(buf.slice(s, rb).order(ByteOrder.BIG_ENDIAN).asFloatBuffer());
                        break;
                    case HALFVEC:
                        out.position(r * rb);
                        out.asShortBuffer().put(buf.slice(s, rb).order(ByteOrder.BIG_ENDIAN).asShortBuffer());
                        break;
                    case BIT:
                        out.put(r * rb, buf, s, rb);
                        break;
                    default: {
                        int k = nnz.get(r);
                        for (int i = 0; i < k; i++) {
                            out.putFloat(r * rb + 4 * buf.getInt(s + 4 * i), buf.getFloat(s + 4 * (k + i)));
                        }
                    }
                }
            }
            return Tensor.of(dtype, n, dims, out.clear());
        }
    }

    /** A growable int array (no boxing of the per-row offsets). */
    private static final class IntList {
        int[] items = new int[16];
        int size;

        void add(int v) {
            if (size == items.length) {
                items = Arrays.copyOf(items, size * 2);
            }
            items[size++] = v;
        }

        int get(int i) {
            return items[i];
        }
    }
}
