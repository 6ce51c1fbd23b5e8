package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException.Category;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.value.Value;

/** Our MessagePack table codec against msgpack-java. */
class TableMsgpackTest {
    @Test
    void msgpackJavaReadsWhatWeWrite() throws Exception {
        Table t = TablesTest.everyType();
        Value v = MessagePack.newDefaultUnpacker(TableMsgpack.encode(t)).unpackValue();
        assertEquals("every type", v.asMapValue().map().get(MessagePack.newDefaultUnpacker(pack("name")).unpackValue()).asStringValue().asString());
        assertEquals(t, TableMsgpack.decode(TableMsgpack.encode(t)));
    }

    private static byte[] pack(String s) throws Exception {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packString(s);
            return p.toByteArray();
        }
    }

    @Test
    void keysInAnyOrderAndUnknownKeysAreRead() throws Exception {
        byte[] body;
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packMapHeader(4);
            p.packString("columns").packArrayHeader(1);
            p.packMapHeader(4);
            p.packString("data").packArrayHeader(2).packString("a").packString("b");
            p.packString("extra").packNil();
            p.packString("type").packString("string");
            p.packString("name").packString("s");
            p.packString("note").packArrayHeader(1).packInt(1);
            p.packString("rows").packInt(2);
            p.packString("name").packString("t");
            body = p.toByteArray();
        }
        Table t = TableMsgpack.decode(body);
        assertEquals("t", t.name());
        assertEquals(List.of("a", "b"), t.column("s").strings());
    }

    @Test
    void mistypedKeysAreInvalidFields() throws Exception {
        byte[] body;
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packMapHeader(2).packString("rows").packInt(1).packString("columns").packArrayHeader(1);
            p.packMapHeader(3).packString("name").packString("x").packString("type").packString("int32");
            p.packString("data").packArrayHeader(0);
            body = p.toByteArray();
        }
        DensewireException e = assertThrows(DensewireException.class, () -> TableMsgpack.decode(body));
        assertEquals(Category.INVALID_FIELD, e.category());
        assertEquals("columns[0].data", e.field().orElse(null));
        byte[] trailing = java.util.Arrays.copyOf(TableMsgpack.encode(TablesTest.everyType()), TableMsgpack.encode(TablesTest.everyType()).length + 1);
        e = assertThrows(DensewireException.class, () -> TableMsgpack.decode(trailing));
        assertEquals(Category.MALFORMED, e.category());
        assertEquals(trailing.length - 1, e.offset().orElse(-1));
    }
}
