package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.DensewireException;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.jackson.DensewireJson;

/**
 * The JSON embeddings envelope (SPEC.md 6): any bytes as a response and as a request. A decoded response written
 * back as Base64 rows reads to the same tensor.
 */
class JsonEnvelopeFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Embeddings e = Fuzzing.decodes(() -> DensewireJson.readResponse(body));
        if (e != null) {
            byte[] again;
            try {
                again = DensewireJson.writeResponse(e, EncodingFormat.BASE64, Endianness.LITTLE);
            } catch (DensewireException x) {
                throw new AssertionError("a decoded response does not encode as Base64", x);
            }
            Fuzzing.same(e.tensor(), DensewireJson.readResponse(again).tensor());
        }
        Fuzzing.decodes(() -> DensewireJson.readRequest(body));
    }
}
