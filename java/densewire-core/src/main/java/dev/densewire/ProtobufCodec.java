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

    /** A {@code densewire.v1.EmbeddingsResponse}: model (when non-empty), the tensor, usage (zeros if absent). */
    public static byte[] encodeResponse(Embeddings embeddings) {
        byte[] model = embeddings.model() == null ? new byte[0] : embeddings.model().getBytes(StandardCharsets.UTF_8);
        Embeddings.Usage u = embeddings.usage() == null ? new Embeddings.Usage(0, 0) : embeddings.usage();
        int tensorSize = tensorSize(embeddings.tensor());
        int usageSize = (u.promptTokens() != 0 ? 1 + varintSize(u.promptTokens()) : 0)
                + (u.totalTokens() != 0 ? 1 + varintSize(u.totalTokens()) : 0);
        int size = (model.length > 0 ? 1 + varintSize(model.length) + model.length : 0)
                + 1 + varintSize(tensorSize) + tensorSize + 1 + varintSize(usageSize) + usageSize;
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

    private static int varintSize(long v) {
        int n = 1;
        while ((v & ~0x7FL) != 0) {
            v >>>= 7;
            n++;
        }
        return n;
    }

    private static void varint(ByteBuffer out, long v) {
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
        return new Reader(body, offset, offset, offset + length, false).tensor();
    }

    /** Decodes an {@code EmbeddingsResponse}; the tensor is a view of {@code body}. */
    public static Embeddings decodeResponse(byte[] body) {
        return decodeResponse(body, 0, body.length);
    }

    public static Embeddings decodeResponse(byte[] body, int offset, int length) {
        Reader r = new Reader(body, offset, offset, offset + length, false);
        String model = null;
        Tensor tensor = null;
        Embeddings.Usage usage = null;
        while (r.more()) {
            int tagAt = r.pos;
            long tag = r.tag();
            int number = (int) (tag >>> 3);
            int wire = (int) (tag & 7);
            if (number == 1 || number == 2 || number == 3) {
                r.expect(wire, 2, tagAt, number == 1 ? "model" : number == 2 ? "embeddings" : "usage");
                int len = r.lengthDelimited();
                int from = r.pos;
                r.pos += len;
                if (number == 1) {
                    model = utf8(body, from, len, tagAt - offset);
                } else if (number == 2) {
                    tensor = new Reader(body, offset, from, from + len, true).tensor();
                } else {
                    usage = new Reader(body, offset, from, from + len, true).usage();
                }
            } else {
                r.skip(tag, tagAt);
            }
        }
        if (tensor == null) {
            throw DensewireException.on(Category.INVALID_FIELD, "embeddings", "missing");
        }
        return new Embeddings(tensor, model, usage);
    }

    private static String utf8(byte[] b, int from, int len, int at) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, from, len)).toString();
        } catch (CharacterCodingException e) {
            throw DensewireException.at(Category.MALFORMED, at, "model is not UTF-8");
        }
    }

    /**
     * A cursor over {@code [pos, end)} of a body starting at {@code base}; offsets are relative to base. In an
     * embedded message ({@code nested}), a field running past the message's end while staying inside the body
     * is {@code malformed} at the field's tag; at the top level it is {@code truncated} at the body's length.
     */
    private static final class Reader {
        /** Unknown groups nested deeper than this are malformed ("groups nested too deeply"). */
        static final int MAX_GROUP_DEPTH = 64;

        final byte[] b;
        final int base;
        final int end;
        final boolean nested;
        int pos;

        Reader(byte[] b, int base, int pos, int end, boolean nested) {
            this.b = b;
            this.base = base;
            this.pos = pos;
            this.end = end;
            this.nested = nested;
        }

        /** In an embedded message, running past its end is a malformed field, not a short body. */
        private DensewireException pastEnd(DensewireException e, int tagAt) {
            if (nested && e.category() == Category.TRUNCATED) {
                return DensewireException.at(Category.MALFORMED, tagAt - base,
                        "a field runs past the end of its embedded message: " + e.detail());
            }
            return e;
        }

        boolean more() {
            return pos < end;
        }

        long varint() {
            int start = pos;
            long result = 0;
            for (int shift = 0; ; shift += 7) {
                if (pos >= end) {
                    throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a varint");
                }
                if (pos - start == 10) {
                    throw DensewireException.at(Category.MALFORMED, start - base, "varint longer than 10 bytes");
                }
                int x = b[pos++];
                if (shift < 64) {
                    result |= (long) (x & 0x7F) << shift;
                }
                if (x >= 0) {
                    return result;
                }
            }
        }

        /** Inside a nested message, ending early means its length was wrong: still reported as the body's end. */
        private int truncatedAt() {
            return end - base;
        }

        long tag() {
            int at = pos;
            long tag = varint();
            if ((tag >>> 3) == 0) {
                throw DensewireException.at(Category.MALFORMED, at - base, "field number 0");
            }
            return tag;
        }

        int lengthDelimited() {
            long n = varint();
            if (n > end - pos || n < 0) {
                throw DensewireException.at(Category.TRUNCATED, truncatedAt(),
                        "a " + n + "-byte field runs past the end of the body");
            }
            return (int) n;
        }

        void expect(int wire, int want, int tagAt, String name) {
            if (wire != want) {
                throw DensewireException.at(Category.MALFORMED, tagAt - base,
                        "field " + name + " has wire type " + wire + ", expected " + want);
            }
        }

        /** Skips the value of an unknown field whose tag ({@code tag}, at {@code tagAt}) was just read. */
        void skip(long tag, int tagAt) {
            skip(tag, tagAt, 0);
        }

        /**
         * A group (deprecated wire type 3) is skipped up to the end-group tag (wire type 4) of the same field number,
         * its inner fields (nested groups included, at most 64 deep) skipped alike; an end-group tag anywhere else
         * is malformed at that tag.
         */
        private void skip(long tag, int tagAt, int depth) {
            int wire = (int) (tag & 7);
            switch (wire) {
                case 0:
                    varint();
                    break;
                case 1:
                case 5: {
                    int size = wire == 1 ? 8 : 4;
                    if (size > end - pos) {
                        throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a fixed-size field");
                    }
                    pos += size;
                    break;
                }
                case 2: {
                    int n = lengthDelimited(); // read before adding: pos moves past the length varint
                    pos += n;
                    break;
                }
                case 3: {
                    if (depth >= MAX_GROUP_DEPTH) {
                        throw DensewireException.at(Category.MALFORMED, tagAt - base, "groups nested too deeply");
                    }
                    while (true) {
                        if (pos >= end) {
                            throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a group");
                        }
                        int innerAt = pos;
                        long inner = tag();
                        if ((inner & 7) == 4) {
                            if ((inner >>> 3) != (tag >>> 3)) {
                                throw DensewireException.at(Category.MALFORMED, innerAt - base,
                                        "end-group tag does not match its start");
                            }
                            break;
                        }
                        skip(inner, innerAt, depth + 1);
                    }
                    break;
                }
                case 4:
                    throw DensewireException.at(Category.MALFORMED, tagAt - base, "end-group tag without a start");
                default:
                    throw DensewireException.at(Category.MALFORMED, tagAt - base, "unsupported wire type " + wire);
            }
        }

        Tensor tensor() {
            long dtypeValue = 0;
            long[] shape = new long[3];
            int shapeCount = 0;
            int dataFrom = pos;
            int dataLen = 0;
            while (more()) {
                int tagAt = pos;
                try {
                    long tag = tag();
                    int number = (int) Math.min(tag >>> 3, Integer.MAX_VALUE);
                    int wire = (int) (tag & 7);
                    if (number == 1) {
                        expect(wire, 0, tagAt, "dtype");
                        dtypeValue = varint();
                    } else if (number == 2) {
                        if (wire == 0) {
                            long v = varint();
                            if (shapeCount < 3) {
                                shape[shapeCount] = v;
                            }
                            shapeCount++;
                        } else {
                            expect(wire, 2, tagAt, "shape");
                            int len = lengthDelimited();
                            int stop = pos + len;
                            Reader packed = new Reader(b, base, pos, stop, true);
                            while (packed.more()) {
                                long v;
                                try {
                                    v = packed.varint();
                                } catch (DensewireException e) {
                                    throw DensewireException.at(Category.MALFORMED, tagAt - base,
                                            "packed shape ends inside a varint");
                                }
                                if (shapeCount < 3) {
                                    shape[shapeCount] = v;
                                }
                                shapeCount++;
                            }
                            pos = stop;
                        }
                    } else if (number == 3) {
                        expect(wire, 2, tagAt, "data");
                        dataLen = lengthDelimited();
                        dataFrom = pos;
                        pos += dataLen;
                    } else {
                        skip(tag, tagAt);
                    }
                } catch (DensewireException e) {
                    throw pastEnd(e, tagAt);
                }
            }
            Dtype dtype = Dtype.fromProtoValue(dtypeValue);
            if (shapeCount != 2 || shape[0] < 0 || shape[1] < 0) {
                throw DensewireException.on(Category.INVALID_FIELD, "shape",
                        "must hold two entries [n, d], got " + shapeCount + " entries");
            }
            return Shapes.tensor(dtype, shape[0], shape[1], ByteBuffer.wrap(b, dataFrom, dataLen), "data", "shape");
        }

        Embeddings.Usage usage() {
            long[] counts = new long[2];
            while (more()) {
                int tagAt = pos;
                try {
                    long tag = tag();
                    long number = tag >>> 3;
                    int wire = (int) (tag & 7);
                    if (number == 1 || number == 2) {
                        expect(wire, 0, tagAt, number == 1 ? "usage.prompt_tokens" : "usage.total_tokens");
                        counts[(int) number - 1] = varint();
                    } else {
                        skip(tag, tagAt);
                    }
                } catch (DensewireException e) {
                    throw pastEnd(e, tagAt);
                }
            }
            return new Embeddings.Usage(counts[0], counts[1]);
        }
    }
}
