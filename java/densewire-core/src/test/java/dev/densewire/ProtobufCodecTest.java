package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import dev.densewire.DensewireException.Category;
import dev.densewire.proto.DType;
import dev.densewire.proto.EmbeddingsResponse;
import dev.densewire.proto.Usage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The hand-written Protobuf codec against protobuf-java classes generated from proto/densewire/v1/tensor.proto. */
class ProtobufCodecTest {
    private static final Tensor T = Tensor.ofFloats(2, 3, new float[] {1f, -2.5f, 0.1f, 3f, 0.5f, -1f});

    private static dev.densewire.proto.Tensor official(Tensor t) {
        return dev.densewire.proto.Tensor.newBuilder().setDtypeValue(t.dtype().protoValue())
                .addShape(t.rows()).addShape(t.dims()).setData(ByteString.copyFrom(t.toByteArray())).build();
    }

    @Test
    void byteExactWithTheOfficialSerializer() throws Exception {
        for (Tensor t : new Tensor[] {T, Tensor.ofFloats(0, 4, new float[0]), Tensor.ofFloats(200, 300, new float[60000]),
            T.convert(Dtype.FLOAT16), T.convert(Dtype.BINARY)}) {
            assertArrayEquals(official(t).toByteArray(), ProtobufCodec.encodeTensor(t));
            assertEquals(t, ProtobufCodec.decodeTensor(official(t).toByteArray()));
            for (String model : new String[] {"", "m", "x".repeat(300)}) {
                for (long[] u : new long[][] {{0, 0}, {7, 7}, {0, 1L << 40}}) {
                    EmbeddingsResponse r = EmbeddingsResponse.newBuilder().setModel(model).setEmbeddings(official(t))
                            .setUsage(Usage.newBuilder().setPromptTokens(u[0]).setTotalTokens(u[1])).build();
                    Embeddings e = new Embeddings(t, model, new Embeddings.Usage(u[0], u[1]));
                    assertArrayEquals(r.toByteArray(), ProtobufCodec.encodeResponse(e));
                    Embeddings back = ProtobufCodec.decodeResponse(r.toByteArray());
                    assertEquals(t, back.tensor());
                    assertEquals(new Embeddings.Usage(u[0], u[1]), back.usage());
                    assertEquals(EmbeddingsResponse.parseFrom(ProtobufCodec.encodeResponse(e)), r);
                }
            }
        }
        assertEquals(DType.DTYPE_BINARY, dev.densewire.proto.Tensor.parseFrom(ProtobufCodec.encodeTensor(T.convert(Dtype.BINARY))).getDtype());
    }

    @Test
    void theQuantizationIdIsField4ByteExact() throws Exception {
        Tensor codes = Tensor.of(Dtype.INT8, 1, 3, new byte[] {-128, 0, 127});
        for (String id : new String[] {"455fc59476466b04", "", "x".repeat(200)}) {
            EmbeddingsResponse r = EmbeddingsResponse.newBuilder().setModel("m").setEmbeddings(official(codes))
                    .setUsage(Usage.newBuilder().setPromptTokens(3).setTotalTokens(3)).setQuantization(id).build();
            Embeddings e = new Embeddings(codes, "m", new Embeddings.Usage(3, 3), id.isEmpty() ? null : id);
            assertArrayEquals(r.toByteArray(), ProtobufCodec.encodeResponse(e));
            assertEquals(e, ProtobufCodec.decodeResponse(r.toByteArray()));
            assertEquals(id, EmbeddingsResponse.parseFrom(ProtobufCodec.encodeResponse(e)).getQuantization());
        }
    }

