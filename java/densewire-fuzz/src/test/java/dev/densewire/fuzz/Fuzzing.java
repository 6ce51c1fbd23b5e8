package dev.densewire.fuzz;

import dev.densewire.DensewireException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The property every fuzz target checks: a decoder given any bytes returns a value or throws a
 * {@link DensewireException} (a category of SPEC.md section 11 with a message), never another exception (an index
 * out of bounds, a null pointer, an out-of-memory error, a stack overflow); what it returns survives its encoder.
 * Targets that need more than a body (headers, a dtype and shape) read them from the input's first line (see
 * seeds.py, which writes the golden corpus in that form).
 */
final class Fuzzing {
    private Fuzzing() {
    }

    /** The decoded value, or null when the decoder refused the input with a DensewireException. */
    static <T> T decodes(Supplier<T> decode) {
        try {
            return Objects.requireNonNull(decode.get(), "a decoder returned null");
        } catch (DensewireException e) {
            if (e.category() == null || e.detail() == null || e.detail().isEmpty()) {
                throw new AssertionError("an error without a category or message", e);
            }
            return null;
        }
    }

    /** Equal values, or a finding. */
    static void same(Object want, Object got) {
        if (!want.equals(got)) {
            throw new AssertionError("round trip changed the value:\n want " + want + "\n got  " + got);
        }
    }

    /** An input split at its first line feed: the line (UTF-8) and the bytes after it. */
    record Split(String line, byte[] rest) {
        static Split of(byte[] input) {
            int nl = 0;
            while (nl < input.length && input[nl] != '\n') {
                nl++;
            }
            return new Split(new String(input, 0, nl, StandardCharsets.UTF_8),
                    nl < input.length ? Arrays.copyOfRange(input, nl + 1, input.length) : new byte[0]);
        }
    }
}
