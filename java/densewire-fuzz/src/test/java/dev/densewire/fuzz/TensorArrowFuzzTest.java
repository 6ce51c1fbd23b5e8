package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Embeddings;
import dev.densewire.arrow.ArrowCodec;

/** Arrow tensor bodies (SPEC.md 10): decode any bytes; what decodes re-encodes to the same tensor. */
class TensorArrowFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Embeddings e = Fuzzing.decodes(() -> ArrowCodec.decode(body));
        if (e != null) {
            Fuzzing.same(e.tensor(), ArrowCodec.decode(ArrowCodec.encode(e)).tensor());
        }
    }
}
