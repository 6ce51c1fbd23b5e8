package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.ByteString;
import dev.densewire.DensewireException.Category;
import dev.densewire.proto.ColumnEncoding;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Our Protobuf table codec against protobuf-java classes generated from table.proto. */
class TableProtobufTest {
    @ParameterizedTest
    @EnumSource(TableProtobuf.Encoding.class)
    void officialParserReadsWhatWeWriteByteForByte(TableProtobuf.Encoding encoding) throws Exception {
        Table t = TablesTest.everyType();
        byte[] ours = TableProtobuf.encode(t, encoding);
        dev.densewire.proto.Table msg = dev.densewire.proto.Table.parseFrom(ours);
        assertArrayEquals(ours, msg.toByteArray());
        assertEquals(t.name(), msg.getName());
        assertEquals(t.rows(), msg.getRows());
        assertEquals(List.of(1, 0, 1), List.of(msg.getColumns(0).getData().byteAt(0) & 1, msg.getColumns(0).getData().byteAt(1) & 1,
                msg.getColumns(0).getData().byteAt(2) & 1));
        assertEquals(encoding == TableProtobuf.Encoding.BYTE_STREAM_SPLIT ? ColumnEncoding.COLUMN_ENCODING_BYTE_STREAM_SPLIT
                : ColumnEncoding.COLUMN_ENCODING_PLAIN, msg.getColumns(4).getEncoding());
        assertEquals(ColumnEncoding.COLUMN_ENCODING_PLAIN, msg.getColumns(0).getEncoding()); // bool stays plain
        assertEquals(List.of(5, 20, 0), msg.getColumns(5).getLengthsList());
        assertEquals(t, TableProtobuf.decode(ours));
    }

    @Test
    void unknownFieldsAndUnpackedLengthsAreRead() {
        dev.densewire.proto.Table msg = dev.densewire.proto.Table.newBuilder().setName("t").setRows(2)
                .addColumns(dev.densewire.proto.Column.newBuilder().setName("s").setTypeValue(6)
                        .setData(ByteString.copyFromUtf8("héllo")).addLengths(3).addLengths(3))
                .build();
        byte[] packed = msg.toByteArray();
        assertEquals(List.of("hé", "llo"), TableProtobuf.decode(packed).column("s").strings());
        // the same column with lengths unpacked (field 6 as two varints) and an unknown field 9 in the column
        byte[] unpacked = Golden.hex("0a017410021a130a017310062a0668c3a96c6c6f30033003480a");
        assertEquals(List.of("hé", "llo"), TableProtobuf.decode(unpacked).column("s").strings());
    }

    @Test
    void aLengthSplittingACharacterIsMalformed() {
        byte[] body = Golden.hex("10021a0e0a017310062a03c3a96132020102");
        DensewireException e = assertThrows(DensewireException.class, () -> TableProtobuf.decode(body));
        assertEquals(Category.MALFORMED, e.category());
        assertEquals("columns[0].data", e.field().orElse(null));
    }

    @Test
    void lengthsOnAFixedWidthColumnAreInvalid() {
        byte[] body = Golden.hex("10011a0e0a017810022a0401000000320101");
        DensewireException e = assertThrows(DensewireException.class, () -> TableProtobuf.decode(body));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("columns[0].lengths", e.field().orElse(null));
    }

    /** Hex helpers for the hand-written bodies. */
    static final class Golden {
        static byte[] hex(String h) {
            return java.util.HexFormat.of().parseHex(h);
        }
    }
}
