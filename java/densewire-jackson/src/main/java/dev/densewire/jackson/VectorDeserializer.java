package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.BeanProperty;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.deser.ContextualDeserializer;
import com.fasterxml.jackson.databind.deser.std.StdDeserializer;
import com.fasterxml.jackson.databind.type.LogicalType;
import dev.densewire.Base64Codec;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Endianness;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Reads {@code float[]}, {@code double[]} and {@link FloatVector} from a Base64 string in the property's byte
 * order (decoded from the parser's character buffer, no intermediate String), from a JSON array of numbers, or
 * from native binary (CBOR, Smile, a TokenBuffer). Bad input fails with {@link DensewireJsonException}.
 */
final class VectorDeserializer<T> extends StdDeserializer<T> implements ContextualDeserializer {
    private static final long serialVersionUID = 1L;

    private final VectorKind kind;
    private final Endianness order;

    VectorDeserializer(VectorKind kind, Endianness order) {
        super(kind.<T>type());
        this.kind = kind;
        this.order = order;
    }

    @Override
    public JsonDeserializer<?> createContextual(DeserializationContext ctxt, BeanProperty property) {
        DensewireBase64 ann = property == null ? null : property.getAnnotation(DensewireBase64.class);
        if (ann == null || ann.byteOrder().length == 0 || ann.byteOrder()[0] == order) {
            return this;
        }
        return new VectorDeserializer<T>(kind, ann.byteOrder()[0]);
    }

    @Override
    public LogicalType logicalType() {
        return LogicalType.Array;
    }

    @Override
    @SuppressWarnings("unchecked")
    public T deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
        JsonToken t = p.currentToken();
        try {
            if (t == JsonToken.VALUE_STRING) {
                char[] buf = p.getTextCharacters();
                int off = p.getTextOffset();
                int len = p.getTextLength();
                if (kind == VectorKind.DOUBLES) {
                    return (T) Base64Codec.decodeDoubles(buf, off, len, order);
                }
                return (T) kind.fromFloats(Base64Codec.decodeFloats(buf, off, len, order));
            }
            if (t == JsonToken.START_ARRAY) {
                return (T) readArray(p, ctxt);
            }
            if (t == JsonToken.VALUE_EMBEDDED_OBJECT && p.getEmbeddedObject() instanceof byte[]) {
                ByteBuffer bytes = ByteBuffer.wrap((byte[]) p.getEmbeddedObject()).order(order.nioOrder());
                if (kind == VectorKind.DOUBLES) {
                    double[] out = new double[bytes.remaining() / 8];
                    bytes.asDoubleBuffer().get(out);
                    return (T) out;
                }
                float[] out = new float[bytes.remaining() / 4];
                bytes.asFloatBuffer().get(out);
                return (T) kind.fromFloats(out);
            }
        } catch (DensewireException e) {
            throw new DensewireJsonException(p, e, t == JsonToken.VALUE_STRING ? p.getText() : null, handledType());
        }
        return (T) ctxt.handleUnexpectedToken(handledType(), p);
    }

    private Object readArray(JsonParser p, DeserializationContext ctxt) throws IOException {
        if (kind == VectorKind.DOUBLES) {
            double[] out = new double[16];
            int n = 0;
            JsonToken t;
            while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
                checkNumber(p, t, n);
                if (n == out.length) {
                    out = Arrays.copyOf(out, n * 2);
                }
                out[n++] = p.getDoubleValue();
            }
            return Arrays.copyOf(out, n);
        }
        float[] out = new float[16];
        int n = 0;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            checkNumber(p, t, n);
            if (n == out.length) {
                out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = p.getFloatValue();
        }
        return kind.fromFloats(n == out.length ? out : Arrays.copyOf(out, n));
    }

    private void checkNumber(JsonParser p, JsonToken t, int n) throws DensewireJsonException {
        if (t != JsonToken.VALUE_NUMBER_FLOAT && t != JsonToken.VALUE_NUMBER_INT) {
            DensewireException e = new DensewireException(Category.INVALID_FIELD,
                    "item " + n + " of the array is " + t + ", not a number", -1, null);
            throw new DensewireJsonException(p, e, null, handledType());
        }
    }
}