    @Test
    void unpackedShapeAndUnknownFieldsAreAccepted() throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(buf);
        out.writeString(15, "unknown");
        out.writeFixed64(14, 1);
        out.writeUInt64(2, 2); // shape unpacked
        out.writeUInt64(2, 3);
        out.writeEnum(1, 1);
        out.writeFixed32(13, 1);
        out.writeBytes(3, ByteString.copyFrom(T.toByteArray()));
        out.flush();
        assertEquals(T, ProtobufCodec.decodeTensor(buf.toByteArray()));
    }

    @Test
    void everyTruncationIsTruncated() {
        byte[] body = ProtobufCodec.encodeResponse(new Embeddings(T, "model", new Embeddings.Usage(3, 3)));
        int truncated = 0;
        for (int len = 1; len < body.length; len++) {
            try {
                ProtobufCodec.decodeResponse(Arrays.copyOf(body, len));
                // cut at a field boundary after the tensor: a valid message (protobuf cannot tell)
            } catch (DensewireException e) {
                if (e.category() == Category.INVALID_FIELD) { // cut at a boundary before the tensor
                    assertEquals("embeddings", e.field().orElseThrow(), "length " + len);
                } else {
                    assertEquals(Category.TRUNCATED, e.category(), "length " + len + ": " + e.getMessage());
                    assertEquals(len, e.offset().getAsLong(), "length " + len);
                    truncated++;
                }
            }
        }
        assertEquals(body.length - 3, truncated); // every cut but the two top-level field boundaries
    }

    @Test
    void fieldErrors() {
        DensewireException missing = assertThrows(DensewireException.class, () -> ProtobufCodec.decodeResponse(new byte[0]));
        assertEquals("embeddings", missing.field().orElseThrow());
        DensewireException group = assertThrows(DensewireException.class, () -> ProtobufCodec.decodeTensor(new byte[] {0x0B}));
        assertEquals(Category.MALFORMED, group.category());
        assertEquals(0, group.offset().getAsLong());
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private static DensewireException fails(Category category, byte[] body) {
        DensewireException e = assertThrows(DensewireException.class, () -> ProtobufCodec.decodeTensor(body));
        assertEquals(category, e.category(), e.getMessage());
        return e;
    }

    @Test
    void unknownGroupsAreSkippedAsTheProtobufRuntimeDoes() throws IOException {
        byte[] plain = ProtobufCodec.encodeTensor(T);
        // field 11 as a group (wire types 3/4) holding a varint and a nested group 12
        byte[] group = {0x5B, 0x08, 0x07, 0x63, 0x10, 0x01, 0x64, 0x5C};
        byte[] body = concat(group, plain);
        dev.densewire.proto.Tensor runtime = dev.densewire.proto.Tensor.parseFrom(body); // the official parser skips it too
        assertEquals(official(T).getShapeList(), runtime.getShapeList());
        assertEquals(official(T).getData(), runtime.getData());
        assertEquals(T, ProtobufCodec.decodeTensor(body));
        // in an embedded message and in Usage too
        byte[] response = ProtobufCodec.encodeResponse(new Embeddings(T, "m", new Embeddings.Usage(3, 4)));
        Embeddings back = ProtobufCodec.decodeResponse(concat(group, response));
        assertEquals(T, back.tensor());
        assertEquals(new Embeddings.Usage(3, 4), back.usage());
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        buf.write(0x12);
        buf.write(body.length);
        buf.write(body);
        buf.write(0x1A);
        buf.write(group.length + 2);
        buf.write(group);
        buf.write(new byte[] {0x08, 0x05});
        back = ProtobufCodec.decodeResponse(buf.toByteArray());
        assertEquals(T, back.tensor());
        assertEquals(new Embeddings.Usage(5, 0), back.usage());

        DensewireException e = fails(Category.MALFORMED, concat(new byte[] {0x5B, 0x08, 0x07, 0x64}, plain)); // end of group 12
        assertEquals(3, e.offset().getAsLong());
        e = fails(Category.TRUNCATED, new byte[] {0x5B, 0x08, 0x07}); // no end tag
        assertEquals(3, e.offset().getAsLong());
        byte[] deep = new byte[200];
        Arrays.fill(deep, 0, 100, (byte) 0x5B);
        Arrays.fill(deep, 100, 200, (byte) 0x5C);
        e = fails(Category.MALFORMED, deep);
        assertTrue(e.getMessage().contains("nested too deeply"), e.getMessage());
        assertEquals(64, e.offset().getAsLong()); // the 65th start tag
        byte[] shallow = new byte[128]; // 64 levels are fine
        Arrays.fill(shallow, 0, 64, (byte) 0x5B);
        Arrays.fill(shallow, 64, 128, (byte) 0x5C);
        assertEquals(T, ProtobufCodec.decodeTensor(concat(shallow, plain)));
        e = fails(Category.MALFORMED, concat(new byte[] {0x5C}, plain)); // a lone end-group tag
        assertEquals(0, e.offset().getAsLong());
        e = fails(Category.MALFORMED, concat(plain, new byte[] {0x5E})); // wire type 6
        assertEquals(plain.length, e.offset().getAsLong());
        e = fails(Category.MALFORMED, concat(plain, new byte[] {0x5F})); // wire type 7
        assertEquals(plain.length, e.offset().getAsLong());
        e = fails(Category.MALFORMED, concat(plain, new byte[] {0x1B, 0x1C})); // data (a known field) as a group
        assertTrue(e.getMessage().contains("wire type 3"), e.getMessage());
        assertEquals(plain.length, e.offset().getAsLong());
    }
}
