package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Endianness;
import dev.densewire.PgCopy;
import dev.densewire.Tensor;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The cases of testdata/golden/pgcopy.json (SPEC.md section 16.3): writing the input gives the stream byte for
 * byte, reading the stream gives the values and ids; the invalid cases fail with their category, offset and field.
 */
final class GoldenPgCopy {
    private GoldenPgCopy() {
    }

    static PgCopy.Columns columns(JsonNode c) {
        JsonNode cols = c.get("columns");
        JsonNode vec = cols.get(cols.size() - 1);
        PgCopy.Columns out = PgCopy.Columns.of(PgCopy.VectorType.fromSqlName(vec.get("type").asText()), vec.get("name").asText());
        if (cols.size() == 2) {
            out = out.withId(PgCopy.IdType.fromSqlName(cols.get(0).get("type").asText()), cols.get(0).get("name").asText());
        }
        return out;
    }

    /** The case's ids as the Java values a writer takes (BigInteger for int8/int4, so range checks are exercised). */
    static List<Object> ids(JsonNode c, PgCopy.Columns cols) {
        if (!c.has("ids")) {
            return null;
        }
        List<Object> out = new ArrayList<>();
        for (JsonNode v : c.get("ids")) {
            if (v.isNull()) {
                out.add(null);
            } else if (cols.idType() == PgCopy.IdType.INT8 || cols.idType() == PgCopy.IdType.INT4) {
                out.add(new BigInteger(v.asText()));
            } else if (cols.idType() == PgCopy.IdType.UUID) {
                out.add(UUID.fromString(v.asText()));
            } else {
                out.add(v.asText());
            }
        }
        return out;
    }

    static void run(JsonNode c) {
        String id = Golden.id(c);
        PgCopy.Columns cols = columns(c);
        if (id.startsWith("invalid.pgcopy_encode.")) {
            DensewireException e = assertThrows(DensewireException.class,
                    () -> PgCopy.encode(Golden.tensor(c), cols, ids(c, cols)));
            assertEquals(c.get("error").asText(), e.category().code(), e.getMessage());
            assertEquals(c.get("field").asText(), e.field().orElse(null), e.getMessage());
            return;
        }
        if (id.startsWith("invalid.pgcopy.")) {
            DensewireException e = assertThrows(DensewireException.class,
                    () -> PgCopy.decode(Golden.hex(c.get("input_hex").asText()), cols));
            assertEquals(c.get("error").asText(), e.category().code(), e.getMessage());
            assertEquals(c.get("offset").asLong(), e.offset().orElse(-1), "offset: " + e.getMessage());
            if (c.has("field")) {
                assertEquals(c.get("field").asText(), e.field().orElse(null), "field: " + e.getMessage());
            }
            return;
        }
        String expected = c.get("encoded_hex").asText();
        List<Object> ids = ids(c, cols);
        assertEquals(expected, Golden.hex(PgCopy.encode(Golden.tensor(c), cols, ids)), "the stream written");

        JsonNode shape = c.get("shape");
        PgCopy.Data got = PgCopy.decode(java.nio.ByteBuffer.wrap(Golden.hex(expected)), cols, shape.get(1).asInt());
        Dtype valueDtype = Dtype.fromWireName(c.get("value_dtype").asText());
        Tensor want = Tensor.of(valueDtype, shape.get(0).asInt(), shape.get(1).asInt(),
                Golden.itemsLittleEndian(c.get("values"), valueDtype));
        assertEquals(Golden.hex(want.toByteArray(Endianness.BIG)), Golden.hex(got.tensor().toByteArray(Endianness.BIG)),
                "the values read");
        assertEquals(want, got.tensor());
        if (ids == null) {
            assertNull(got.ids());
        } else {
            List<String> texts = new ArrayList<>();
            got.ids().forEach(v -> texts.add(v == null ? null : v.toString()));
            List<String> wantIds = new ArrayList<>();
            c.get("ids").forEach(v -> wantIds.add(v.isNull() ? null : v.asText()));
            assertEquals(wantIds, texts, "the ids read");
            for (Object v : got.ids()) {
                if (v != null) {
                    assertEquals(switch (cols.idType()) {
                        case INT8 -> Long.class;
                        case INT4 -> Integer.class;
                        case TEXT -> String.class;
                        case UUID -> UUID.class;
                    }, v.getClass());
                }
            }
        }
    }
}
