package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Ragged and sparse Protobuf bodies (SPEC.md 20.6): {@code densewire.v1.RaggedTensor}, {@code SparseTensor} and
 * their responses, written byte-exact with protobuf's serializer (fields in number order, empty bytes omitted,
 * usage always written in a response) and read with offsets in every error; the rows, indices and values are views
 * of the body.
 */
public final class RaggedProtobuf {
    private RaggedProtobuf() {
    }

    private static void varint(ByteArrayOutputStream out, long v) {
        while ((v & ~0x7FL) != 0) {
            out.write((int) ((v & 0x7F) | 0x80));
            v >>>= 7;
        }
        out.write((int) v);
    }

    private static void bytes(ByteArrayOutputStream out, int number, ByteBuffer b) {
        if (b.remaining() == 0 && number != 3) { // offsets (field 3) are never empty
            return;
        }
        out.write(number << 3 | 2);
        varint(out, b.remaining());
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        out.write(a, 0, a.length);
    }

    private static byte[] tensor(Dtype dtype, long n, long d, ByteBuffer... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(0x08);
        varint(out, dtype.protoValue());
        out.write(0x12);
        varint(out, ProtobufCodec.varintSize(n) + ProtobufCodec.varintSize(d));
        varint(out, n);
        varint(out, d);
        for (int i = 0; i < parts.length; i++) {
            bytes(out, 3 + i, parts[i]);
        }
        return out.toByteArray();
    }

