package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

class RaggedTest {
    private static RaggedEmbeddings ragged() {
        Tensor rows = Tensor.ofFloats(3, 2, new float[] {1f, 2f, 3f, 4f, 0.5f, -1.5f});
        return new RaggedEmbeddings(RaggedTensor.of(new int[] {0, 2, 2, 3}, rows), "m", new Embeddings.Usage(3, 3));
    }

    private static SparseEmbeddings sparse() {
        Tensor values = Tensor.ofFloats(1, 3, new float[] {0.5f, 0.25f, 1.5f});
        return new SparseEmbeddings(SparseTensor.of(30522, new int[] {0, 2, 2, 3}, new int[] {1, 7, 30521}, values), "m",
                new Embeddings.Usage(5, 5));
    }

    @Test
    void matricesAreViewsOfOneBuffer() {
        byte[] body = RaggedMsgpack.encode(ragged());
        RaggedTensor t = RaggedMsgpack.decodeRagged(body).tensor();
        assertEquals(0, t.matrix(1).rows());
        assertArrayEquals(new float[] {0.5f, -1.5f}, t.matrix(2).toFloatArray());
        int at = -1; // -1.5f, the last item of the rows: 00 00 c0 bf
        for (int i = 0; i + 4 <= body.length && at < 0; i++) {
            if (body[i] == 0 && body[i + 1] == 0 && body[i + 2] == (byte) 0xC0 && body[i + 3] == (byte) 0xBF) {
                at = i;
            }
        }
        body[at + 3] = 0x3F; // 1.5f: the matrix sees the change, it is a view of the body
        assertEquals(1.5f, t.matrix(2).toFloatArray()[1]);
    }

    @Test
    void everyBinaryFormatRoundTrips() {
        RaggedEmbeddings r = ragged();
        assertEquals(r, RaggedMsgpack.decodeRagged(RaggedMsgpack.encode(r)));
        assertEquals(r, RaggedProtobuf.decodeRagged(RaggedProtobuf.encodeResponse(r), true));
        assertEquals(r, RaggedRaw.decodeRagged(RaggedRaw.headers(r), RaggedRaw.encode(r)));
        SparseEmbeddings s = sparse();
        assertEquals(s, RaggedMsgpack.decodeSparse(RaggedMsgpack.encode(s)));
        assertEquals(s, RaggedProtobuf.decodeSparse(RaggedProtobuf.encodeResponse(s), true));
        assertEquals(s, RaggedRaw.decodeSparse(RaggedRaw.headers(s), RaggedRaw.encode(s)));
        assertEquals(r.tensor(), RaggedTensor.ofMatrices(Dtype.FLOAT32, 2,
                List.of(r.tensor().matrix(0), r.tensor().matrix(1), r.tensor().matrix(2))));
    }

    @Test
    void offsetsAndIndicesFailWithTheirOffsets() {
        DensewireException e = assertThrows(DensewireException.class, () -> Ragged.checkOffsets(new int[] {0, 2, 1}, 100));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals(108, e.offset().getAsLong());
        ByteBuffer idx = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        idx.asIntBuffer().put(new int[] {1, 5, 3, 2});
        Tensor values = Tensor.ofFloats(1, 4, new float[] {1f, 1f, 1f, 1f});
        // vectors [1, 5] and [3, 2]: the 2 after 3 breaks the order (entry 3), not the 3 after 5 (a new vector)
        e = assertThrows(DensewireException.class,
                () -> Ragged.sparse(Dtype.FLOAT32, 10, new int[] {0, 2, 4}, idx, values.data(), 40, 0));
        assertEquals(52, e.offset().getAsLong());
        assertEquals("indices", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> Ragged.checkVocabulary(0, "shape"));
        assertEquals("shape", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> SparseTensor.of(10, new int[] {0, 1}, new int[] {1},
                Tensor.of(Dtype.INT8, 1, 1, new byte[] {1})));
        assertEquals("dtype", e.field().orElse(null));
        e = assertThrows(DensewireException.class, () -> RaggedRaw.decodeRagged(RaggedRaw.headers(sparse()),
                RaggedRaw.encode(sparse())));
        assertEquals(RaggedRaw.KIND, e.field().orElse(null));
    }
}
