package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.exc.InvalidFormatException;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import java.util.List;
import java.util.OptionalLong;

/**
 * A Jackson exception for a vector Jackson could not read (bad Base64 character or padding, a byte length that
 * is not a whole number of items): carries densewire's {@link Category}, the offset within the Base64 string and
 * the JSON path of the property, which Jackson fills in as the exception travels out of nested objects.
 */
public class DensewireJsonException extends InvalidFormatException {
    private static final long serialVersionUID = 1L;

    private final transient DensewireException error;

    public DensewireJsonException(JsonParser p, DensewireException error, Object value, Class<?> targetType) {
        super(p, error.getMessage(), value, targetType);
        this.error = error;
        initCause(error);
    }

    public Category category() {
        return error.category();
    }

    /** Characters into the Base64 string, when the error has a position. */
    public OptionalLong offset() {
        return error.offset();
    }

    /** The underlying densewire error. */
    public DensewireException densewireError() {
        return error;
    }

    /** The JSON path of the property, e.g. {@code rows[3].emb} ({@code $} for a root value). */
    public String jsonPath() {
        return jsonPath(getPath());
    }

    /** A path as densewire writes fields: names joined by dots, array indexes in brackets. */
    static String jsonPath(List<Reference> path) {
        StringBuilder sb = new StringBuilder();
        for (Reference r : path) {
            if (r.getFieldName() != null) {
                if (sb.length() > 0) {
                    sb.append('.');
                }
                sb.append(r.getFieldName());
            } else if (r.getIndex() >= 0) {
                sb.append('[').append(r.getIndex()).append(']');
            }
        }
        return sb.length() == 0 ? "$" : sb.toString();
    }

    /** This error as a {@link DensewireException} placed on its JSON path. */
    public DensewireException toDensewireException() {
        return new DensewireException(error.category(), error.detail(), error.offset().orElse(-1), jsonPath(), this);
    }
}
