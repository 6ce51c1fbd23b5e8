package dev.densewire.client;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.zip.GZIPInputStream;

/**
 * Response content codings (SPEC.md section 12): gzip from the JDK, zstd through zstd-jni and br through
 * org.brotli:dec when they are on the class path (optional dependencies of densewire-client). Decompression is
 * bounded: a body that inflates beyond the limit is {@code payload_too_large}, never an out-of-memory error.
 */
final class ContentCodings {
    static final boolean ZSTD = present("com.github.luben.zstd.ZstdInputStream");
    static final boolean BROTLI = present("org.brotli.dec.BrotliInputStream");

    private ContentCodings() {
    }

    private static boolean present(String className) {
        try {
            Class.forName(className, false, ContentCodings.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /** The {@code Accept-Encoding} value of every coding this client can decode, best first. */
    static String acceptEncoding() {
        List<String> out = new ArrayList<>();
        if (ZSTD) {
            out.add("zstd");
        }
        if (BROTLI) {
            out.add("br");
        }
        out.add("gzip");
        return String.join(", ", out);
    }

    /** The coding named by a {@code Content-Encoding} value, lowercased; "" for none or identity. */
    static String coding(String contentEncoding) {
        String enc = contentEncoding == null ? "" : contentEncoding.trim().toLowerCase(Locale.ROOT);
        return enc.equals("identity") ? "" : enc;
    }

    /**
     * The body decoded from {@code coding}, at most {@code limit} bytes.
     *
     * @throws DensewireException {@code unsupported_media_type} on {@code Content-Encoding} for a coding this
     *                            client cannot decode; {@code malformed} on it for a corrupt body;
     *                            {@code payload_too_large} beyond the limit
     */
    static byte[] decode(String coding, byte[] body, long limit) {
        if (coding.isEmpty()) {
            return body;
        }
        try (InputStream in = open(coding, new ByteArrayInputStream(body))) {
            ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(64, Math.min(body.length * 4, 1 << 24)));
            byte[] buf = new byte[1 << 16];
            long total = 0;
            for (int n; (n = in.read(buf)) > 0; ) {
                total += n;
                if (total > limit) {
                    throw new DensewireException(Category.PAYLOAD_TOO_LARGE, "the " + coding + " body inflates beyond "
                            + limit + " bytes", -1, "Content-Encoding");
                }
                out.write(buf, 0, n);
            }
            return out.toByteArray();
        } catch (IOException | RuntimeException e) {
            if (e instanceof DensewireException) {
                throw (DensewireException) e;
            }
            throw new DensewireException(Category.MALFORMED, "bad " + coding + " body: " + e.getMessage(), -1,
                    "Content-Encoding", e);
        }
    }

    private static InputStream open(String coding, InputStream raw) throws IOException {
        switch (coding) {
            case "gzip":
            case "x-gzip":
                return new GZIPInputStream(raw);
            case "zstd":
                if (ZSTD) {
                    return Zstd.open(raw);
                }
                break;
            case "br":
                if (BROTLI) {
                    return Brotli.open(raw);
                }
                break;
            default:
                break;
        }
        throw new DensewireException(Category.UNSUPPORTED_MEDIA_TYPE, "Content-Encoding " + coding
                + " was not asked for (this client decodes " + acceptEncoding() + ")", -1, "Content-Encoding");
    }

    /** Loaded only when zstd-jni is present (the verifier of a class naming it would need it). */
    private static final class Zstd {
        static InputStream open(InputStream raw) throws IOException {
            return new com.github.luben.zstd.ZstdInputStream(raw);
        }
    }

    /** Loaded only when org.brotli:dec is present. */
    private static final class Brotli {
        static InputStream open(InputStream raw) throws IOException {
            return new org.brotli.dec.BrotliInputStream(raw);
        }
    }
}
