package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Embeddings;
import dev.densewire.RawCodec;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Raw bodies (SPEC.md 7). Input: the headers as {@code name: value} pairs joined by {@code ;}, a line feed, the
 * body. What decodes re-encodes (body and headers) to the same embeddings.
 */
class TensorRawFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        Map<String, String> headers = new LinkedHashMap<>();
        for (String pair : in.line().split(";")) {
            int colon = pair.indexOf(':');
            if (colon > 0) {
                headers.put(pair.substring(0, colon).trim(), pair.substring(colon + 1).trim());
            }
        }
        Embeddings e = Fuzzing.decodes(() -> RawCodec.decode(headers, in.rest()));
        if (e != null) {
            Fuzzing.same(e, RawCodec.decode(RawCodec.headers(e), RawCodec.encode(e.tensor())));
        }
    }
}
