package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class TableCsvTest {
    private static Table decode(String text, ColumnSpec... columns) {
        return TableCsv.decode(text.getBytes(StandardCharsets.UTF_8), "t", List.of(columns));
    }

    @Test
    void everyTypeRoundTrips() {
        Table t = TablesTest.everyType();
        assertEquals(t, TableCsv.decode(TableCsv.encode(t), t.name(), t.schema()));
    }

    @Test
    void fieldsAreQuotedWhenTheyMustBe() {
        Table t = Table.of("t", 5, Column.strings("s", List.of("", " lead", "trail ", "\uFEFFbom", "a\"b")));
        String csv = new String(TableCsv.encode(t), StandardCharsets.UTF_8);
        assertEquals("s\r\n\"\"\r\n\" lead\"\r\n\"trail \"\r\n\"\uFEFFbom\"\r\n\"a\"\"b\"\r\n", csv);
        assertEquals(t, TableCsv.decode(csv.getBytes(StandardCharsets.UTF_8), "t", t.schema()));
    }

    @Test
    void lfLineEndsAndAByteOrderMarkAreRead() {
        Table t = decode("\uFEFFa,b\n1,\"x\ny\"\n2,z", ColumnSpec.of("a", ColumnType.INT64), ColumnSpec.of("b", ColumnType.STRING));
        assertEquals(2, t.rows());
        assertEquals(List.of("x\ny", "z"), t.column("b").strings());
    }

    @Test
    void aTableWithoutColumnsRoundTrips() {
        Table t = new Table("t", 3, List.of());
        assertEquals("\r\n\r\n\r\n\r\n", new String(TableCsv.encode(t), StandardCharsets.UTF_8));
        assertEquals(t, TableCsv.decode(TableCsv.encode(t), "t", List.of()));
    }

    @Test
    void nonFiniteSpellingsAndVectors() {
        Table t = decode("f,v\r\nNaN,\"[Infinity, -Infinity,1e-46]\"\r\n", ColumnSpec.of("f", ColumnType.FLOAT64), ColumnSpec.vector("v", 3));
        assertEquals(Double.doubleToRawLongBits(Double.NaN), Double.doubleToRawLongBits(t.column("f").float64s().get(0)));
        assertEquals(Float.POSITIVE_INFINITY, t.column("v").vectors().get(0));
        assertEquals(0.0f, t.column("v").vectors().get(2));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "int32|a\\r\\n2147483648\\r\\n|invalid_field|line 2, a",
        "int32|a\\r\\n١\\r\\n|invalid_field|line 2, a",
        "int64|a\\r\\n1.0\\r\\n|invalid_field|line 2, a",
        "float64|a\\r\\ninf\\r\\n|invalid_field|line 2, a",
        "float64|a\\r\\n1e309\\r\\n|invalid_field|line 2, a",
        "float64|a\\r\\n0x1p3\\r\\n|invalid_field|line 2, a",
        "float32[2]|a\\r\\n\"[1,2,3]\"\\r\\n|invalid_field|line 2, a",
        "float32[2]|a\\r\\n\"[1]\"\\r\\n|invalid_field|line 2, a",
        "float32[2]|a\\r\\n\"[1,4e38]\"\\r\\n|invalid_field|line 2, a",
        "uuid|a\\r\\nnot-a-uuid\\r\\n|invalid_field|line 2, a",
        "string|a\\r\\nx\"y\\r\\n|malformed|",
        "string|a\\r\\n\"x\"y\\r\\n|malformed|",
        "string|b\\r\\nx\\r\\n|shape_mismatch|header",
        "string|a\\r\\nx,y\\r\\n|shape_mismatch|line 2",
    })
    void badFieldsNameTheLineAndColumn(String type, String text, String category, String field) {
        String body = text.replace("\\r\\n", "\r\n"); // written \r\n above: CsvSource reads real line breaks as rows
        DensewireException e = assertThrows(DensewireException.class, () -> decode(body, ColumnSpec.parse("a", type)));
        assertEquals(category, e.category().code(), e.getMessage());
        assertEquals(field, e.field().orElse(null), e.getMessage());
    }

    @Test
    void invalidUtf8IsMalformed() {
        byte[] body = {'a', '\r', '\n', (byte) 0xC3, 0x28, '\r', '\n'};
        DensewireException e = assertThrows(DensewireException.class,
                () -> TableCsv.decode(body, "t", List.of(ColumnSpec.of("a", ColumnType.STRING))));
        assertEquals(Category.MALFORMED, e.category());
        assertEquals(3, e.offset().orElse(-1));
    }
}
