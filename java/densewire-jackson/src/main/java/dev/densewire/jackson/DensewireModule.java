package dev.densewire.jackson;

import com.fasterxml.jackson.core.Version;
import com.fasterxml.jackson.databind.module.SimpleModule;
import dev.densewire.Endianness;
import dev.densewire.Table;

/**
 * A Jackson module that writes {@code float[]}, {@code double[]} and {@link FloatVector} as Base64 of their
 * packed float32 / float64 bytes, and reads them from Base64 or JSON arrays.
 *
 * <pre>{@code
 * ObjectMapper mapper = new ObjectMapper().registerModule(new DensewireModule());          // little-endian
 * ObjectMapper es = new ObjectMapper().registerModule(DensewireModule.builder()
 *         .byteOrder(Endianness.BIG).build());                                           // Elasticsearch, Jackson BINARY
 * }</pre>
 *
 * <p>It also reads {@link Table}s from the JSON layouts of SPEC.md section 15.3 ({@link TableDeserializer}).
 *
 * <p>The byte order is chosen globally here and per property with {@link DensewireBase64}. With
 * {@link Builder#annotatedOnly(boolean) annotatedOnly(true)} only annotated properties are written as Base64.
 */
public final class DensewireModule extends SimpleModule {
    private static final long serialVersionUID = 1L;

    private final Endianness byteOrder;
    private final boolean annotatedOnly;

    /** Little-endian Base64 for every vector property (OpenAI-style payloads). */
    public DensewireModule() {
        this(Endianness.LITTLE, false);
    }

    /** Base64 in the given byte order for every vector property. */
    public DensewireModule(Endianness byteOrder) {
        this(byteOrder, false);
    }

    private DensewireModule(Endianness byteOrder, boolean annotatedOnly) {
        super("densewire", new Version(1, 0, 0, "SNAPSHOT", "dev.densewire", "densewire-jackson"));
        this.byteOrder = byteOrder;
        this.annotatedOnly = annotatedOnly;
        for (VectorKind kind : VectorKind.values()) {
            register(kind);
        }
        addDeserializer(Table.class, new TableDeserializer());
    }

    private <T> void register(VectorKind kind) {
        Class<T> type = kind.type();
        addSerializer(type, new VectorSerializer<T>(kind, byteOrder, !annotatedOnly));
        addDeserializer(type, new VectorDeserializer<T>(kind, byteOrder));
    }

    public Endianness byteOrder() {
        return byteOrder;
    }

    public boolean annotatedOnly() {
        return annotatedOnly;
    }

    @Override
    public Object getTypeId() {
        return DensewireModule.class.getName() + ":" + byteOrder + ":" + annotatedOnly;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Options of the module. */
    public static final class Builder {
        private Endianness byteOrder = Endianness.LITTLE;
        private boolean annotatedOnly;

        /** The default byte order of Base64 vectors (little-endian unless set). */
        public Builder byteOrder(Endianness order) {
            this.byteOrder = order;
            return this;
        }

        /** When true, only properties annotated with {@link DensewireBase64} are written as Base64. */
        public Builder annotatedOnly(boolean annotatedOnly) {
            this.annotatedOnly = annotatedOnly;
            return this;
        }

        public DensewireModule build() {
            return new DensewireModule(byteOrder, annotatedOnly);
        }
    }
}
