package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.DensewireException;
import dev.densewire.Tensor;
import dev.densewire.jackson.Kserve;
import dev.densewire.jackson.KserveOutput;
import dev.densewire.jackson.KserveResponse;
import java.nio.ByteBuffer;

/**
 * KServe v2 responses (SPEC.md 19.3). Input: the {@code Inference-Header-Content-Length} value (absent when the
 * line is empty), a line feed, the body. What reads has tensors of the size their shape gives and BYTES elements
 * within the body; an error's offset is within the body.
 */
class KserveFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        String length = in.line().isEmpty() ? null : in.line();
        byte[] body = in.rest();
        KserveResponse r;
        try {
            r = Kserve.decode(name -> name.equalsIgnoreCase(Kserve.HEADER_LENGTH) ? length : null, ByteBuffer.wrap(body));
        } catch (DensewireException e) {
            Fuzzing.decodes(() -> {
                throw e; // the category-and-message check
            });
            if (e.offset().isPresent() && e.offset().getAsLong() > body.length) {
                throw new AssertionError("error offset " + e.offset() + " past the " + body.length + "-byte body", e);
            }
            return;
        }
        for (KserveOutput o : r.outputs()) {
            Tensor t = o.tensor();
            if (t != null && (long) t.rows() * t.dtype().rowBytes(t.dims()) != t.byteLength()) {
                throw new AssertionError(o.name() + ": tensor of " + t.byteLength() + " bytes for its shape");
            }
            if (o.elements() != null && o.binary()) {
                long total = o.elements().stream().mapToLong(e -> 4L + e.remaining()).sum();
                if (total > body.length) {
                    throw new AssertionError(o.name() + ": BYTES elements larger than the body");
                }
            }
        }
    }
}
