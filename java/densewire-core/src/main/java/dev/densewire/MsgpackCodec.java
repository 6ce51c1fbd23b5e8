package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * The MessagePack map of SPEC.md section 8: {@code {model?, dtype, shape, data, usage?, quantization?}} in the smallest
 * encodings, byte-exact. A direct reader and writer (no dependency): {@code data} is decoded as a view of the
 * body, and errors carry the offsets the spec prescribes. Tests check both directions against msgpack-java.
 */
public final class MsgpackCodec {
    private MsgpackCodec() {
    }

    // ------------------------------------------------------------------ encoding

    /** A bare tensor: {@code {dtype, shape, data}}. */
    public static byte[] encode(Tensor tensor) {
        return encode(Embeddings.of(tensor));
    }

    /**
     * The map with {@code model} when the embeddings carry a model, {@code usage} when they carry usage and
     * {@code quantization} when they carry a quantization id.
     */
    public static byte[] encode(Embeddings embeddings) {
        Tensor t = embeddings.tensor();
        byte[] model = embeddings.model() == null ? null : embeddings.model().getBytes(StandardCharsets.UTF_8);
        byte[] dtype = t.dtype().wireName().getBytes(StandardCharsets.US_ASCII);
        int dataLen = t.byteLength();
        Embeddings.Usage u = embeddings.usage();
        byte[] quantization = embeddings.quantization() == null ? null
                : embeddings.quantization().getBytes(StandardCharsets.UTF_8);
        int size = 1 + 6 + strSize(dtype.length) + 6 + 1 + uintSize(t.rows()) + uintSize(t.dims()) + 5
                + binHeaderSize(dataLen) + dataLen;
        if (model != null) {
            size += 6 + strSize(model.length);
        }
        if (u != null) {
            size += 6 + 1 + 14 + uintSize(u.promptTokens()) + 13 + uintSize(u.totalTokens());
        }
        if (quantization != null) {
            size += 13 + strSize(quantization.length);
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.put((byte) (0x80 | (3 + (model != null ? 1 : 0) + (u != null ? 1 : 0) + (quantization != null ? 1 : 0))));
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
        if (quantization != null) {
            key(out, "quantization");
            str(out, quantization);
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

    static void key(ByteBuffer out, String k) {
        out.put((byte) (0xA0 | k.length()));
        for (int i = 0; i < k.length(); i++) {
            out.put((byte) k.charAt(i));
        }
    }

    static void str(ByteBuffer out, byte[] s) {
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

    static void binHeader(ByteBuffer out, int n) {
        if (n < 0x100) {
            out.put((byte) 0xC4).put((byte) n);
        } else if (n < 0x10000) {
            out.put((byte) 0xC5).putShort((short) n);
        } else {
            out.put((byte) 0xC6).putInt(n);
        }
    }

    static void uint(ByteBuffer out, long v) {
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
        MsgpackReader r = new MsgpackReader(body, offset, length);
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
        Ragged.checkNoKind(doc.containsKey("kind"), doc.get("kind"), "kind");
        Object dtypeValue = doc.get("dtype");
        if (!(dtypeValue instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", dtypeValue == null ? "missing" : "must be a str");
        }
        Dtype dtype = Dtype.fromWireName((String) dtypeValue);
        Object shape = doc.get("shape");
        long[] nd = shape(shape);
        Object data = doc.get("data");
        if (!(data instanceof MsgpackReader.Bin)) {
            throw DensewireException.on(Category.INVALID_FIELD, "data", data == null ? "missing" : "must be a MessagePack bin");
        }
        Object model = doc.get("model") == MsgpackReader.NIL ? null : doc.get("model");
        if (model != null && !(model instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "model", "must be a str");
        }
        Object quantization = doc.get("quantization") == MsgpackReader.NIL ? null : doc.get("quantization");
        if (quantization != null && !(quantization instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "quantization", "must be a str");
        }
        MsgpackReader.Bin bin = (MsgpackReader.Bin) data;
        Tensor tensor = Shapes.tensor(dtype, nd[0], nd[1], ByteBuffer.wrap(body, bin.offset(), bin.length()), "data", "shape");
        return new Embeddings(tensor, (String) model, usage(doc.get("usage")), (String) quantization);
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

    static Embeddings.Usage usage(Object u) {
        if (u == null || u == MsgpackReader.NIL) {
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
            if (!(v instanceof Long) || (Long) v < 0 || (Long) v > Embeddings.Usage.MAX_COUNT) {
                throw DensewireException.on(Category.INVALID_FIELD, "usage." + keys[i], "must be an integer from 0 to 2^53 - 1");
            }
            counts[i] = (Long) v;
        }
        return new Embeddings.Usage(counts[0], counts[1]);
    }
}
