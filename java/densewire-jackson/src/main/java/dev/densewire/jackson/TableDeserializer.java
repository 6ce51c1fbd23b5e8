package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.deser.std.StdDeserializer;
import dev.densewire.DensewireException;
import dev.densewire.Table;
import dev.densewire.TableSchema;
import java.io.IOException;

/**
 * Reads a {@link Table} from any of the three JSON layouts of SPEC.md section 15.3, wherever it sits in a
 * document: the rows and columns layouts (a JSON object, told apart by {@code rows}: an array or a count), and
 * the objects layout (an array of row objects) when the reader carries the columns as the attribute
 * {@link TableSchema}{@code .class}:
 *
 * <pre>{@code
 * ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());
 * Table t = mapper.readValue(columnsJson, Table.class);
 * Table objects = mapper.readerFor(Table.class)
 *         .withAttribute(TableSchema.class, TableSchema.fromHeaders(headers::get)).readValue(objectsJson);
 * }</pre>
 *
 * A value that does not decode fails with a {@link DensewireJsonException} carrying the category and the
 * table's own path of the value ({@code rows[3][1]}).
 */
final class TableDeserializer extends StdDeserializer<Table> {
    private static final long serialVersionUID = 1L;

    TableDeserializer() {
        super(Table.class);
    }

    @Override
    public Table deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
        try {
            if (p.currentToken() == JsonToken.START_ARRAY) {
                Object schema = ctxt.getAttribute(TableSchema.class);
                if (!(schema instanceof TableSchema)) {
                    return (Table) ctxt.handleUnexpectedToken(Table.class, p.currentToken(), p,
                            "a JSON objects table (an array of rows) needs its columns: read it with the attribute "
                                    + "TableSchema.class set to the Densewire-Columns of the response");
                }
                TableSchema s = (TableSchema) schema;
                return new TableJsonReader(p).objects(s.name(), s.columns());
            }
            return new TableJsonReader(p).described(null);
        } catch (DensewireException e) {
            throw new TableJsonException(p, e);
        }
    }

    /** A table error as a Jackson exception that keeps the table's own path of the value. */
    static final class TableJsonException extends DensewireJsonException {
        private static final long serialVersionUID = 1L;

        TableJsonException(JsonParser p, DensewireException error) {
            super(p, error, null, Table.class);
        }

        @Override
        public DensewireException toDensewireException() {
            return densewireError();
        }
    }
}
