package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Base64Codec;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Endianness;
import dev.densewire.Tensor;
import java.nio.charset.StandardCharsets;

/**
 * Strict Base64 vectors (SPEC.md 5). Input: {@code dtype rows dims byteorder}, a line feed, the Base64 text.
 * What decodes re-encodes to the same text.
 */
class TensorBase64FuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        String[] p = in.line().split(" ");
        if (p.length != 4) {
            return;
        }
        Dtype dtype;
        Endianness order;
        int rows;
        int dims;
        try {
            dtype = Dtype.fromWireName(p[0]);
            order = Endianness.fromWireName(p[3]);
            rows = Integer.parseInt(p[1]);
            dims = Integer.parseInt(p[2]);
        } catch (DensewireException | NumberFormatException e) {
            return;
        }
        String text = new String(in.rest(), StandardCharsets.UTF_8);
        Tensor t = Fuzzing.decodes(() -> Base64Codec.decode(text, dtype, rows, dims, order));
        if (t != null) {
            Fuzzing.same(t, Base64Codec.decode(Base64Codec.encode(t, order), dtype, rows, dims, order));
        }
    }
}
