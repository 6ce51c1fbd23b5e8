package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The headers of a table response (SPEC.md section 15.2) and the helpers the table codecs share: the
 * {@code Densewire-Columns} value, UUID text, byte-stream-split.
 */
public final class Tables {
    public static final String HEADER_VERSION = "Densewire-Version";
    public static final String HEADER_TABLE = "Densewire-Table";
    public static final String HEADER_ROWS = "Densewire-Rows";
    public static final String HEADER_COLUMNS = "Densewire-Columns";

    private static final char[] HEX_UPPER = "0123456789ABCDEF".toCharArray();
    private static final char[] HEX_LOWER = "0123456789abcdef".toCharArray();

    private Tables() {
    }

    // ------------------------------------------------------------------ Densewire-Columns

    /**
     * The {@code Densewire-Columns} value: {@code name=type} joined by {@code ,}, each name percent-encoded as UTF-8
     * (RFC 3986 unreserved bytes kept, the rest {@code %XX} in uppercase hex).
     */
    public static String formatColumnsHeader(List<ColumnSpec> columns) {
        StringBuilder sb = new StringBuilder();
        for (ColumnSpec c : columns) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            for (byte b : c.name().getBytes(StandardCharsets.UTF_8)) {
                int ch = b & 0xFF;
                if (ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.'
                        || ch == '_' || ch == '~') {
                    sb.append((char) ch);
                } else {
                    sb.append('%').append(HEX_UPPER[ch >> 4]).append(HEX_UPPER[ch & 15]);
                }
            }
            sb.append('=').append(c.typeName());
        }
        return sb.toString();
    }

    /**
     * Parses a {@code Densewire-Columns} value. An empty value is no columns.
     *
     * @throws DensewireException {@code invalid_field} on {@code Densewire-Columns} for an entry without {@code =},
     *                            a bad percent escape, a name that is empty, not UTF-8 or repeated;
     *                            {@code unknown_dtype} on it for an unknown type
     */
    public static List<ColumnSpec> parseColumnsHeader(String value) {
        List<ColumnSpec> out = new ArrayList<>();
        if (value.isEmpty()) {
            return out;
        }
        Set<String> seen = new HashSet<>();
        String[] entries = value.split(",", -1);
        for (int i = 0; i < entries.length; i++) {
            String entry = entries[i];
            int eq = entry.indexOf('=');
            if (eq < 0) {
                throw bad("entry " + i + " " + quote(entry) + " has no '='");
            }
            String name = percentDecode(entry.substring(0, eq));
            if (name == null) {
                throw bad("entry " + i + " " + quote(entry.substring(0, eq)) + " has a bad percent escape or is not UTF-8");
            }
            if (name.isEmpty()) {
                throw bad("entry " + i + " has an empty name");
            }
            if (!seen.add(name)) {
                throw bad("column " + quote(name) + " appears twice");
            }
            try {
                out.add(ColumnSpec.parse(name, entry.substring(eq + 1)));
            } catch (DensewireException e) {
                throw new DensewireException(e.category(), "column " + quote(name) + ": " + e.detail(), -1, HEADER_COLUMNS);
            }
        }
        return out;
    }

    private static DensewireException bad(String detail) {
        return new DensewireException(Category.INVALID_FIELD, detail, -1, HEADER_COLUMNS);
    }

    private static String percentDecode(String s) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '%') {
                if (i + 2 >= s.length()) {
                    return null;
                }
                int hi = Character.digit(s.charAt(i + 1), 16);
                int lo = Character.digit(s.charAt(i + 2), 16);
                if (hi < 0 || lo < 0 || s.charAt(i + 1) > 'f' || s.charAt(i + 2) > 'f') {
                    return null;
                }
                out.write(hi << 4 | lo);
                i += 2;
            } else if (c < 0x80) {
                out.write(c);
            } else {
                return null; // a header value is ASCII: names arrive percent-encoded
            }
        }
        return utf8(out.toByteArray(), 0, out.size());
    }

    /** Strict UTF-8, or null. */
    static String utf8(byte[] b, int from, int len) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, from, len)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    // ------------------------------------------------------------------ UUIDs

    /** The canonical lowercase text of the 16 bytes at {@code b[from]}. */
    public static String formatUuid(byte[] b, int from) {
        char[] out = new char[36];
        int j = 0;
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) {
                out[j++] = '-';
            }
            int v = b[from + i] & 0xFF;
            out[j++] = HEX_LOWER[v >> 4];
            out[j++] = HEX_LOWER[v & 15];
        }
        return new String(out);
    }

    /**
     * Reads {@code xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx} (either case) into {@code dst[at..at+16)}; false when
     * {@code s} is not such a text.
     */
    public static boolean parseUuid(CharSequence s, byte[] dst, int at) {
        if (s.length() != 36 || s.charAt(8) != '-' || s.charAt(13) != '-' || s.charAt(18) != '-' || s.charAt(23) != '-') {
            return false;
        }
        int j = at;
        for (int i = 0; i < 36; i += 2) {
            if (i == 8 || i == 13 || i == 18 || i == 23) {
                i--;
                continue;
            }
            int hi = hexDigit(s.charAt(i));
            int lo = hexDigit(s.charAt(i + 1));
            if (hi < 0 || lo < 0) {
                return false;
            }
            dst[j++] = (byte) (hi << 4 | lo);
        }
        return true;
    }

    private static int hexDigit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    }

    // ------------------------------------------------------------------ shared by the codecs

    /** {@code s} in double quotes, control characters and quotes escaped, at most 60 characters shown. */
    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            if (i == 57 && s.length() > 60) {
                sb.append("...");
                break;
            }
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    /** Bool bytes must be 0 or 1: {@code invalid_field} on {@code field[ROW]}. */
    static void checkBools(ByteBuffer data, String field) {
        for (int r = 0; r < data.capacity(); r++) {
            int b = data.get(r) & 0xFF;
            if (b > 1) {
                throw new DensewireException(Category.INVALID_FIELD, "bool byte " + b + " (want 0 or 1)", -1,
                        field + "[" + r + "]");
            }
        }
    }

    /** {@code length} bytes must hold {@code n} values of the column: {@code length_mismatch} otherwise. */
    static void checkFixedLength(long length, long n, ColumnSpec spec, String field) {
        long need = n * spec.width(); // n < 2^31 and width <= 2^26: no overflow
        if (length != need) {
            throw new DensewireException(Category.LENGTH_MISMATCH, length + " bytes where " + n + " rows of "
                    + spec.typeName() + " need " + need, Math.min(length, need), field);
        }
    }

    /** A row count read from a body: {@code invalid_field} on {@code rows} beyond what a Java array holds. */
    static int rowCount(long rows, String field) {
        if (rows < 0 || rows > Integer.MAX_VALUE - 8) {
            throw new DensewireException(Category.INVALID_FIELD, "row count " + Long.toUnsignedString(rows) + " is out of range",
                    -1, field);
        }
        return (int) rows;
    }

    /**
     * Byte-stream-split (Parquet's encoding, SPEC.md 15.6): {@code m} items of {@code w} bytes, byte {@code k} of
     * item {@code i} at {@code split[k * m + i]}.
     */
    static void splitByteStreams(ByteBuffer plain, byte[] dst, int dstAt, int w) {
        int m = plain.capacity() / w;
        for (int i = 0; i < m; i++) {
            for (int k = 0; k < w; k++) {
                dst[dstAt + k * m + i] = plain.get(i * w + k);
            }
        }
    }

    /** The inverse of {@link #splitByteStreams}: a new array of the items one after another. */
    static byte[] joinByteStreams(byte[] src, int from, int len, int w) {
        byte[] out = new byte[len];
        int m = len / w;
        for (int k = 0; k < w; k++) {
            int base = from + k * m;
            for (int i = 0, o = k; i < m; i++, o += w) {
                out[o] = src[base + i];
            }
        }
        return out;
    }

    /** Column names are non-empty and unique: {@code invalid_field} on {@code field}.name otherwise. */
    static void checkName(String name, String field, Set<String> seen) {
        if (name.isEmpty()) {
            throw new DensewireException(Category.INVALID_FIELD, "a column needs a non-empty name", -1, field + ".name");
        }
        if (!seen.add(name)) {
            throw new DensewireException(Category.INVALID_FIELD, "column " + quote(name) + " appears twice", -1, field + ".name");
        }
    }

    /** A column type name read from a body: {@code unknown_dtype} on {@code field}. */
    static ColumnSpec parseSpec(String name, String typeName, String field, long offset) {
        try {
            return ColumnSpec.parse(name, typeName);
        } catch (DensewireException e) {
            throw new DensewireException(e.category(), e.detail(), offset, field);
        }
    }
}
