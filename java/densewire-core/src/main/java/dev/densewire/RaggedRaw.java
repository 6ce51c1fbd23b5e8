package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * Ragged and sparse raw bodies (SPEC.md 20.4): the parts back to back, each padded with zeros to a multiple of 8
 * bytes except the last (offsets, rows; offsets, indices, values), described by section 7's headers and
 * {@code Densewire-Kind}. Decoding wraps the body: the rows, indices and values are views of it.
 */
public final class RaggedRaw {
    /** {@code Densewire-Kind}: {@code ragged} or {@code sparse}. */
    public static final String KIND = "Densewire-Kind";

    private static final Pattern SHAPE_VALUE = Pattern.compile("[0-9]+,[0-9]+");

    private RaggedRaw() {
    }

    private static int pad8(long n) {
        return (int) ((n + 7) / 8 * 8);
    }

    private static byte[] body(ByteBuffer... parts) {
        int total = 0;
        for (int i = 0; i < parts.length; i++) {
            total += i + 1 < parts.length ? pad8(parts[i].remaining()) : parts[i].remaining();
        }
        ByteBuffer out = ByteBuffer.allocate(total);
        for (int i = 0; i < parts.length; i++) {
            out.put(parts[i].duplicate());
            if (i + 1 < parts.length) {
                out.position(pad8(out.position()));
            }
        }
        return out.array();
    }

