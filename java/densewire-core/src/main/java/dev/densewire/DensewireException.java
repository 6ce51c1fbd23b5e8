package dev.densewire;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * Every error densewire reports (SPEC.md section 11): a {@link Category}, a message saying what was wrong,
 * and where: an {@linkplain #offset() offset} (characters of a Base64 string, bytes of a binary body) and/or a
 * {@linkplain #field() field} (a JSON path such as {@code data[3].embedding}, a MessagePack/Protobuf field name,
 * or an HTTP header name).
 */
public class DensewireException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The error categories of SPEC.md section 11, shared by every densewire implementation. */
    public enum Category {
        INVALID_BASE64("invalid_base64", 400),
        LENGTH_MISMATCH("length_mismatch", 400),
        SHAPE_MISMATCH("shape_mismatch", 400),
        UNKNOWN_DTYPE("unknown_dtype", 400),
        TRUNCATED("truncated", 400),
        MALFORMED("malformed", 400),
        INVALID_FIELD("invalid_field", 422),
        NON_FINITE("non_finite", 422),
        UNAUTHORIZED("unauthorized", 401),
        NOT_FOUND("not_found", 404),
        PAYLOAD_TOO_LARGE("payload_too_large", 413),
        UNSUPPORTED_MEDIA_TYPE("unsupported_media_type", 415),
        NOT_ACCEPTABLE("not_acceptable", 406),
        METHOD_NOT_ALLOWED("method_not_allowed", 405),
        /** The server's admission is full ({@code densewire serve --max-concurrent-requests}): retry later. */
        RATE_LIMITED("rate_limited", 429),
        UNAVAILABLE("unavailable", 503),
        /** A bug in the server: never the answer to bad input. */
        INTERNAL_ERROR("internal_error", 500);

        private final String code;
        private final int httpStatus;

        Category(String code, int httpStatus) {
            this.code = code;
            this.httpStatus = httpStatus;
        }

        /** The wire name, e.g. {@code invalid_base64}: the {@code code} of an HTTP error envelope. */
        public String code() {
            return code;
        }

        /** The HTTP status a server answers this category with. */
        public int httpStatus() {
            return httpStatus;
        }

        /** The category of a wire name, or empty for a name not in SPEC.md section 11. */
        public static Optional<Category> fromCode(String code) {
            for (Category c : values()) {
                if (c.code.equals(code)) {
                    return Optional.of(c);
                }
            }
            return Optional.empty();
        }
    }

    private final Category category;
    private final long offset; // -1: none
    private final String field; // null: none
    private final String detail;

    public DensewireException(Category category, String detail, long offset, String field) {
        this(category, detail, offset, field, null);
    }

    public DensewireException(Category category, String detail, long offset, String field, Throwable cause) {
        super(render(category, detail, offset, field), cause);
        this.category = category;
        this.detail = detail;
        this.offset = offset < 0 ? -1 : offset;
        this.field = field;
    }

    static DensewireException at(Category category, long offset, String detail) {
        return new DensewireException(category, detail, offset, null);
    }

    static DensewireException on(Category category, String field, String detail) {
        return new DensewireException(category, detail, -1, field);
    }

    private static String render(Category category, String detail, long offset, String field) {
        StringBuilder sb = new StringBuilder();
        if (field != null) {
            sb.append(field).append(": ");
        }
        sb.append(detail);
        if (offset >= 0 && !detail.contains("offset")) {
            sb.append(" at offset ").append(offset);
        }
        sb.append(" [").append(category.code).append(']');
        return sb.toString();
    }

    public Category category() {
        return category;
    }

    /** Characters of a Base64 string or bytes of a binary body, from 0; empty when the error has no position. */
    public OptionalLong offset() {
        return offset < 0 ? OptionalLong.empty() : OptionalLong.of(offset);
    }

    /** The field, JSON path or header the error is about; empty when none applies. */
    public Optional<String> field() {
        return Optional.ofNullable(field);
    }

    /** The message without the field prefix and category suffix. */
    public String detail() {
        return detail;
    }

    /** The same error placed on {@code newField}, unless it already names a field (which is kept). */
    public DensewireException withField(String newField) {
        if (newField == null || newField.equals(field)) {
            return this;
        }
        if (field != null) {
            return this;
        }
        DensewireException e = new DensewireException(category, detail, offset, newField, getCause());
        e.setStackTrace(getStackTrace());
        return e;
    }
}
