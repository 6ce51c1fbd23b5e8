package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.ser.std.StdSerializer;
import java.io.IOException;

/** Writes an envelope's {@code embedding} back as it was read: a string, or an array of numbers. */
final class RawEmbeddingSerializer extends StdSerializer<Object> {
    private static final long serialVersionUID = 1L;

    RawEmbeddingSerializer() {
        super(Object.class);
    }

    @Override
    public void serialize(Object value, JsonGenerator gen, SerializerProvider provider) throws IOException {
        if (value instanceof double[]) {
            double[] v = (double[]) value;
            gen.writeArray(v, 0, v.length);
        } else if (value instanceof String) {
            gen.writeString((String) value);
        } else {
            gen.writeNull();
        }
    }
}
