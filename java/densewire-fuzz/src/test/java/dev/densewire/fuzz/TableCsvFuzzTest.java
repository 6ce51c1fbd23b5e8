package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.ColumnSpec;
import dev.densewire.Table;
import dev.densewire.TableCsv;
import dev.densewire.Tables;
import java.util.List;

/**
 * CSV tables (SPEC.md 15.4) and the Densewire-Columns header (15.2). Input: the header value, a line feed, the
 * CSV body. What decodes re-encodes to the same table, and the header re-formats to the same columns.
 */
class TableCsvFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        List<ColumnSpec> columns = Fuzzing.decodes(() -> Tables.parseColumnsHeader(in.line()));
        if (columns == null) {
            return;
        }
        Fuzzing.same(columns, Tables.parseColumnsHeader(Tables.formatColumnsHeader(columns)));
        Table t = Fuzzing.decodes(() -> TableCsv.decode(in.rest(), "t", columns));
        if (t != null) {
            Fuzzing.same(t, TableCsv.decode(TableCsv.encode(t), "t", columns));
        }
    }
}
