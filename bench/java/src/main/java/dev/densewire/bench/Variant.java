package dev.densewire.bench;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.StreamWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import com.fasterxml.jackson.databind.ObjectWriter;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.densewire.Endianness;
import dev.densewire.jackson.DensewireModule;
import java.util.List;

/** The five ways of moving the rows: a reader, a writer and the payload of each. */
public enum Variant {
    JACKSON(new ObjectMapper(), false),
    JACKSON_FAST(JsonMapper.builder().enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER)
            .enable(StreamWriteFeature.USE_FAST_DOUBLE_WRITER).build(), false),
    JACKSON_BINARY(new ObjectMapper(), true),
    DENSEWIRE_LE(JsonMapper.builder().addModule(new DensewireModule(Endianness.LITTLE)).build(), false),
    DENSEWIRE_BE(JsonMapper.builder().addModule(new DensewireModule(Endianness.BIG)).build(), false);

    final ObjectReader reader;
    final ObjectWriter writer;
    final boolean nativeShape;

    Variant(ObjectMapper mapper, boolean nativeShape) {
        this.nativeShape = nativeShape;
        Class<?> type = nativeShape ? Rows.NativeRow.class : Rows.Row.class;
        this.reader = mapper.readerForListOf(type);
        this.writer = mapper.writerFor(mapper.getTypeFactory().constructCollectionType(List.class, type));
    }

    Object payload(List<Rows.Row> rows) {
        return nativeShape ? Rows.nativeRows(rows) : rows;
    }
}
