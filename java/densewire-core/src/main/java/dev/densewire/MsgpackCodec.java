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
 * The MessagePack map of SPEC.md section 8: {@code {model?, dtype, shape, data, usage?}} in the smallest
 * encodings, byte-exact. A direct reader and writer (no dependency): {@code data} is decoded as a view of the
 * body, and errors carry the offsets the spec prescribes. Tests check both directions against msgpack-java.
 */
public final class MsgpackCodec {
    private static final int MAX_DEPTH = 256;

    private MsgpackCodec() {
    }

    // ------------------------------------------------------------------ encoding

    /** A bare tensor: {@code {dtype, shape, data}}. */
    public static byte[] encode(Tensor tensor) {
        return encode(Embeddings.of(tensor));
    }

    /** The map with {@code model} when the embeddings carry a model and {@code usage} when they carry usage. */
    public static byte[] encode(Embeddings embeddings) {
        Tensor t = embeddings.tensor();
        byte[] model = embeddings.model() == null ? null : embeddings.model().getBytes(StandardCharsets.UTF_8);
        byte[] dtype = t.dtype().wireName().getBytes(StandardCharsets.US_ASCII);
        int dataLen = t.byteLength();
        Embeddings.Usage u = embeddings.usage();
        int size = 1 + 6 + strSize(dtype.length) + 6 + 1 + uintSize(t.rows()) + uintSize(t.dims()) + 5
                + binHeaderSize(dataLen) + dataLen;
        if (model != null) {
            size += 6 + strSize(model.length);
        }
        if (u != null) {
            size += 6 + 1 + 14 + uintSize(u.promptTokens()) + 13 + uintSize(u.totalTokens());
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.put((byte) (0x80 | (3 + (model != null ? 1 : 0) + (u != null ? 1 : 0))));
        if (model != null) {
            key(out, "model");
            str(out, model);
        }
        key(out, "dtype");
        str(out, dtype);
        key(out, "shape");
        out.put((byte) 0x92);
        uint(out, t.rows());
        uint(out, t.dims());
        key(out, "data");
        binHeader(out, dataLen);
        out.put(t.data());
        if (u != null) {
            key(out, "usage");
            out.put((byte) 0x82);
            key(out, "prompt_tokens");
            uint(out, u.promptTokens());
            key(out, "total_tokens");
            uint(out, u.totalTokens());
        }
        return out.array();
    }

    private static int strSize(int n) {
        return n + (n < 32 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5);
    }

    private static int binHeaderSize(int n) {
        return n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
    }

    private static int uintSize(long v) {
        return v < 0x80 ? 1 : v < 0x100 ? 2 : v < 0x10000 ? 3 : v < 0x100000000L ? 5 : 9;
    }

    private static void key(ByteBuffer out, String k) {
        out.put((byte) (0xA0 | k.length()));
        for (int i = 0; i < k.length(); i++) {
            out.put((byte) k.charAt(i));
        }
    }

    private static void str(ByteBuffer out, byte[] s) {
        int n = s.length;
        if (n < 32) {
            out.put((byte) (0xA0 | n));
        } else if (n < 0x100) {
            out.put((byte) 0xD9).put((byte) n);
        } else if (n < 0x10000) {
            out.put((byte) 0xDA).putShort((short) n);
        } else {
            out.put((byte) 0xDB).putInt(n);
        }
        out.put(s);
    }

    private static void binHeader(ByteBuffer out, int n) {
        if (n < 0x100) {
            out.put((byte) 0xC4).put((byte) n);
        } else if (n < 0x10000) {
            out.put((byte) 0xC5).putShort((short) n);
        } else {
            out.put((byte) 0xC6).putInt(n);
        }
    }

    private static void uint(ByteBuffer out, long v) {
        if (v < 0x80) {
            out.put((byte) v);
        } else if (v < 0x100) {
            out.put((byte) 0xCC).put((byte) v);
        } else if (v < 0x10000) {
            out.put((byte) 0xCD).putShort((short) v);
        } else if (v < 0x100000000L) {
            out.put((byte) 0xCE).putInt((int) v);
        } else {
            out.put((byte) 0xCF).putLong(v);
        }
    }

    // ------------------------------------------------------------------ decoding

    /** Decodes a body; the tensor is a view of {@code body} (not copied). */
    public static Embeddings decode(byte[] body) {
        return decode(body, 0, body.length);
    }

    /** Decodes {@code body[offset, offset + length)}; error offsets count from {@code offset}. */
    public static Embeddings decode(byte[] body, int offset, int length) {
        Reader r = new Reader(body, offset, length);
        if (length == 0) {
            throw DensewireException.at(Category.TRUNCATED, 0, "empty body");
        }
        int first = body[offset] & 0xFF;
        if (!((first >= 0x80 && first <= 0x8F) || first == 0xDE || first == 0xDF)) {
            throw DensewireException.at(Category.MALFORMED, 0,
                    String.format("the body must be a MessagePack map, it starts with 0x%02x", first));
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> doc = (Map<String, Object>) r.value(0);
        if (r.pos != r.end) {
            throw DensewireException.at(Category.MALFORMED, r.pos - offset, (r.end - r.pos) + " bytes after the map");
        }
        Object dtypeValue = doc.get("dtype");
        if (!(dtypeValue instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", dtypeValue == null ? "missing" : "must be a str");
        }
        Dtype dtype = Dtype.fromWireName((String) dtypeValue);
        Object shape = doc.get("shape");
        long[] nd = shape(shape);
        Object data = doc.get("data");
        if (!(data instanceof Bin)) {
            throw DensewireException.on(Category.INVALID_FIELD, "data", data == null ? "missing" : "must be a MessagePack bin");
        }
        Object model = doc.get("model") == NIL ? null : doc.get("model");
        if (model != null && !(model instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "model", "must be a str");
        }
        Bin bin = (Bin) data;
        Tensor tensor = Shapes.tensor(dtype, nd[0], nd[1], ByteBuffer.wrap(body, bin.offset, bin.length), "data", "shape");
        return new Embeddings(tensor, (String) model, usage(doc.get("usage")));
    }

    private static long[] shape(Object shape) {
        if (shape instanceof List) {
            List<?> l = (List<?>) shape;
            if (l.size() == 2 && l.get(0) instanceof Long && l.get(1) instanceof Long
                    && (Long) l.get(0) >= 0 && (Long) l.get(1) >= 0) {
                return new long[] {(Long) l.get(0), (Long) l.get(1)};
            }
        }
        throw DensewireException.on(Category.INVALID_FIELD, "shape",
                "must be [n, d], two non-negative integers, got " + (shape == null ? "nothing" : shape));
    }

    private static Embeddings.Usage usage(Object u) {
        if (u == null || u == NIL) {
            return null;
        }
        if (!(u instanceof Map)) {
            throw DensewireException.on(Category.INVALID_FIELD, "usage", "must be a map");
        }
        long[] counts = new long[2];
        String[] keys = {"prompt_tokens", "total_tokens"};
        for (int i = 0; i < 2; i++) {
            Object v = ((Map<?, ?>) u).get(keys[i]);
            if (v == null) {
                continue;
            }
            if (!(v instanceof Long) || (Long) v < 0) {
                throw DensewireException.on(Category.INVALID_FIELD, "usage." + keys[i], "must be a non-negative integer");
            }
            counts[i] = (Long) v;
        }
        return new Embeddings.Usage(counts[0], counts[1]);
    }

    /** A bin value: a range of the body. */
    private record Bin(int offset, int length) {
    }

    /** An integer outside the range of a long (uint64 above 2^63 - 1). */
    private enum Oversized { VALUE }

    /** A cursor over the body whose errors carry offsets relative to its start. */
    private static final class Reader {
        final byte[] b;
        final int start;
        final int end;
        int pos;

        Reader(byte[] b, int offset, int length) {
            this.b = b;
            this.start = offset;
            this.end = offset + length;
            this.pos = offset;
        }

        private int need(long n) {
            if (n > end - pos) {
                throw DensewireException.at(Category.TRUNCATED, end - start,
                        "body ends after " + (end - start) + " bytes, inside a value that needs " + (pos - start + n));
            }
            int at = pos;
            pos += (int) n;
            return at;
        }

        private int u8() {
            return b[need(1)] & 0xFF;
        }

        private long length(int size) {
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

    private static final Object NIL = new Object();
    private static final Object EXT = new Object();
}
