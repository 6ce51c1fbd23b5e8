package dev.densewire;

import java.util.List;
import java.util.Locale;
import java.util.Optional;

/** The body formats of SPEC.md section 12, in the server's preference order (JSON first). */
public enum Format {
    JSON("json", "application/json"),
    RAW("raw", "application/octet-stream"),
    MSGPACK("msgpack", "application/vnd.msgpack", "application/msgpack", "application/x-msgpack"),
    PROTOBUF("protobuf", "application/protobuf", "application/x-protobuf"),
    ARROW("arrow", "application/vnd.apache.arrow.stream");

    private final String queryName;
    private final String mediaType;
    private final List<String> aliases;

    Format(String queryName, String mediaType, String... aliases) {
        this.queryName = queryName;
        this.mediaType = mediaType;
        this.aliases = List.of(aliases);
    }

    /** The value of the {@code format} query parameter, e.g. {@code msgpack}. */
    public String queryName() {
        return queryName;
    }

    /** The canonical media type, e.g. {@code application/vnd.msgpack}. */
    public String mediaType() {
        return mediaType;
    }

    public List<String> aliases() {
        return aliases;
    }

    /** The format of a {@code Content-Type} value (parameters and case ignored), if it is one of ours. */
    public static Optional<Format> fromContentType(String contentType) {
        if (contentType == null) {
            return Optional.empty();
        }
        int semi = contentType.indexOf(';');
        String type = (semi >= 0 ? contentType.substring(0, semi) : contentType).trim().toLowerCase(Locale.ROOT);
        for (Format f : values()) {
            if (f.mediaType.equals(type) || f.aliases.contains(type)) {
                return Optional.of(f);
            }
        }
        return Optional.empty();
    }
}
