package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.json.UTF8JsonGenerator;
import com.fasterxml.jackson.databind.BeanProperty;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.ser.ContextualSerializer;
import com.fasterxml.jackson.databind.ser.std.StdSerializer;
import dev.densewire.Base64Codec;
import dev.densewire.Endianness;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * Writes {@code float[]}, {@code double[]} and {@link FloatVector} as Base64 of their float32 / float64 bytes in
 * the property's byte order. Into a UTF-8 JSON stream the ASCII is copied as-is ({@code writeRawUTF8String}: no
 * per-character escaping checks); binary formats (CBOR, Smile) get the raw bytes.
 */
final class VectorSerializer<T> extends StdSerializer<T> implements ContextualSerializer {
    private static final long serialVersionUID = 1L;

    private final VectorKind kind;
    private final Endianness order;
    private final boolean base64;

    VectorSerializer(VectorKind kind, Endianness order, boolean base64) {
        super(kind.<T>type());
        this.kind = kind;
        this.order = order;
        this.base64 = base64;
    }

    @Override
    public JsonSerializer<?> createContextual(SerializerProvider prov, BeanProperty property) {
        DensewireBase64 ann = property == null ? null : property.getAnnotation(DensewireBase64.class);
        if (ann == null) {
            return this;
        }
        Endianness o = ann.byteOrder().length > 0 ? ann.byteOrder()[0] : order;
        if (o == order && ann.enabled() == base64) {
            return this;
        }
        return new VectorSerializer<T>(kind, o, ann.enabled());
    }

    @Override
    public boolean isEmpty(SerializerProvider provider, T value) {
        return value == null || kind.length(value) == 0;
    }

    @Override
    public void serialize(T value, JsonGenerator gen, SerializerProvider provider) throws IOException {
        if (!base64) {
            writeArray(value, gen);
            return;
        }
        if (gen.canWriteBinaryNatively()) {
            byte[] bytes = kind == VectorKind.DOUBLES
                    ? Base64Codec.doubleBytes((double[]) value, 0, ((double[]) value).length, order)
                    : Base64Codec.floatBytes(kind.floats(value), 0, kind.floats(value).length, order);
            gen.writeBinary(bytes);
            return;
        }
        byte[] ascii = kind == VectorKind.DOUBLES
                ? Base64Codec.encodeDoublesToAscii((double[]) value, 0, ((double[]) value).length, order)
                : Base64Codec.encodeFloatsToAscii(kind.floats(value), 0, kind.floats(value).length, order);
        if (gen instanceof UTF8JsonGenerator) {
            gen.writeRawUTF8String(ascii, 0, ascii.length);
        } else {
            gen.writeString(new String(ascii, StandardCharsets.ISO_8859_1));
        }
    }

    private void writeArray(T value, JsonGenerator gen) throws IOException {
        if (kind == VectorKind.DOUBLES) {
            double[] v = (double[]) value;
            gen.writeArray(v, 0, v.length);
            return;
        }
        float[] v = kind.floats(value);
        gen.writeStartArray(value, v.length);
        for (float f : v) {
            gen.writeNumber(f);
        }
        gen.writeEndArray();
    }
}
