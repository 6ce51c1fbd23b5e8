package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.DensewireException;
import dev.densewire.PgCopy;
import java.util.Arrays;

/**
 * PostgreSQL binary COPY streams (SPEC.md 16). Input: the id column's type ({@code int8}, {@code int4},
 * {@code text}, {@code uuid} or {@code -} for none) and the vector column's type, separated by a space, a line
 * feed, the stream. What decodes and can be written again (pgvector refuses NaN, infinities and some sizes a reader
 * accepts: {@code non_finite} or {@code invalid_field}) decodes again to the same vectors and ids.
 */
class PgCopyFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        String[] types = in.line().split(" ");
        PgCopy.Columns cols;
        try {
            cols = PgCopy.Columns.of(PgCopy.VectorType.fromSqlName(types.length == 2 ? types[1] : "vector"));
            if (types.length == 2 && !types[0].equals("-")) {
                cols = cols.withId(PgCopy.IdType.fromSqlName(types[0]), "id");
            }
        } catch (DensewireException e) {
            return; // not a column list: the line is not a target input
        }
        PgCopy.Columns columns = cols;
        PgCopy.Data d = Fuzzing.decodes(() -> PgCopy.decode(in.rest(), columns));
        if (d == null) {
            return;
        }
        byte[] again;
        try {
            again = PgCopy.encode(d.tensor(), columns, d.ids());
        } catch (DensewireException e) {
            if (e.category() != DensewireException.Category.NON_FINITE
                    && e.category() != DensewireException.Category.INVALID_FIELD) {
                throw new AssertionError("a decoded stream cannot be written again", e);
            }
            return;
        }
        PgCopy.Data back = PgCopy.decode(again, columns);
        Fuzzing.same(Arrays.toString(d.tensor().toFloatArray()), Arrays.toString(back.tensor().toFloatArray()));
        Fuzzing.same(d.tensor().rows() + "x" + d.tensor().dims(), back.tensor().rows() + "x" + back.tensor().dims());
        Fuzzing.same(String.valueOf(d.ids()), String.valueOf(back.ids()));
    }
}
