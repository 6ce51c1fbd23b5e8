package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Table;
import dev.densewire.TableMsgpack;

/** Columnar MessagePack tables (SPEC.md 15.5): decode any bytes; what decodes re-encodes to the same table. */
class TableMsgpackFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Table t = Fuzzing.decodes(() -> TableMsgpack.decode(body));
        if (t != null) {
            Fuzzing.same(t, TableMsgpack.decode(TableMsgpack.encode(t)));
        }
    }
}
