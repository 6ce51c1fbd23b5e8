package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Embeddings;
import dev.densewire.ProtobufCodec;
import dev.densewire.Tensor;

/** Protobuf tensor bodies (SPEC.md 9): any bytes as a Tensor and as an EmbeddingsResponse; round trips. */
class TensorProtobufFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Tensor t = Fuzzing.decodes(() -> ProtobufCodec.decodeTensor(body));
        if (t != null) {
            Fuzzing.same(t, ProtobufCodec.decodeTensor(ProtobufCodec.encodeTensor(t)));
        }
        Embeddings e = Fuzzing.decodes(() -> ProtobufCodec.decodeResponse(body));
        if (e != null) {
            Fuzzing.same(e.tensor(), ProtobufCodec.decodeResponse(ProtobufCodec.encodeResponse(e)).tensor());
        }
    }
}
