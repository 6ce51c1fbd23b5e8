package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.ColumnSpec;
import dev.densewire.DensewireException;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import dev.densewire.TableSchema;
import dev.densewire.Tables;
import dev.densewire.jackson.TableJson;
import java.util.List;

/**
 * The JSON table layouts (SPEC.md 15.3). Input: the layout's format name and, for the objects layout, a space and
 * the Densewire-Columns value; a line feed; the JSON body. What decodes re-encodes to the same table (values read
 * from JSON are finite, so every layout can write them).
 */
class TableJsonFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        String[] head = in.line().split(" ", 2);
        TableFormat layout;
        try {
            layout = TableFormat.fromParamName(head[0]);
        } catch (DensewireException e) {
            layout = TableFormat.JSON_COLUMNS;
        }
        if (layout != TableFormat.JSON && layout != TableFormat.JSON_ROWS && layout != TableFormat.JSON_COLUMNS) {
            layout = TableFormat.JSON_ROWS;
        }
        List<ColumnSpec> columns = head.length > 1 ? Fuzzing.decodes(() -> Tables.parseColumnsHeader(head[1])) : List.of();
        if (columns == null) {
            return;
        }
        TableSchema schema = new TableSchema("t", -1, columns);
        TableFormat f = layout;
        Table t = Fuzzing.decodes(() -> TableJson.decode(f, in.rest(), schema));
        if (t != null) {
            for (TableFormat out : List.of(TableFormat.JSON, TableFormat.JSON_ROWS, TableFormat.JSON_COLUMNS)) {
                Table back = TableJson.decode(out, TableJson.encode(t, out), new TableSchema(t.name(), -1, t.schema()));
                Fuzzing.same(t, back);
            }
        }
    }
}