    private static byte[] response(String model, byte[] tensor, Embeddings.Usage usage) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] m = model == null ? new byte[0] : model.getBytes(StandardCharsets.UTF_8);
        if (m.length > 0) {
            out.write(0x0A);
            varint(out, m.length);
            out.write(m, 0, m.length);
        }
        out.write(0x12);
        varint(out, tensor.length);
        out.write(tensor, 0, tensor.length);
        Embeddings.Usage u = usage == null ? new Embeddings.Usage(0, 0) : usage;
        ByteArrayOutputStream us = new ByteArrayOutputStream();
        if (u.promptTokens() != 0) {
            us.write(0x08);
            varint(us, u.promptTokens());
        }
        if (u.totalTokens() != 0) {
            us.write(0x10);
            varint(us, u.totalTokens());
        }
        out.write(0x1A);
        varint(out, us.size());
        out.write(us.toByteArray(), 0, us.size());
        return out.toByteArray();
    }

    /** A bare {@code RaggedTensor} message. */
    public static byte[] encodeTensor(RaggedTensor t) {
        return tensor(t.dtype(), t.size(), t.dims(), ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())), t.rows().data());
    }

    /** A bare {@code SparseTensor} message. */
    public static byte[] encodeTensor(SparseTensor t) {
        return tensor(t.dtype(), t.size(), t.vocabularySize(), ByteBuffer.wrap(Ragged.offsetsBytes(t.offsets())),
                t.indexBytes(), t.values().data());
    }

    /** A {@code RaggedEmbeddingsResponse}. */
    public static byte[] encodeResponse(RaggedEmbeddings e) {
        return response(e.model(), encodeTensor(e.tensor()), e.usage());
    }

    /** A {@code SparseEmbeddingsResponse}. */
    public static byte[] encodeResponse(SparseEmbeddings e) {
        return response(e.model(), encodeTensor(e.tensor()), e.usage());
    }

    /** The fields of a tensor message: dtype, shape and the byte fields 3 to {@code last} as [from, length]. */
    private static final class Parts {
        long dtype;
        long[] shape = new long[3];
        int shapeCount;
        int[][] bytes = new int[3][];
    }

    private static Parts parts(ProtoReader r, int last) {
        Parts p = new Parts();
        for (int i = 0; i < 3; i++) {
            p.bytes[i] = new int[] {r.pos, 0};
        }
        while (r.more()) {
            int tagAt = r.pos;
            try {
                long tag = r.tag();
                long number = tag >>> 3;
                int wire = (int) (tag & 7);
                if (number == 1) {
                    r.expect(wire, 0, tagAt, "dtype");
                    p.dtype = r.varint();
                } else if (number == 2 && wire == 0) {
                    long v = r.varint();
                    if (p.shapeCount < 3) {
                        p.shape[p.shapeCount] = v;
                    }
                    p.shapeCount++;
                } else if (number == 2) {
                    r.expect(wire, 2, tagAt, "shape");
                    int len = r.lengthDelimited();
                    int stop = r.pos + len;
                    ProtoReader packed = new ProtoReader(r.b, r.base, r.pos, stop, true);
                    while (packed.more()) {
                        long v;
                        try {
                            v = packed.varint();
                        } catch (DensewireException e) {
                            throw DensewireException.at(Category.MALFORMED, tagAt - r.base, "packed shape ends inside a varint");
                        }
                        if (p.shapeCount < 3) {
                            p.shape[p.shapeCount] = v;
                        }
                        p.shapeCount++;
                    }
                    r.pos = stop;
                } else if (number >= 3 && number <= last) {
                    r.expect(wire, 2, tagAt, number == 3 ? "offsets" : number == last ? "data" : "indices");
                    int len = r.lengthDelimited();
                    p.bytes[(int) number - 3] = new int[] {r.pos, len};
                    r.pos += len;
                } else {
                    r.skip(tag, tagAt);
                }
            } catch (DensewireException e) {
                throw r.pastEnd(e, tagAt);
            }
        }
        if (p.shapeCount != 2 || p.shape[0] < 0 || p.shape[1] < 0) {
            throw DensewireException.on(Category.INVALID_FIELD, "shape", "must hold two entries, got " + p.shapeCount);
        }
        return p;
    }

    private static ByteBuffer part(byte[] body, int[] range) {
        return ByteBuffer.wrap(body, range[0], range[1]).slice();
    }

    /** The embedded tensor of a response: [from, length], the model and usage in {@code meta}. */
    private static int[] response(byte[] body, Object[] meta) {
        ProtoReader r = new ProtoReader(body, 0, 0, body.length, false);
        int[] tensor = null;
        while (r.more()) {
            int tagAt = r.pos;
            long tag = r.tag();
            long number = tag >>> 3;
            int wire = (int) (tag & 7);
            if (number >= 1 && number <= 3) {
                r.expect(wire, 2, tagAt, number == 1 ? "model" : number == 2 ? "embeddings" : "usage");
                int len = r.lengthDelimited();
                int from = r.pos;
                r.pos += len;
                if (number == 1) {
                    meta[0] = ProtobufCodec.utf8(body, from, len, tagAt, "model");
                } else if (number == 2) {
                    tensor = new int[] {from, len};
                } else {
                    meta[1] = ProtobufCodec.usage(new ProtoReader(body, 0, from, from + len, true));
                }
            } else {
                r.skip(tag, tagAt);
            }
        }
        if (tensor == null) {
            throw DensewireException.on(Category.INVALID_FIELD, "embeddings", "missing");
        }
        return tensor;
    }

    private static ProtoReader reader(byte[] body, boolean responseMessage, Object[] meta) {
        if (!responseMessage) {
            return new ProtoReader(body, 0, 0, body.length, false);
        }
        int[] t = response(body, meta);
        return new ProtoReader(body, 0, t[0], t[0] + t[1], true);
    }

    /** Decodes a {@code RaggedTensor} (or, with {@code responseMessage}, a {@code RaggedEmbeddingsResponse}). */
    public static RaggedEmbeddings decodeRagged(byte[] body, boolean responseMessage) {
        Object[] meta = new Object[2];
        Parts p = parts(reader(body, responseMessage, meta), 4);
        Dtype dtype = Dtype.fromProtoValue(p.dtype);
        int[] offsets = Ragged.readOffsets(part(body, p.bytes[0]), p.shape[0], 0);
        RaggedTensor t = Ragged.ragged(dtype, p.shape[1], offsets, part(body, p.bytes[1]), 0);
        return new RaggedEmbeddings(t, (String) meta[0], (Embeddings.Usage) meta[1]);
    }

    /** Decodes a {@code SparseTensor} (or, with {@code responseMessage}, a {@code SparseEmbeddingsResponse}). */
    public static SparseEmbeddings decodeSparse(byte[] body, boolean responseMessage) {
        Object[] meta = new Object[2];
        Parts p = parts(reader(body, responseMessage, meta), 5);
        Dtype dtype = Dtype.fromProtoValue(p.dtype);
        Ragged.checkValuesDtype(dtype, "dtype");
        Ragged.checkVocabulary(p.shape[1], "shape");
        int[] offsets = Ragged.readOffsets(part(body, p.bytes[0]), p.shape[0], 0);
        SparseTensor t = Ragged.sparse(dtype, p.shape[1], offsets, part(body, p.bytes[1]), part(body, p.bytes[2]), 0, 0);
        return new SparseEmbeddings(t, (String) meta[0], (Embeddings.Usage) meta[1]);
    }
}
