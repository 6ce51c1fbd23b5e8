package dev.densewire.jackson;

import dev.densewire.Endianness;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Per-property control of how {@link DensewireModule} writes a {@code float[]}, {@code double[]} or
 * {@link FloatVector}: {@code @DensewireBase64(byteOrder = BIG)} for Elasticsearch {@code dense_vector} or Jackson's
 * own {@code shape = BINARY} format, {@code @DensewireBase64(enabled = false)} to keep a JSON array. Without
 * {@code byteOrder} the module's default applies (little-endian unless configured otherwise). Reading follows the
 * same byte order and accepts JSON arrays as well.
 */
@Target({ElementType.FIELD, ElementType.METHOD, ElementType.PARAMETER, ElementType.RECORD_COMPONENT,
        ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
public @interface DensewireBase64 {
    /** The byte order of this property's Base64; empty means the module's default. */
    Endianness[] byteOrder() default {};

    /** False writes this property as a JSON array of numbers even when the module writes Base64 by default. */
    boolean enabled() default true;
}
