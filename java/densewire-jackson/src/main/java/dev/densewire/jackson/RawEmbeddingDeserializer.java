package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.deser.std.StdDeserializer;
import dev.densewire.JsonEnvelope;
import java.io.IOException;
import java.util.Arrays;

/**
 * Reads an envelope's {@code embedding} as it stands (the dtype and byte order may come later in the object):
 * a Base64 String, a double[] (numbers read as the nearest float64, SPEC.md section 3.5), or a marker for
 * anything else, which {@link JsonEnvelope#assemble} reports with the row's field.
 */
final class RawEmbeddingDeserializer extends StdDeserializer<Object> {
    private static final long serialVersionUID = 1L;

    RawEmbeddingDeserializer() {
        super(Object.class);
    }

    @Override
    public Object deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
        JsonToken t = p.currentToken();
        if (t == JsonToken.VALUE_STRING) {
            return p.getText();
        }
        if (t == JsonToken.START_ARRAY) {
            double[] out = new double[64];
            int n = 0;
            boolean numbers = true;
            while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
                if (t == JsonToken.VALUE_NUMBER_FLOAT || t == JsonToken.VALUE_NUMBER_INT) {
                    if (n == out.length) {
                        out = Arrays.copyOf(out, n * 2);
                    }
                    out[n++] = p.getDoubleValue();
                } else {
                    numbers = false;
                    p.skipChildren();
                }
            }
            return numbers ? Arrays.copyOf(out, n) : JsonEnvelope.notNumbers();
        }
        p.skipChildren();
        return JsonEnvelope.wrongType();
    }

    @Override
    public Object getNullValue(DeserializationContext ctxt) {
        return JsonEnvelope.wrongType();
    }
}