    /** The body of a ragged response: offsets, padding, rows. */
    public static byte[] encode(RaggedEmbeddings e) {
        RaggedTensor t = e.tensor();
        return body(ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())), t.rows().data());
    }

    /** The body of a sparse response: offsets, padding, indices, padding, values. */
    public static byte[] encode(SparseEmbeddings e) {
        SparseTensor t = e.tensor();
        return body(ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())), t.indexBytes(), t.values().data());
    }

    private static Map<String, String> headers(String kind, Dtype dtype, String shape, String model,
            Embeddings.Usage usage) {
        Map<String, String> h = new LinkedHashMap<>();
        h.put(RawCodec.VERSION, "1");
        h.put(KIND, kind);
        h.put(RawCodec.DTYPE, dtype.wireName());
        h.put(RawCodec.SHAPE, shape);
        h.put(RawCodec.BYTEORDER, "little");
        if (model != null) {
            h.put(RawCodec.MODEL, model);
        }
        if (usage != null) {
            h.put(RawCodec.PROMPT_TOKENS, Long.toString(usage.promptTokens()));
            h.put(RawCodec.TOTAL_TOKENS, Long.toString(usage.totalTokens()));
        }
        return h;
    }

    /** The headers of a ragged body, in the order of SPEC.md 20.4. */
    public static Map<String, String> headers(RaggedEmbeddings e) {
        RaggedTensor t = e.tensor();
        return headers("ragged", t.dtype(), t.size() + "," + t.dims(), e.model(), e.usage());
    }

    /** The headers of a sparse body, in the order of SPEC.md 20.4. */
    public static Map<String, String> headers(SparseEmbeddings e) {
        SparseTensor t = e.tensor();
        return headers("sparse", t.dtype(), t.size() + "," + t.vocabularySize(), e.model(), e.usage());
    }

    private static Function<String, String> ci(Map<String, String> headers) {
        Map<String, String> m = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
        m.putAll(headers);
        return m::get;
    }

    /** What both kinds read from the headers, in order: kind, dtype, shape ({@code n, d or V}), byte order. */
    private static long[] common(Function<String, String> header, String kind, Dtype[] dtype) {
        String k = header.apply(KIND);
        Ragged.checkKind(k == null ? null : k.trim(), kind, KIND);
        String name = header.apply(RawCodec.DTYPE);
        if (name == null) {
            throw new DensewireException(Category.INVALID_FIELD, "header is missing", -1, RawCodec.DTYPE);
        }
        dtype[0] = Dtype.fromWireName(name.trim(), RawCodec.DTYPE);
        String shape = header.apply(RawCodec.SHAPE);
        if (shape == null || !SHAPE_VALUE.matcher(shape.trim()).matches()) {
            throw new DensewireException(Category.INVALID_FIELD, "must be n,d in decimal without spaces", -1,
                    RawCodec.SHAPE);
        }
        shape = shape.trim();
        int comma = shape.indexOf(',');
        long n = RawCodec.parseCount(shape.substring(0, comma), RawCodec.SHAPE);
        long d = RawCodec.parseCount(shape.substring(comma + 1), RawCodec.SHAPE);
        String order = header.apply(RawCodec.BYTEORDER);
        if (order != null && !order.trim().equals("little")) {
            throw new DensewireException(Category.INVALID_FIELD, "raw bodies are little-endian", -1, RawCodec.BYTEORDER);
        }
        return new long[] {n, d};
    }

    private static Embeddings.Usage usage(Function<String, String> header) {
        String p = header.apply(RawCodec.PROMPT_TOKENS);
        String t = header.apply(RawCodec.TOTAL_TOKENS);
        if (p == null && t == null) {
            return null;
        }
        return new Embeddings.Usage(p == null ? 0 : RawCodec.parseCount(p.trim(), RawCodec.PROMPT_TOKENS),
                t == null ? 0 : RawCodec.parseCount(t.trim(), RawCodec.TOTAL_TOKENS));
    }

    /** The offsets at the start of the body: {@code length_mismatch} at the body's length when it is shorter. */
    private static int[] offsets(ByteBuffer body, long n) {
        long want = 4 * (n + 1);
        if (n >= Integer.MAX_VALUE / 4 || body.remaining() < want) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the body is " + body.remaining() + " bytes, its "
                    + (n + 1) + " offsets need " + want, body.remaining(), null);
        }
        return Ragged.readOffsets(body.duplicate().limit(body.position() + (int) want).slice(), n, 0);
    }

    private static void whole(ByteBuffer body, long expected) {
        if (body.remaining() != expected) {
            throw new DensewireException(Category.LENGTH_MISMATCH, "the body is " + body.remaining()
                    + " bytes, its parts need " + expected, Math.min(body.remaining(), expected), null);
        }
    }

    private static ByteBuffer part(ByteBuffer body, int from, int to) {
        return body.duplicate().position(body.position() + from).limit(body.position() + to).slice();
    }

    public static RaggedEmbeddings decodeRagged(Map<String, String> headers, byte[] body) {
        return decodeRagged(ci(headers), ByteBuffer.wrap(body));
    }

    /** Decodes a ragged body; {@code header} looks a header up case-insensitively. The rows are a view of the body. */
    public static RaggedEmbeddings decodeRagged(Function<String, String> header, ByteBuffer body) {
        Dtype[] dtype = new Dtype[1];
        long[] nd = common(header, "ragged", dtype);
        int[] offsets = offsets(body, nd[0]);
        int start = pad8(4 * (nd[0] + 1));
        long rb = dtype[0].rowBytes(nd[1]);
        long rows = offsets[offsets.length - 1];
        long expected = rb < 0 || nd[1] > Integer.MAX_VALUE ? Long.MAX_VALUE : start + Shapes.expectedBytes(dtype[0], rows, nd[1]);
        whole(body, expected);
        RaggedTensor t = Ragged.ragged(dtype[0], nd[1], offsets, part(body, start, body.remaining()), start);
        return new RaggedEmbeddings(t, header.apply(RawCodec.MODEL), usage(header));
    }

    public static SparseEmbeddings decodeSparse(Map<String, String> headers, byte[] body) {
        return decodeSparse(ci(headers), ByteBuffer.wrap(body));
    }

    /** Decodes a sparse body; the indices and values are views of the body. */
    public static SparseEmbeddings decodeSparse(Function<String, String> header, ByteBuffer body) {
        Dtype[] dtype = new Dtype[1];
        long[] nv = common(header, "sparse", dtype);
        Ragged.checkVocabulary(nv[1], RawCodec.SHAPE);
        Ragged.checkValuesDtype(dtype[0], RawCodec.DTYPE);
        int[] offsets = offsets(body, nv[0]);
        long k = offsets[offsets.length - 1];
        int iStart = pad8(4 * (nv[0] + 1));
        int vStart = iStart + pad8(4 * k);
        whole(body, vStart + k * dtype[0].itemBytes());
        SparseTensor t = Ragged.sparse(dtype[0], nv[1], offsets, part(body, iStart, iStart + (int) (4 * k)),
                part(body, vStart, body.remaining()), iStart, vStart);
        return new SparseEmbeddings(t, header.apply(RawCodec.MODEL), usage(header));
    }
}
