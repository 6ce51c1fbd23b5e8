package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;

/**
 * The JSON embeddings envelope of SPEC.md section 6, without a JSON library: the writer of the canonical
 * response (compact, keys in spec order) and the row codec a JSON parser feeds ({@link Row}s as parsed,
 * placed by index, checked and assembled into one {@link Tensor}). The Jackson module parses with Jackson and
 * hands its rows to {@link #assemble}.
 */
public final class JsonEnvelope {
    private JsonEnvelope() {
    }

    // ------------------------------------------------------------------ rows as parsed

    /**
     * One {@code data[position]} item as a parser found it: its {@code index} (a {@link Long} when it is an
     * integer, null when absent, anything else when it is not an integer: all but the first are
     * {@code invalid_field}), and its {@code embedding}: a Base64 {@link String}, a {@code double[]} of
     * numbers, or the {@link #notNumbers()} / {@link #wrongType()} markers.
     */
    public record Row(int position, Object index, Object embedding) {
    }

    private static final Object NOT_NUMBERS = new Object() {
        @Override
        public String toString() {
            return "an array holding something other than numbers";
        }
    };
    private static final Object WRONG_TYPE = new Object() {
        @Override
        public String toString() {
            return "neither a Base64 string nor an array of numbers";
        }
    };

    /** Marker for an array holding something other than numbers. */
    public static Object notNumbers() {
        return NOT_NUMBERS;
    }

    /** Marker for an embedding that is neither a string nor an array (a number, an object, null). */
    public static Object wrongType() {
        return WRONG_TYPE;
    }

    // ------------------------------------------------------------------ decoding

    /**
     * Places the rows by index and decodes them into one tensor. {@code dtype}, {@code byteorder} and
     * {@code dimensions} are the envelope's fields, null when absent (defaults: float32, little, the first
     * row's length).
     */
    public static Tensor assemble(List<Row> data, String dtypeName, String byteorderName, Long dimensions) {
        Dtype dtype = dtypeName == null ? Dtype.FLOAT32 : Dtype.fromWireName(dtypeName);
        Endianness order = byteorderName == null ? Endianness.LITTLE : Endianness.fromWireName(byteorderName);
        if (dimensions != null && (dimensions < 0 || dimensions > Integer.MAX_VALUE)) {
            throw DensewireException.on(Category.INVALID_FIELD, "dimensions", "must be a non-negative integer, got " + dimensions);
        }
        int n = data.size();
        Row[] rows = new Row[n]; // by index
        for (Row r : data) {
            String field = "data[" + r.position() + "].index";
            if (!(r.index() instanceof Long)) {
                throw DensewireException.on(Category.INVALID_FIELD, field,
                        r.index() == null ? "missing" : "must be an integer, got " + r.index());
            }
            long index = (Long) r.index();
            if (index < 0 || index >= n) {
                throw DensewireException.on(Category.SHAPE_MISMATCH, field, "index " + index + " is outside 0.." + (n - 1));
            }
            if (rows[(int) index] != null) {
                throw DensewireException.on(Category.SHAPE_MISMATCH, field, "index " + index + " occurs twice");
            }
            rows[(int) index] = r;
        }
        if (n == 0) {
            int d = dimensions == null ? 0 : (int) (long) dimensions;
            return Tensor.of(dtype, 0, d, new byte[0]);
        }
        Row first = data.get(0); // d comes from the first item of data by position (SPEC.md 6.2)
        Object e = first.embedding();
        if (e instanceof String) {
            return base64Rows(rows, first, dtype, order, dimensions);
        }
        if (e instanceof double[] || e == NOT_NUMBERS) {
            return numberRows(rows, first, dtype, dimensions);
        }
        throw DensewireException.on(Category.INVALID_FIELD, embeddingField(first),
                "must be a Base64 string or an array of numbers");
    }

    private static String embeddingField(Row r) {
        return "data[" + r.position() + "].embedding";
    }

    private static DensewireException rowLength(byte[] raw, Dtype dtype, int d, int rb, Row r) {
        return new DensewireException(Category.LENGTH_MISMATCH, raw.length + " bytes where a " + dtype + " row of " + d
                + " dimensions needs " + rb, Math.min(raw.length, rb), embeddingField(r));
    }

