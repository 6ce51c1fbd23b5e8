package dev.densewire.client;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import dev.densewire.TableCsv;
import dev.densewire.TableFormat;
import dev.densewire.TableMsgpack;
import dev.densewire.TableProtobuf;
import dev.densewire.TableSchema;
import dev.densewire.jackson.TableJson;
import java.util.function.Function;

/**
 * Every table format (SPEC.md section 15) behind one entry point: a response body decoded by its
 * {@code Content-Type}, typed by {@code Densewire-Columns} where the format carries no types. Arrow needs
 * densewire-arrow on the class path.
 */
public final class TableBodies {
    private TableBodies() {
    }

    /**
     * Decodes a body of format {@code f}. JSON objects and CSV take their columns (and name) from {@code schema};
     * the other formats carry their own (pass null).
     */
    public static Table decode(TableFormat f, TableSchema schema, byte[] body) {
        if (f.needsSchema() && schema == null) {
            throw new DensewireException(Category.INVALID_FIELD, f + " tables carry no types: the columns come from "
                    + "the Densewire-Columns header", -1, "Densewire-Columns");
        }
        switch (f) {
            case JSON:
            case JSON_ROWS:
            case JSON_COLUMNS:
                return TableJson.decode(f, body, schema);
            case CSV:
                return TableCsv.decode(body, schema.name(), schema.columns());
            case MSGPACK:
                return TableMsgpack.decode(body);
            case PROTOBUF:
                return TableProtobuf.decode(body);
            default:
                return ArrowSupport.decodeTable(body);
        }
    }

    /**
     * Decodes a response body by its {@code Content-Type} and the headers of SPEC.md section 15.2 ({@code header}: a
     * header name to its value, null when absent).
     *
     * @throws DensewireException {@code unsupported_media_type} on {@code Content-Type} for a type that is no table
     *                            format; the errors of the format's decoder
     */
    public static Table decode(Function<String, String> header, byte[] body) {
        String contentType = header.apply("Content-Type");
        TableFormat f = TableFormat.fromContentType(contentType).orElseThrow(() -> new DensewireException(
                Category.UNSUPPORTED_MEDIA_TYPE, "the Content-Type " + contentType + " is no table format", -1, "Content-Type"));
        return decode(f, f.needsSchema() ? TableSchema.fromHeaders(header) : null, body);
    }

    /** The table in format {@code f} (Protobuf with every column plain but the server's split floats: see {@link TableProtobuf}). */
    public static byte[] encode(TableFormat f, Table t) {
        switch (f) {
            case JSON:
            case JSON_ROWS:
            case JSON_COLUMNS:
                return TableJson.encode(t, f);
            case CSV:
                return TableCsv.encode(t);
            case MSGPACK:
                return TableMsgpack.encode(t);
            case PROTOBUF:
                return TableProtobuf.encode(t);
            default:
                return ArrowSupport.encodeTable(t);
        }
    }
}
