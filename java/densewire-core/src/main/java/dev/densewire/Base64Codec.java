package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Base64 of SPEC.md section 5: RFC 4648 standard alphabet, padded on encoding; strict on decoding
 * ({@code invalid_base64} at the offending character's offset), accepting unpadded input and ignoring the bits
 * below the last whole byte. Encoding and the String decoding path use {@link java.util.Base64}, whose decoder
 * accepts exactly the strings this spec accepts; when it rejects one, {@link #locateError} finds the offset.
 * The {@code char[]} path (what a JSON parser hands over) decodes with a table, validating as it goes.
 */
public final class Base64Codec {
    private static final Base64.Encoder ENCODER = Base64.getEncoder();
    private static final Base64.Decoder DECODER = Base64.getDecoder();
    private static final byte[] DEC = new byte[128];

    static {
        java.util.Arrays.fill(DEC, (byte) -1);
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; i++) {
            DEC[alphabet.charAt(i)] = (byte) i;
        }
    }

    private Base64Codec() {
    }

    // ------------------------------------------------------------------ encoding

    /** Standard, padded Base64 of {@code bytes}. */
    public static String encode(byte[] bytes) {
        return ENCODER.encodeToString(bytes);
    }

    /** Standard, padded Base64 of {@code bytes} as ASCII bytes (for writing straight into a UTF-8 stream). */
    public static byte[] encodeToAscii(byte[] bytes) {
        return ENCODER.encode(bytes);
    }

    /** The Base64 of a whole tensor (rows concatenated) in the given byte order. */
    public static String encode(Tensor tensor, Endianness order) {
        return encode(tensor.toByteArray(order));
    }

    /** The Base64 of float32 values in the given byte order. */
    public static String encodeFloats(float[] values, Endianness order) {
        return new String(encodeFloatsToAscii(values, 0, values.length, order), StandardCharsets.ISO_8859_1);
    }

    /** The Base64 of {@code values[offset, offset + length)} as float32 in the given byte order, as ASCII bytes. */
    public static byte[] encodeFloatsToAscii(float[] values, int offset, int length, Endianness order) {
        return ENCODER.encode(floatBytes(values, offset, length, order));
    }

    /** The Base64 of float64 values in the given byte order. */
    public static String encodeDoubles(double[] values, Endianness order) {
        return new String(encodeDoublesToAscii(values, 0, values.length, order), StandardCharsets.ISO_8859_1);
    }

    public static byte[] encodeDoublesToAscii(double[] values, int offset, int length, Endianness order) {
        return ENCODER.encode(doubleBytes(values, offset, length, order));
    }

    /** float32 values as bytes in the given order (a bulk copy, no boxing). */
    public static byte[] floatBytes(float[] values, int offset, int length, Endianness order) {
        byte[] out = new byte[length * 4];
        ByteBuffer.wrap(out).order(order.nioOrder()).asFloatBuffer().put(values, offset, length);
        return out;
    }

    /** float64 values as bytes in the given order. */
    public static byte[] doubleBytes(double[] values, int offset, int length, Endianness order) {
        byte[] out = new byte[length * 8];
        ByteBuffer.wrap(out).order(order.nioOrder()).asDoubleBuffer().put(values, offset, length);
        return out;
    }

    // ------------------------------------------------------------------ strict decoding

    /**
     * The bytes of a Base64 string, strictly (section 5).
     *
     * @throws DensewireException {@code invalid_base64} with the offset of the first offending character
     */
    public static byte[] decode(CharSequence text) {
        String s = text.toString();
        try {
            return DECODER.decode(s);
        } catch (IllegalArgumentException e) {
            DensewireException located = locateError(s);
            throw located != null ? located
                    : new DensewireException(Category.INVALID_BASE64, "invalid Base64: " + e.getMessage(), 0, null, e);
        }
    }

    /**
     * The bytes of {@code chars[offset, offset + length)}, strictly (section 5); offsets in errors count from
     * {@code offset}.
     */
    public static byte[] decode(char[] chars, int offset, int length) {
        byte[] out = new byte[decodedLength(chars, offset, length)];
        decodeInto(chars, offset, length, out, 0);
        return out;
    }

    /**
     * A whole tensor from one Base64 string (section 5): decoded, checked against {@code rows * row_bytes}
     * ({@code length_mismatch} at {@code min(actual, expected)}), and swapped to little-endian when
     * {@code order} is big.
     */
    public static Tensor decode(CharSequence text, Dtype dtype, int rows, int dims, Endianness order) {
        byte[] bytes = decode(text);
        Tensor.checkLength(bytes.length, (long) rows * dtype.rowBytes(dims), null);
        return Tensor.of(dtype, rows, dims, bytes, order);
    }

    /** float32 values from Base64 in the given order; the byte length must be a multiple of 4. */
    public static float[] decodeFloats(CharSequence text, Endianness order) {
        return bytesToFloats(decode(text), order, -1);
    }

    /** float32 values from Base64; the byte length must be exactly {@code 4 * count}. */
    public static float[] decodeFloats(CharSequence text, Endianness order, int count) {
        return bytesToFloats(decode(text), order, count);
    }

    /**
     * float32 values from {@code chars[offset, offset + length)} (a JSON parser's buffer), without a String or an
     * intermediate byte array: every 16 characters give 3 floats.
     */
    public static float[] decodeFloats(char[] chars, int offset, int length, Endianness order) {
        int n = decodedLength(chars, offset, length);
        if ((n & 3) != 0) {
            decode(chars, offset, length); // a bad character is reported before the length
            Tensor.checkLength(n, (n + 3L) & ~3L, null);
        }
        float[] out = new float[n >>> 2];
        decodeFloatsInto(chars, offset, length, order, out);
        return out;
    }

    /** Decodes whole 16-character blocks straight into float bits, the rest through the byte decoder. */
    private static void decodeFloatsInto(char[] c, int off, int len, Endianness order, float[] out) {
        boolean big = order == Endianness.BIG;
        int blocks = out.length / 3;
        byte[] t = DEC;
        int s = off;
        int chars = 0;
        int bad = 0;
        for (int k = 0, f = 0; k < blocks; k++, s += 16, f += 3) {
            int c0 = c[s], c1 = c[s + 1], c2 = c[s + 2], c3 = c[s + 3];
            int c4 = c[s + 4], c5 = c[s + 5], c6 = c[s + 6], c7 = c[s + 7];
            int c8 = c[s + 8], c9 = c[s + 9], c10 = c[s + 10], c11 = c[s + 11];
            int c12 = c[s + 12], c13 = c[s + 13], c14 = c[s + 14], c15 = c[s + 15];
            chars |= c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7 | c8 | c9 | c10 | c11 | c12 | c13 | c14 | c15;
            int g0 = t[c0 & 127] << 18 | t[c1 & 127] << 12 | t[c2 & 127] << 6 | t[c3 & 127];
            int g1 = t[c4 & 127] << 18 | t[c5 & 127] << 12 | t[c6 & 127] << 6 | t[c7 & 127];
            int g2 = t[c8 & 127] << 18 | t[c9 & 127] << 12 | t[c10 & 127] << 6 | t[c11 & 127];
            int g3 = t[c12 & 127] << 18 | t[c13 & 127] << 12 | t[c14 & 127] << 6 | t[c15 & 127];
            bad |= g0 | g1 | g2 | g3;
            int w0 = g0 << 8 | (g1 >>> 16 & 0xFF);
            int w1 = g1 << 16 | (g2 >>> 8 & 0xFFFF);
            int w2 = g2 << 24 | (g3 & 0xFFFFFF);
            if (!big) {
                w0 = Integer.reverseBytes(w0);
                w1 = Integer.reverseBytes(w1);
                w2 = Integer.reverseBytes(w2);
            }
            out[f] = Float.intBitsToFloat(w0);
            out[f + 1] = Float.intBitsToFloat(w1);
            out[f + 2] = Float.intBitsToFloat(w2);
        }
        if (bad < 0 || chars >= 128) {
            throw locate(c, off, len);
        }
        int done = blocks * 3;
        if (done < out.length || s < off + len) {
            // the tail: fewer than 3 floats, decoded as bytes (this also checks the padding)
            byte[] tail;
            try {
                tail = decode(c, s, off + len - s);
            } catch (DensewireException e) {
                throw locate(c, off, len); // offsets from the start of the whole string
            }
            ByteBuffer.wrap(tail).order(order.nioOrder()).asFloatBuffer().get(out, done, out.length - done);
        }
    }

    /** float64 values from Base64 in the given order; the byte length must be a multiple of 8. */
    public static double[] decodeDoubles(CharSequence text, Endianness order) {
        return bytesToDoubles(decode(text), order);
    }

    public static double[] decodeDoubles(char[] chars, int offset, int length, Endianness order) {
        return bytesToDoubles(decode(chars, offset, length), order);
    }

    private static float[] bytesToFloats(byte[] bytes, Endianness order, int count) {
        long expected = count >= 0 ? 4L * count : (bytes.length + 3L) & ~3L;
        Tensor.checkLength(bytes.length, expected, null);
        float[] out = new float[bytes.length >>> 2];
        ByteBuffer.wrap(bytes).order(order.nioOrder()).asFloatBuffer().get(out);
        return out;
    }

    private static double[] bytesToDoubles(byte[] bytes, Endianness order) {
        Tensor.checkLength(bytes.length, (bytes.length + 7L) & ~7L, null);
        double[] out = new double[bytes.length >>> 3];
        ByteBuffer.wrap(bytes).order(order.nioOrder()).asDoubleBuffer().get(out);
        return out;
    }

    // ------------------------------------------------------------------ the table decoder

    /** Padding characters at the end (0, 1 or 2; a third '=' is left to the body, where it is invalid). */
    private static int padding(char[] c, int off, int len) {
        if (len > 0 && c[off + len - 1] == '=') {
            return len > 1 && c[off + len - 2] == '=' ? 2 : 1;
        }
        return 0;
    }

    /**
     * The decoded byte count of a Base64 string, or an {@code invalid_base64} error if its end is malformed
     * (its characters are checked by {@link #decodeInto}).
     */
    public static int decodedLength(char[] c, int off, int len) {
        int pad = padding(c, off, len);
        int body = len - pad;
        int rem = body & 3;
        boolean ok = pad == 0 ? rem != 1 : (len & 3) == 0 && rem == 4 - pad;
        if (!ok) {
            throw locate(c, off, len);
        }
        return (body >>> 2) * 3 + (rem == 0 ? 0 : rem - 1);
    }

    /**
     * Decodes {@code c[off, off + len)} into {@code dst} from {@code dstOff}, which must have room for
     * {@link #decodedLength} bytes; returns that count.
     */
    public static int decodeInto(char[] c, int off, int len, byte[] dst, int dstOff) {
        int n = decodedLength(c, off, len);
        int body = len - padding(c, off, len);
        int groups = body >>> 2;
        int s = off;
        int d = dstOff;
        int chars = 0;
        int bad = 0;
        byte[] t = DEC;
        for (int g = 0; g < groups; g++, s += 4, d += 3) {
            int c0 = c[s], c1 = c[s + 1], c2 = c[s + 2], c3 = c[s + 3];
            chars |= c0 | c1 | c2 | c3;
            int v = t[c0 & 127] << 18 | t[c1 & 127] << 12 | t[c2 & 127] << 6 | t[c3 & 127];
            bad |= v;
            dst[d] = (byte) (v >> 16);
            dst[d + 1] = (byte) (v >> 8);
            dst[d + 2] = (byte) v;
        }
        int rem = body & 3;
        if (rem >= 2) {
            int c0 = c[s], c1 = c[s + 1], c2 = rem == 3 ? c[s + 2] : 'A';
            chars |= c0 | c1 | c2;
            int v = t[c0 & 127] << 18 | t[c1 & 127] << 12 | t[c2 & 127] << 6;
            bad |= v;
            dst[d] = (byte) (v >> 16);
            if (rem == 3) {
                dst[d + 1] = (byte) (v >> 8);
            }
        }
        if (bad < 0 || chars >= 128) {
            throw locate(c, off, len);
        }
        return n;
    }

    // ------------------------------------------------------------------ locating errors (section 5 rules)

    /** The error SPEC.md section 5 gives for {@code s}, or null if {@code s} is valid Base64. */
    public static DensewireException locateError(CharSequence s) {
        int len = s.length();
        for (int i = 0; i < len; i++) {
            char ch = s.charAt(i);
            if (ch != '=' && (ch >= 128 || DEC[ch] < 0)) {
                return DensewireException.at(Category.INVALID_BASE64, i,
                        "invalid Base64 character " + describe(ch) + " at offset " + i);
            }
        }
        int p = -1;
        for (int i = 0; i < len; i++) {
            if (s.charAt(i) == '=') {
                p = i;
                break;
            }
        }
        if (p >= 0) {
            for (int i = p; i < len; i++) {
                if (s.charAt(i) != '=') {
                    return DensewireException.at(Category.INVALID_BASE64, p,
                            "Base64 padding '=' in the middle at offset " + p);
                }
            }
            int count = len - p;
            if (count > 2 || len % 4 != 0 || (p % 4 != 2 && p % 4 != 3)) {
                return DensewireException.at(Category.INVALID_BASE64, p,
                        "Base64 padding at offset " + p + " does not complete the last group of 4 characters");
            }
            return null;
        }
        if (len % 4 == 1) {
            return DensewireException.at(Category.INVALID_BASE64, len - 1,
                    "dangling Base64 character at offset " + (len - 1) + " (a lone character cannot make a byte)");
        }
        return null;
    }

    private static DensewireException locate(char[] c, int off, int len) {
        DensewireException e = locateError(java.nio.CharBuffer.wrap(c, off, len));
        return e != null ? e : DensewireException.at(Category.INVALID_BASE64, 0, "invalid Base64");
    }

    private static String describe(char ch) {
        if (ch == '\n') {
            return "'\\n'";
        }
        if (ch == '\r') {
            return "'\\r'";
        }
        if (ch == '\t') {
            return "'\\t'";
        }
        if (ch < 0x20 || ch >= 0x7F) {
            return String.format("U+%04X", (int) ch);
        }
        return "'" + ch + "'";
    }
}
