package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A MessagePack reader over a body whose errors carry offsets relative to its start (SPEC.md section 8):
 * {@link #value} returns Long, Double, Boolean, String, List, Map (string keys), {@link Bin} (a range of the body,
 * not copied), {@link #NIL}, {@link #EXT} or {@link Oversized}. Shared by the tensor and table codecs.
 */
final class MsgpackReader {
    static final int MAX_DEPTH = 256;
    static final Object NIL = new Object();
    static final Object EXT = new Object();

    /** A bin value: a range of the body. */
    record Bin(int offset, int length) {
    }

    /** An integer outside the range of a long (uint64 above 2^63 - 1). */
    enum Oversized { VALUE }

    final byte[] b;
    final int start;
    final int end;
    int pos;

    MsgpackReader(byte[] b, int offset, int length) {
        this.b = b;
        this.start = offset;
        this.end = offset + length;
        this.pos = offset;
    }

    int need(long n) {
        if (n > end - pos) {
            throw DensewireException.at(Category.TRUNCATED, end - start,
                    "body ends after " + (end - start) + " bytes, inside a value that needs " + (pos - start + n));
        }
        int at = pos;
        pos += (int) n;
        return at;
    }

    int u8() {
        return b[need(1)] & 0xFF;
    }

    long length(int size) {
        int at = need(size);
        long v = 0;
        for (int i = 0; i < size; i++) {
            v = (v << 8) | (b[at + i] & 0xFF);
        }
        return v;
    }

    Object value(int depth) {
        int at = pos;
        if (depth > MAX_DEPTH) {
            throw DensewireException.at(Category.MALFORMED, at - start, "values nested deeper than " + MAX_DEPTH);
        }
        int t = u8();
        if (t <= 0x7F) {
            return (long) t;
        }
        if (t >= 0xE0) {
            return (long) (t - 0x100);
        }
        if (t <= 0x8F) {
            return map(t & 0x0F, depth);
        }
        if (t <= 0x9F) {
            return array(t & 0x0F, depth);
        }
        if (t <= 0xBF) {
            return text(t & 0x1F, at);
        }
        switch (t) {
            case 0xC0:
                return NIL;
            case 0xC2:
                return Boolean.FALSE;
            case 0xC3:
                return Boolean.TRUE;
            case 0xC4:
            case 0xC5:
            case 0xC6: {
                long n = length(1 << (t - 0xC4));
                int from = need(n);
                return new Bin(from, (int) n);
            }
            case 0xC7:
            case 0xC8:
            case 0xC9: {
                long n = length(1 << (t - 0xC7));
                need(1 + n);
                return EXT;
            }
            case 0xCA:
                return (double) Float.intBitsToFloat((int) length(4));
            case 0xCB:
                return Double.longBitsToDouble(length(8));
            case 0xCC:
            case 0xCD:
            case 0xCE:
                return length(1 << (t - 0xCC));
            case 0xCF: {
                long v = length(8);
                return v < 0 ? Oversized.VALUE : (Object) v;
            }
            case 0xD0:
                return (long) (byte) length(1);
            case 0xD1:
                return (long) (short) length(2);
            case 0xD2:
                return (long) (int) length(4);
            case 0xD3:
                return length(8);
            case 0xD4:
            case 0xD5:
            case 0xD6:
            case 0xD7:
            case 0xD8:
                need(1 + (1 << (t - 0xD4)));
                return EXT;
            case 0xD9:
            case 0xDA:
            case 0xDB:
                return text(length(1 << (t - 0xD9)), at);
            case 0xDC:
                return array(length(2), depth);
            case 0xDD:
                return array(length(4), depth);
            case 0xDE:
                return map(length(2), depth);
            case 0xDF:
                return map(length(4), depth);
            default:
                throw DensewireException.at(Category.MALFORMED, at - start,
                        String.format("byte 0x%02x is not a MessagePack value", t));
        }
    }

    private String text(long n, int at) {
        int from = need(n);
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(b, from, (int) n)).toString();
        } catch (CharacterCodingException e) {
            throw DensewireException.at(Category.MALFORMED, at - start, "string is not UTF-8");
        }
    }

    private List<Object> array(long count, int depth) {
        List<Object> out = new ArrayList<>((int) Math.min(count, 16));
        for (long i = 0; i < count; i++) {
            out.add(value(depth + 1));
        }
        return out;
    }

    private Map<String, Object> map(long count, int depth) {
        Map<String, Object> out = new HashMap<>();
        for (long i = 0; i < count; i++) {
            int keyAt = pos;
            Object key = value(depth + 1);
            if (!(key instanceof String)) {
                throw DensewireException.at(Category.MALFORMED, keyAt - start, "map keys must be strings");
            }
            out.put((String) key, value(depth + 1));
        }
        return out;
    }
}
