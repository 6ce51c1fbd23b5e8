package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Embeddings;
import dev.densewire.MsgpackCodec;

/** MessagePack tensor bodies (SPEC.md 8): decode any bytes; what decodes re-encodes to the same embeddings. */
class TensorMsgpackFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Embeddings e = Fuzzing.decodes(() -> MsgpackCodec.decode(body));
        if (e != null) {
            Fuzzing.same(e, MsgpackCodec.decode(MsgpackCodec.encode(e)));
        }
    }
}