    private static Tensor base64Rows(Row[] rows, Row first, Dtype dtype, Endianness order, Long dimensions) {
        for (Row r : rows) {
            if (!(r.embedding() instanceof String)) {
                throw DensewireException.on(Category.INVALID_FIELD, embeddingField(r),
                        "every embedding must be a Base64 string like the first");
            }
        }
        int n = rows.length;
        byte[] firstBytes = null;
        int d;
        if (dimensions == null) {
            firstBytes = decodeRow(first);
            int size = dtype.itemBytes();
            if (firstBytes.length % size != 0) {
                throw new DensewireException(Category.LENGTH_MISMATCH, firstBytes.length + " bytes is not a whole number of "
                        + dtype + " items", firstBytes.length - firstBytes.length % size, embeddingField(first));
            }
            d = dtype == Dtype.BINARY ? firstBytes.length * 8 : firstBytes.length / size;
        } else {
            d = (int) (long) dimensions;
        }
        long rbLong = dtype.rowBytes(d);
        if (rbLong * n > Integer.MAX_VALUE - 8) {
            throw DensewireException.on(Category.INVALID_FIELD, "dimensions", "the tensor is larger than 2 GiB");
        }
        int rb = (int) rbLong;
        // A declared dimensions far beyond what the rows carry is that row's error, found before
        // n * rb bytes are allocated (up to 2 GiB from a few bytes of JSON otherwise).
        for (Row r : rows) {
            int upper = ((String) r.embedding()).length() / 4 * 3 + 3;
            if (upper < rb) {
                byte[] raw = r == first && firstBytes != null ? firstBytes : decodeRow(r);
                throw rowLength(raw, dtype, d, rb, r);
            }
        }
        byte[] out = new byte[n * rb];
        for (int k = 0; k < n; k++) {
            byte[] raw = rows[k] == first && firstBytes != null ? firstBytes : decodeRow(rows[k]);
            if (raw.length != rb) {
                throw rowLength(raw, dtype, d, rb, rows[k]);
            }
            System.arraycopy(raw, 0, out, k * rb, rb);
        }
        return Tensor.of(dtype, n, d, out, order);
    }

    private static byte[] decodeRow(Row r) {
        try {
            return Base64Codec.decode((String) r.embedding());
        } catch (DensewireException e) {
            throw e.withField(embeddingField(r));
        }
    }

    private static Tensor numberRows(Row[] rows, Row first, Dtype dtype, Long dimensions) {
        int width = -1;
        if (dimensions != null) {
            width = (int) dtype.rowItems(dimensions);
        } else if (first.embedding() instanceof double[]) {
            width = ((double[]) first.embedding()).length;
        }
        for (Row r : rows) {
            Object e = r.embedding();
            if (e == NOT_NUMBERS) {
                throw DensewireException.on(Category.INVALID_FIELD, embeddingField(r), "values must be numbers");
            }
            if (!(e instanceof double[])) {
                throw DensewireException.on(Category.INVALID_FIELD, embeddingField(r),
                        "every embedding must be an array like the first");
            }
            int len = ((double[]) e).length;
            if (width < 0) {
                width = len;
            }
            if (len != width) {
                throw DensewireException.on(Category.SHAPE_MISMATCH, embeddingField(r),
                        len + " values where " + width + " are expected");
            }
        }
        int n = rows.length;
        int d = dimensions != null ? (int) (long) dimensions : dtype == Dtype.BINARY ? width * 8 : width;
        ByteBuffer out = ByteBuffer.allocate(Math.multiplyExact(n, (int) dtype.rowBytes(d))).order(ByteOrder.LITTLE_ENDIAN);
        for (Row r : rows) {
            double[] v = (double[]) r.embedding();
            for (int j = 0; j < v.length; j++) {
                putNumber(out, dtype, v[j], embeddingField(r) + "[" + j + "]");
            }
        }
        out.flip();
        return Tensor.of(dtype, n, d, out);
    }

    /**
     * One JSON number as an item of {@code dtype} (section 3.5; binary: a packed byte), or {@code invalid_field} on
     * {@code field} for an integer dtype's value out of range or not an integer.
     */
    public static void putNumber(ByteBuffer out, Dtype dtype, double x, String field) {
        switch (dtype) {
            case FLOAT32:
                out.putFloat((float) x);
                break;
            case FLOAT64:
                out.putDouble(x);
                break;
            case FLOAT16:
                out.putShort(Conversions.doubleToFloat16(x));
                break;
            case BFLOAT16:
                out.putShort(Conversions.doubleToBfloat16(x));
                break;
            default: {
                double lo = dtype == Dtype.INT8 ? -128 : 0;
                double hi = dtype == Dtype.INT8 ? 127 : 255;
                if (!(x >= lo && x <= hi) || x != Math.floor(x)) {
                    throw DensewireException.on(Category.INVALID_FIELD, field, x + " is not a " + dtype + " value");
                }
                out.put((byte) (int) x);
            }
        }
    }

    // ------------------------------------------------------------------ encoding

