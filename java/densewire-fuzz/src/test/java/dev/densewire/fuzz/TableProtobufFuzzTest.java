package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.Table;
import dev.densewire.TableProtobuf;

/** Protobuf tables (SPEC.md 15.6): decode any bytes; what decodes re-encodes, plain and split, to the same table. */
class TableProtobufFuzzTest {
    @FuzzTest
    void fuzz(byte[] body) {
        Table t = Fuzzing.decodes(() -> TableProtobuf.decode(body));
        if (t != null) {
            for (TableProtobuf.Encoding e : TableProtobuf.Encoding.values()) {
                Fuzzing.same(t, TableProtobuf.decode(TableProtobuf.encode(t, e)));
            }
        }
    }
}
