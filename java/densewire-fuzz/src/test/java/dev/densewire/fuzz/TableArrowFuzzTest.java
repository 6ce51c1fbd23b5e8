package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Table;
import dev.densewire.arrow.ArrowTables;

/** Arrow tables (SPEC.md 15.7): decode any bytes; what decodes re-encodes to the same table. */
class TableArrowFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Table t = Fuzzing.decodes(() -> ArrowTables.decode(body));
        if (t != null) {
            Fuzzing.same(t, ArrowTables.decode(ArrowTables.encode(t)));
        }
    }
}