    /**
     * The canonical response (compact, keys in the order of SPEC.md section 6.2) as UTF-8 JSON.
     *
     * @throws DensewireException {@code non_finite} on {@code data[i].embedding[j]} when a NaN or infinity
     *     would have to be written as a number
     */
    public static byte[] encode(Embeddings embeddings, EncodingFormat format, Endianness order) {
        Tensor t = embeddings.tensor();
        StringBuilder sb = new StringBuilder(64 + t.byteLength() * (format == EncodingFormat.BASE64 ? 2 : 12));
        sb.append("{\"object\":\"list\",\"data\":[");
        if (format == EncodingFormat.BASE64) {
            ByteBuffer bytes = ByteBuffer.wrap(t.toByteArray(order));
            int rb = t.rowBytes();
            Base64.Encoder enc = Base64.getEncoder();
            for (int i = 0; i < t.rows(); i++) {
                rowHead(sb, i);
                ByteBuffer row = bytes.duplicate().position(i * rb).limit((i + 1) * rb);
                ByteBuffer b64 = enc.encode(row);
                sb.append('"').append(StandardCharsets.ISO_8859_1.decode(b64)).append("\"}");
            }
        } else {
            for (int i = 0; i < t.rows(); i++) {
                rowHead(sb, i);
                appendNumbers(sb, t, i);
                sb.append('}');
            }
        }
        Embeddings.Usage u = embeddings.usage() == null ? new Embeddings.Usage(0, 0) : embeddings.usage();
        sb.append("],\"model\":");
        appendString(sb, embeddings.model() == null ? "" : embeddings.model());
        sb.append(",\"usage\":{\"prompt_tokens\":").append(u.promptTokens()).append(",\"total_tokens\":")
                .append(u.totalTokens()).append("},\"dtype\":\"").append(t.dtype().wireName()).append("\",\"byteorder\":\"")
                .append(format == EncodingFormat.BASE64 ? order.wireName() : "little").append("\",\"dimensions\":")
                .append(t.dims());
        if (embeddings.quantization() != null) { // SPEC.md 6.2: after dimensions
            sb.append(",\"quantization\":");
            appendString(sb, embeddings.quantization());
        }
        sb.append('}');
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static void rowHead(StringBuilder sb, int i) {
        if (i > 0) {
            sb.append(',');
        }
        sb.append("{\"object\":\"embedding\",\"index\":").append(i).append(",\"embedding\":");
    }

    /** Row {@code i} as a JSON array of numbers (section 3.5 spellings). */
    public static void appendNumbers(StringBuilder sb, Tensor t, int i) {
        sb.append('[');
        ByteBuffer b = t.data();
        int items = (int) t.dtype().rowItems(t.dims());
        int base = i * t.rowBytes();
        for (int j = 0; j < items; j++) {
            if (j > 0) {
                sb.append(',');
            }
            switch (t.dtype()) {
                case FLOAT32: {
                    float v = b.getFloat(base + 4 * j);
                    checkFinite(v, i, j);
                    sb.append(Float.toString(v));
                    break;
                }
                case FLOAT64: {
                    double v = b.getDouble(base + 8 * j);
                    checkFinite(v, i, j);
                    sb.append(Double.toString(v));
                    break;
                }
                case FLOAT16:
                case BFLOAT16: {
                    short bits = b.getShort(base + 2 * j);
                    float v = t.dtype() == Dtype.FLOAT16 ? Conversions.float16ToFloat(bits) : Conversions.bfloat16ToFloat(bits);
                    checkFinite(v, i, j);
                    sb.append(shortestDecimal(v, t.dtype()));
                    break;
                }
                case INT8:
                    sb.append(b.get(base + j));
                    break;
                default:
                    sb.append(b.get(base + j) & 0xFF);
            }
        }
        sb.append(']');
    }

    private static void checkFinite(double v, int i, int j) {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            throw DensewireException.on(Category.NON_FINITE, "data[" + i + "].embedding[" + j + "]",
                    v + " has no JSON number form; use encoding_format \"base64\"");
        }
    }

    /**
     * The shortest decimal that reads back (float64, then rounded to {@code dtype}) to the same bits; for
     * float16 and bfloat16 values, which {@link Float#toString} would spell with float32 precision.
     */
    public static String shortestDecimal(float value, Dtype dtype) {
        if (value == 0) {
            return Float.floatToRawIntBits(value) < 0 ? "-0.0" : "0.0";
        }
        short want = dtype == Dtype.FLOAT16 ? Conversions.floatToFloat16(value) : Conversions.floatToBfloat16(value);
        BigDecimal exact = new BigDecimal(value);
        for (int p = 1; p <= 17; p++) {
            BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
            double back = r.doubleValue();
            short got = dtype == Dtype.FLOAT16 ? Conversions.doubleToFloat16(back) : Conversions.doubleToBfloat16(back);
            if (got == want) {
                return spell(r.stripTrailingZeros());
            }
        }
        return Float.toString(value);
    }

    private static String spell(BigDecimal d) {
        int exp = d.precision() - d.scale() - 1; // decimal exponent of the leading digit
        String s = exp >= -7 && exp < 21 ? d.toPlainString() : d.toString();
        if (s.indexOf('.') < 0 && s.indexOf('E') < 0) {
            s += ".0";
        }
        return s;
    }

    /** Appends {@code s} as a JSON string literal. */
    public static void appendString(StringBuilder sb, String s) {
        sb.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }
}
