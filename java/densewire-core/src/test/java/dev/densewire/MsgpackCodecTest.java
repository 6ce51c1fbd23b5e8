package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import java.io.IOException;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/** The hand-written MessagePack codec against msgpack-java, the reference Java implementation. */
class MsgpackCodecTest {
    private static Tensor random(int n, int d, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] v = new float[n * d];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) r.nextGaussian();
        }
        return Tensor.ofFloats(n, d, v);
    }

    @Test
    void msgpackJavaReadsWhatWeWrite() throws IOException {
        for (int[] shape : new int[][] {{0, 4}, {1, 1}, {2, 3}, {3, 100}, {70, 384}, {2, 20000}}) {
            Tensor t = random(shape[0], shape[1], shape[1]);
            String model = "m".repeat(shape[1] % 300);
            byte[] body = MsgpackCodec.encode(new Embeddings(t, model, new Embeddings.Usage(shape[0], 70000L * shape[0])));
            try (MessageUnpacker u = MessagePack.newDefaultUnpacker(body)) {
                assertEquals(5, u.unpackMapHeader());
                assertEquals("model", u.unpackString());
                assertEquals(model, u.unpackString());
                assertEquals("dtype", u.unpackString());
                assertEquals("float32", u.unpackString());
                assertEquals("shape", u.unpackString());
                assertEquals(2, u.unpackArrayHeader());
                assertEquals(shape[0], u.unpackInt());
                assertEquals(shape[1], u.unpackInt());
                assertEquals("data", u.unpackString());
                byte[] data = u.readPayload(u.unpackBinaryHeader());
                assertArrayEquals(t.toByteArray(), data);
                assertEquals("usage", u.unpackString());
                assertEquals(2, u.unpackMapHeader());
                assertEquals("prompt_tokens", u.unpackString());
                assertEquals(shape[0], u.unpackLong());
                assertEquals("total_tokens", u.unpackString());
                assertEquals(70000L * shape[0], u.unpackLong());
                assertEquals(false, u.hasNext());
            }
        }
    }

    @Test
    void weReadWhatMsgpackJavaWritesInAnyOrderAndWidth() throws IOException {
        Tensor t = random(3, 5, 9);
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packMapHeader(6);
            p.packString("extra").packArrayHeader(2).packNil().packMapHeader(1).packString("k").packDouble(1.5);
            p.packString("data").packBinaryHeader(t.byteLength()).writePayload(t.toByteArray());
            p.packString("shape").packArrayHeader(2);
            p.addPayload(new byte[] {(byte) 0xCF, 0, 0, 0, 0, 0, 0, 0, 3}); // uint64 3
            p.addPayload(new byte[] {(byte) 0xD2, 0, 0, 0, 5}); // int32 5
            p.packString("usage").packMapHeader(1).packString("total_tokens").packInt(9);
            p.packString("dtype").packString("float32");
            p.packString("model").packNil();
            Embeddings e = MsgpackCodec.decode(p.toByteArray());
            assertEquals(t, e.tensor());
            assertEquals(null, e.model());
            assertEquals(new Embeddings.Usage(0, 9), e.usage());
        }
    }

    @Test
    void theTensorIsAViewOfTheBody() {
        Tensor t = Tensor.ofFloats(1, 2, new float[] {1f, 2f});
        byte[] body = MsgpackCodec.encode(t);
        Tensor view = MsgpackCodec.decode(body).tensor();
        body[body.length - 1] = 0x41; // 2.0f = 00 00 00 40 -> 00 00 00 41 (8.0f)
        assertEquals(8f, view.asFloatBuffer().get(1));
    }

    @Test
    void everyTruncationIsTruncatedAtTheBodyLength() {
        byte[] body = MsgpackCodec.encode(new Embeddings(random(2, 3, 1), "model", new Embeddings.Usage(1, 2)));
        for (int len = 1; len < body.length; len++) {
            final int n = len;
            DensewireException e = assertThrows(DensewireException.class, () -> MsgpackCodec.decode(Arrays.copyOf(body, n)));
            assertEquals(Category.TRUNCATED, e.category(), "length " + n);
            assertEquals(n, e.offset().getAsLong());
        }
        assertEquals(0, assertThrows(DensewireException.class, () -> MsgpackCodec.decode(new byte[0])).offset().getAsLong());
    }

    @Test
    void wrongKindsAreMalformedOrInvalidField() {
        assertEquals(Category.MALFORMED, assertThrows(DensewireException.class,
                () -> MsgpackCodec.decode(new byte[] {(byte) 0x81, 0x01, 0x02})).category()); // int key
        DensewireException nested = assertThrows(DensewireException.class,
                () -> MsgpackCodec.decode(new byte[] {(byte) 0x81, (byte) 0xA1, 'x', (byte) 0xC1}));
        assertEquals(Category.MALFORMED, nested.category());
        assertEquals(3, nested.offset().getAsLong());
        DensewireException negative = assertThrows(DensewireException.class, () -> MsgpackCodec.decode(
                new byte[] {(byte) 0x83, (byte) 0xA5, 'd', 't', 'y', 'p', 'e', (byte) 0xA4, 'i', 'n', 't', '8', (byte) 0xA5,
                    's', 'h', 'a', 'p', 'e', (byte) 0x92, 0x01, (byte) 0xFF, (byte) 0xA4, 'd', 'a', 't', 'a', (byte) 0xC4, 0}));
        assertEquals(Category.INVALID_FIELD, negative.category());
        assertEquals("shape", negative.field().orElseThrow());
    }
}
