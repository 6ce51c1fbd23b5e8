package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;

/**
 * Ragged and sparse MessagePack bodies (SPEC.md 20.5): one map {@code {model?, kind, dtype, shape, offsets,
 * indices (sparse), data, usage?}} in the smallest representations (byte-exact with the golden vectors). Decoding
 * wraps the body: the rows, indices and values are views of it.
 */
public final class RaggedMsgpack {
    private RaggedMsgpack() {
    }

    private static byte[] encode(String kind, Dtype dtype, long n, long d, String model, Embeddings.Usage u,
            String[] names, ByteBuffer[] parts) {
        byte[] m = model == null ? null : model.getBytes(StandardCharsets.UTF_8);
        int size = 128 + (m == null ? 0 : m.length + 5);
        for (ByteBuffer p : parts) {
            size += p.remaining() + 16;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.put((byte) (0x80 | (3 + parts.length + (m != null ? 1 : 0) + (u != null ? 1 : 0))));
        if (m != null) {
            MsgpackCodec.key(out, "model");
            MsgpackCodec.str(out, m);
        }
        MsgpackCodec.key(out, "kind");
        MsgpackCodec.str(out, kind.getBytes(StandardCharsets.US_ASCII));
        MsgpackCodec.key(out, "dtype");
        MsgpackCodec.str(out, dtype.wireName().getBytes(StandardCharsets.US_ASCII));
        MsgpackCodec.key(out, "shape");
        out.put((byte) 0x92);
        MsgpackCodec.uint(out, n);
        MsgpackCodec.uint(out, d);
        for (int i = 0; i < parts.length; i++) {
            MsgpackCodec.key(out, names[i]);
            MsgpackCodec.binHeader(out, parts[i].remaining());
            out.put(parts[i].duplicate());
        }
        if (u != null) {
            MsgpackCodec.key(out, "usage");
            out.put((byte) 0x82);
            MsgpackCodec.key(out, "prompt_tokens");
            MsgpackCodec.uint(out, u.promptTokens());
            MsgpackCodec.key(out, "total_tokens");
            MsgpackCodec.uint(out, u.totalTokens());
        }
        return Arrays.copyOf(out.array(), out.position());
    }

    public static byte[] encode(RaggedEmbeddings e) {
        RaggedTensor t = e.tensor();
        return encode("ragged", t.dtype(), t.size(), t.dims(), e.model(), e.usage(), new String[] {"offsets", "data"},
                new ByteBuffer[] {ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())), t.rows().data()});
    }

    public static byte[] encode(SparseEmbeddings e) {
        SparseTensor t = e.tensor();
        return encode("sparse", t.dtype(), t.size(), t.vocabularySize(), e.model(), e.usage(),
                new String[] {"offsets", "indices", "data"},
                new ByteBuffer[] {ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())), t.indexBytes(), t.values().data()});
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(byte[] body) {
        MsgpackReader r = new MsgpackReader(body, 0, body.length);
        if (body.length == 0) {
            throw DensewireException.at(Category.TRUNCATED, 0, "empty body");
        }
        int first = body[0] & 0xFF;
        if (!((first >= 0x80 && first <= 0x8F) || first == 0xDE || first == 0xDF)) {
            throw DensewireException.at(Category.MALFORMED, 0,
                    String.format("the body must be a MessagePack map, it starts with 0x%02x", first));
        }
        Map<String, Object> doc = (Map<String, Object>) r.value(0);
        if (r.pos != r.end) {
            throw DensewireException.at(Category.MALFORMED, r.pos, (r.end - r.pos) + " bytes after the map");
        }
        return doc;
    }

    /** Kind, dtype, shape. */
    private static long[] head(Map<String, Object> doc, String kind, Dtype[] dtype) {
        Object k = doc.get("kind");
        Ragged.checkKind(k == null || k == MsgpackReader.NIL ? null : k instanceof String ? k : "(not a str)", kind, "kind");
        Object name = doc.get("dtype");
        if (!(name instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "dtype", name == null ? "missing" : "must be a str");
        }
        dtype[0] = Dtype.fromWireName((String) name);
        Object shape = doc.get("shape");
        if (shape instanceof java.util.List && ((java.util.List<?>) shape).size() == 2) {
            java.util.List<?> l = (java.util.List<?>) shape;
            if (l.get(0) instanceof Long && l.get(1) instanceof Long && (Long) l.get(0) >= 0 && (Long) l.get(1) >= 0) {
                return new long[] {(Long) l.get(0), (Long) l.get(1)};
            }
        }
        throw DensewireException.on(Category.INVALID_FIELD, "shape", "must be [n, d], two non-negative integers");
    }

    private static ByteBuffer bin(byte[] body, Map<String, Object> doc, String key) {
        Object v = doc.get(key);
        if (!(v instanceof MsgpackReader.Bin)) {
            throw DensewireException.on(Category.INVALID_FIELD, key, v == null ? "missing" : "must be a MessagePack bin");
        }
        MsgpackReader.Bin b = (MsgpackReader.Bin) v;
        return ByteBuffer.wrap(body, b.offset(), b.length()).slice();
    }

    private static String model(Map<String, Object> doc) {
        Object m = doc.get("model");
        if (m == null || m == MsgpackReader.NIL) {
            return null;
        }
        if (!(m instanceof String)) {
            throw DensewireException.on(Category.INVALID_FIELD, "model", "must be a str");
        }
        return (String) m;
    }

    /** Decodes a ragged body; the rows are a view of {@code body}. */
    public static RaggedEmbeddings decodeRagged(byte[] body) {
        Map<String, Object> doc = map(body);
        Dtype[] dtype = new Dtype[1];
        long[] nd = head(doc, "ragged", dtype);
        int[] offsets = Ragged.readOffsets(bin(body, doc, "offsets"), nd[0], 0);
        RaggedTensor t = Ragged.ragged(dtype[0], nd[1], offsets, bin(body, doc, "data"), 0);
        String model = model(doc);
        return new RaggedEmbeddings(t, model, MsgpackCodec.usage(doc.get("usage")));
    }

    /** Decodes a sparse body; the indices and values are views of {@code body}. */
    public static SparseEmbeddings decodeSparse(byte[] body) {
        Map<String, Object> doc = map(body);
        Dtype[] dtype = new Dtype[1];
        long[] nv = head(doc, "sparse", dtype);
        Ragged.checkValuesDtype(dtype[0], "dtype");
        Ragged.checkVocabulary(nv[1], "shape");
        int[] offsets = Ragged.readOffsets(bin(body, doc, "offsets"), nv[0], 0);
        SparseTensor t = Ragged.sparse(dtype[0], nv[1], offsets, bin(body, doc, "indices"), bin(body, doc, "data"), 0, 0);
        String model = model(doc);
        return new SparseEmbeddings(t, model, MsgpackCodec.usage(doc.get("usage")));
    }
}
