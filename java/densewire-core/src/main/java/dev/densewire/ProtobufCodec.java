package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The Protobuf messages of SPEC.md section 9 ({@code proto/densewire/v1/tensor.proto}): {@code Tensor} and
 * {@code EmbeddingsResponse}. A direct proto3 wire reader and writer (no dependency): the output follows the
 * official serializers' rules (fields in number order, defaults omitted, {@code shape} packed), {@code data} is
 * decoded as a view of the body, and errors carry the offsets the spec prescribes. Tests check both directions
 * against protobuf-java classes generated from the shipped .proto.
 */
public final class ProtobufCodec {
    private ProtobufCodec() {
    }

    // ------------------------------------------------------------------ encoding

    /** A {@code densewire.v1.Tensor} message. */
    public static byte[] encodeTensor(Tensor tensor) {
        ByteBuffer out = ByteBuffer.allocate(tensorSize(tensor));
        writeTensor(out, tensor);
        return out.array();
    }

    /**
     * A {@code densewire.v1.EmbeddingsResponse}: model (when non-empty), the tensor, usage (zeros if absent), the
     * quantization id (field 4, when non-empty).
     */
    public static byte[] encodeResponse(Embeddings embeddings) {
        byte[] model = embeddings.model() == null ? new byte[0] : embeddings.model().getBytes(StandardCharsets.UTF_8);
        Embeddings.Usage u = embeddings.usage() == null ? new Embeddings.Usage(0, 0) : embeddings.usage();
        int tensorSize = tensorSize(embeddings.tensor());
        int usageSize = (u.promptTokens() != 0 ? 1 + varintSize(u.promptTokens()) : 0)
                + (u.totalTokens() != 0 ? 1 + varintSize(u.totalTokens()) : 0);
        byte[] quantization = embeddings.quantization() == null ? new byte[0]
                : embeddings.quantization().getBytes(StandardCharsets.UTF_8);
        int size = (model.length > 0 ? 1 + varintSize(model.length) + model.length : 0)
                + 1 + varintSize(tensorSize) + tensorSize + 1 + varintSize(usageSize) + usageSize
                + (quantization.length > 0 ? 1 + varintSize(quantization.length) + quantization.length : 0);
        ByteBuffer out = ByteBuffer.allocate(size);
        if (model.length > 0) {
            out.put((byte) 0x0A);
            varint(out, model.length);
            out.put(model);
        }
        out.put((byte) 0x12);
        varint(out, tensorSize);
        writeTensor(out, embeddings.tensor());
        out.put((byte) 0x1A);
        varint(out, usageSize);
        if (u.promptTokens() != 0) {
            out.put((byte) 0x08);
            varint(out, u.promptTokens());
        }
        if (u.totalTokens() != 0) {
            out.put((byte) 0x10);
            varint(out, u.totalTokens());
        }
        if (quantization.length > 0) {
            out.put((byte) 0x22);
            varint(out, quantization.length);
            out.put(quantization);
        }
        return out.array();
    }

    private static int tensorSize(Tensor t) {
        int shape = varintSize(t.rows()) + varintSize(t.dims());
        int data = t.byteLength();
        return 1 + varintSize(t.dtype().protoValue()) + 1 + varintSize(shape) + shape
                + (data > 0 ? 1 + varintSize(data) + data : 0);
    }

    private static void writeTensor(ByteBuffer out, Tensor t) {
        out.put((byte) 0x08);
        varint(out, t.dtype().protoValue());
        out.put((byte) 0x12);
        varint(out, varintSize(t.rows()) + varintSize(t.dims()));
        varint(out, t.rows());
        varint(out, t.dims());
        if (t.byteLength() > 0) {
            out.put((byte) 0x1A);
            varint(out, t.byteLength());
            out.put(t.data());
        }
    }

    static int varintSize(long v) {
        int n = 1;
        while ((v & ~0x7FL) != 0) {
            v >>>= 7;
            n++;
        }
        return n;
    }

    static void varint(ByteBuffer out, long v) {
        while ((v & ~0x7FL) != 0) {
            out.put((byte) ((v & 0x7F) | 0x80));
            v >>>= 7;
        }
        out.put((byte) v);
    }

    // ------------------------------------------------------------------ decoding

    /** Decodes a {@code Tensor} message; the tensor is a view of {@code body}. */
    public static Tensor decodeTensor(byte[] body) {
        return decodeTensor(body, 0, body.length);
    }

    public static Tensor decodeTensor(byte[] body, int offset, int length) {
        return tensor(new ProtoReader(body, offset, offset, offset + length, false));
    }

    /** Decodes an {@code EmbeddingsResponse}; the tensor is a view of {@code body}. */
    public static Embeddings decodeResponse(byte[] body) {
        return decodeResponse(body, 0, body.length);
    }

    public static Embeddings decodeResponse(byte[] body, int offset, int length) {
        ProtoReader r = new ProtoReader(body, offset, offset, offset + length, false);
        String model = null;
        Tensor tensor = null;
        Embeddings.Usage usage = null;
        String quantization = null;
        while (r.more()) {
            int tagAt = r.pos;
            long tag = r.tag();
            int number = (int) (tag >>> 3);
            int wire = (int) (tag & 7);
            if (number >= 1 && number <= 4 && (tag >>> 3) <= 4) {
                r.expect(wire, 2, tagAt, FIELDS[number]);
                int len = r.lengthDelimited();
                int from = r.pos;
                r.pos += len;
                if (number == 1) {
                    model = utf8(body, from, len, tagAt - offset, "model");
                } else if (number == 4) {
                    String q = utf8(body, from, len, tagAt - offset, "quantization");
                    quantization = q.isEmpty() ? null : q;
                } else if (number == 2) {
                    tensor = tensor(new ProtoReader(body, offset, from, from + len, true));
                } else {
                    usage = usage(new ProtoReader(body, offset, from, from + len, true));
                }
            } else {
                r.skip(tag, tagAt);
            }
        }
        if (tensor == null) {
            throw DensewireException.on(Category.INVALID_FIELD, "embeddings", "missing");
        }
        return new Embeddings(tensor, model, usage, quantization);
    }

    private static final String[] FIELDS = {null, "model", "embeddings", "usage", "quantization"};

    static String utf8(byte[] b, int from, int len, int at, String field) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, from, len)).toString();
        } catch (CharacterCodingException e) {
            throw DensewireException.at(Category.MALFORMED, at, field + " is not UTF-8");
        }
    }

    private static Tensor tensor(ProtoReader r) {
        long dtypeValue = 0;
        long[] shape = new long[3];
        int shapeCount = 0;
        int dataFrom = r.pos;
        int dataLen = 0;
        while (r.more()) {
            int tagAt = r.pos;
            try {
                long tag = r.tag();
                int number = (int) Math.min(tag >>> 3, Integer.MAX_VALUE);
                int wire = (int) (tag & 7);
                if (number == 1) {
                    r.expect(wire, 0, tagAt, "dtype");
                    dtypeValue = r.varint();
                } else if (number == 2) {
                    if (wire == 0) {
                        long v = r.varint();
                        if (shapeCount < 3) {
                            shape[shapeCount] = v;
                        }
                        shapeCount++;
                    } else {
                        r.expect(wire, 2, tagAt, "shape");
                        int len = r.lengthDelimited();
                        int stop = r.pos + len;
                        ProtoReader packed = new ProtoReader(r.b, r.base, r.pos, stop, true);
                        while (packed.more()) {
                            long v;
                            try {
                                v = packed.varint();
                            } catch (DensewireException e) {
                                throw DensewireException.at(Category.MALFORMED, tagAt - r.base,
                                        "packed shape ends inside a varint");
                            }
                            if (shapeCount < 3) {
                                shape[shapeCount] = v;
                            }
                            shapeCount++;
                        }
                        r.pos = stop;
                    }
                } else if (number == 3) {
                    r.expect(wire, 2, tagAt, "data");
                    dataLen = r.lengthDelimited();
                    dataFrom = r.pos;
                    r.pos += dataLen;
                } else {
                    r.skip(tag, tagAt);
                }
            } catch (DensewireException e) {
                throw r.pastEnd(e, tagAt);
            }
        }
        Dtype dtype = Dtype.fromProtoValue(dtypeValue);
        if (shapeCount != 2 || shape[0] < 0 || shape[1] < 0) {
            throw DensewireException.on(Category.INVALID_FIELD, "shape",
                    "must hold two entries [n, d], got " + shapeCount + " entries");
        }
        return Shapes.tensor(dtype, shape[0], shape[1], ByteBuffer.wrap(r.b, dataFrom, dataLen), "data", "shape");
    }

    static Embeddings.Usage usage(ProtoReader r) {
        long[] counts = new long[2];
        while (r.more()) {
            int tagAt = r.pos;
            try {
                long tag = r.tag();
                long number = tag >>> 3;
                int wire = (int) (tag & 7);
                if (number == 1 || number == 2) {
                    r.expect(wire, 0, tagAt, number == 1 ? "usage.prompt_tokens" : "usage.total_tokens");
                    counts[(int) number - 1] = r.varint();
                } else {
                    r.skip(tag, tagAt);
                }
            } catch (DensewireException e) {
                throw r.pastEnd(e, tagAt);
            }
        }
        return new Embeddings.Usage(counts[0], counts[1]);
    }
}
