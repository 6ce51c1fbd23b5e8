package dev.densewire.client;

import com.fasterxml.jackson.databind.JsonNode;
import dev.densewire.ColumnSpec;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Table;
import dev.densewire.TableFormat;
import dev.densewire.jackson.DensewireJson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * A client of densewire's tables API (SPEC.md section 15.9) on {@link HttpClient}: {@code GET /v1/tables} and
 * {@code GET /v1/tables/{name}}. It asks for the most compact format first (Protobuf, MessagePack, Arrow when
 * densewire-arrow is on the class path, JSON columns, CSV, JSON objects), decodes whatever the server chose by its
 * {@code Content-Type} (the untyped formats typed by {@code Densewire-Columns}), asks for zstd, br or gzip
 * compression (zstd and br when their optional libraries are present), and answers a {@code 304} to
 * {@code If-None-Match} as {@link TableResult#notModified()}.
 *
 * <pre>{@code
 * TablesClient tables = TablesClient.builder(URI.create("http://localhost:8000")).build();
 * TableResult r = tables.get("points");
 * DoubleBuffer longitude = r.table().column("longitude").float64s();
 * TableResult again = tables.get("points", TablesClient.ifNoneMatch(r.etag()));  // again.notModified()
 * }</pre>
 *
 * Retries and errors as {@link DensewireClient}: {@code 429}, {@code 503} and failed connections are retried;
 * an error answer is a {@link DensewireApiException} ({@code 404 not_found} for an unknown table).
 */
public final class TablesClient {
    private final HttpClient http;
    private final String base;
    private final String apiKey;
    private final List<TableFormat> formats;
    private final String accept;
    private final Duration timeout;
    private final long maxResponseBytes;
    private final String acceptEncoding;
    private final Retrier retrier;

    private TablesClient(Builder b) {
        this.http = b.http != null ? b.http
                : HttpClient.newBuilder().connectTimeout(b.timeout).build();
        String s = b.baseUri.toString();
        this.base = s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
        this.apiKey = b.apiKey;
        this.formats = List.copyOf(b.formats);
        this.accept = acceptHeader(formats);
        this.timeout = b.timeout;
        this.maxResponseBytes = b.maxResponseBytes;
        this.acceptEncoding = b.acceptEncoding;
        this.retrier = new Retrier(http, b.maxRetries, b.backoffBase, b.backoffCap);
        retrier.drawFrom(b.retryRandom);
    }

    public static Builder builder(URI baseUri) {
        return new Builder(baseUri);
    }

    /** The formats asked for when none are chosen: the most compact first. */
    static List<TableFormat> defaultFormats() {
        List<TableFormat> out = new ArrayList<>(List.of(TableFormat.PROTOBUF, TableFormat.MSGPACK));
        if (ArrowSupport.available()) {
            out.add(TableFormat.ARROW);
        }
        out.addAll(List.of(TableFormat.JSON_COLUMNS, TableFormat.CSV, TableFormat.JSON));
        return out;
    }

    /** The {@code Accept} value for these formats, best first, with falling q-values. */
    static String acceptHeader(List<TableFormat> formats) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < formats.size(); i++) {
            if (i > 0) {
                sb.append(", ");
            }
            sb.append(formats.get(i).mediaType());
            if (i > 0) {
                sb.append(";q=").append(String.format(Locale.ROOT, "%.1f", Math.max(1.0 - 0.1 * i, 0.1)));
            }
        }
        return sb.toString();
    }

    /** The Accept header of table requests. */
    public String accept() {
        return accept;
    }

    // ------------------------------------------------------------------ requests

    /** Options of one {@link #get}: a format to force ({@code ?format=}) and an ETag for {@code If-None-Match}. */
    public record Options(TableFormat format, String ifNoneMatch) {
        public Options withFormat(TableFormat f) {
            return new Options(f, ifNoneMatch);
        }

        public Options withIfNoneMatch(String etag) {
            return new Options(format, etag);
        }
    }

    /** Ask for this format whatever {@code Accept} says (the {@code format} query parameter). */
    public static Options format(TableFormat f) {
        return new Options(f, null);
    }

    /** Answer {@code 304} (not modified) when the table still has this ETag. */
    public static Options ifNoneMatch(String etag) {
        return new Options(null, etag);
    }

    /** {@code GET /v1/tables}: every table the server serves. */
    public List<TableInfo> list() {
        return join(listAsync());
    }

    public CompletableFuture<List<TableInfo>> listAsync() {
        HttpRequest req = request(URI.create(base + "/v1/tables")).header("Accept", "application/json").GET().build();
        return retrier.send(req, HttpResponse.BodyHandlers.ofByteArray()).thenApply(a -> {
            HttpResponse<byte[]> r = a.response();
            if (r.statusCode() != 200) {
                throw Responses.apiError(r.statusCode(), r.headers(), r.body(), a.attempts());
            }
            return parseList(body(r));
        });
    }

    /** {@code GET /v1/tables/{name}} in the negotiated format. */
    public TableResult get(String name) {
        return get(name, new Options(null, null));
    }

    public TableResult get(String name, Options options) {
        return join(getAsync(name, options));
    }

    public CompletableFuture<TableResult> getAsync(String name, Options options) {
        if (name == null || name.isEmpty()) {
            throw new DensewireException(Category.INVALID_FIELD, "empty table name", -1, "name");
        }
        String url = base + "/v1/tables/" + pathSegment(name) + (options.format() == null ? "" : "?format=" + options.format().paramName());
        HttpRequest.Builder hb = request(URI.create(url)).header("Accept", accept)
                .header("Accept-Encoding", acceptEncoding).GET();
        if (options.ifNoneMatch() != null) {
            hb.header("If-None-Match", options.ifNoneMatch());
        }
        if (options.format() == TableFormat.ARROW && !ArrowSupport.available()) {
            throw new IllegalStateException("TableFormat.ARROW needs dev.densewire:densewire-arrow on the class path");
        }
        return retrier.send(hb.build(), HttpResponse.BodyHandlers.ofByteArray()).thenApply(a -> result(a.response(), a.attempts()));
    }

    private TableResult result(HttpResponse<byte[]> r, int attempts) {
        HttpHeaders h = r.headers();
        String etag = h.firstValue("ETag").orElse(null);
        String lastModified = h.firstValue("Last-Modified").orElse(null);
        if (r.statusCode() == 304) {
            return new TableResult(null, true, etag, lastModified, null, "", 0, attempts);
        }
        if (r.statusCode() < 200 || r.statusCode() > 299) {
            throw Responses.apiError(r.statusCode(), h, r.body(), attempts);
        }
        String coding = ContentCodings.coding(h.firstValue("Content-Encoding").orElse(null));
        byte[] body = ContentCodings.decode(coding, r.body(), maxResponseBytes);
        String contentType = h.firstValue("Content-Type").orElse(null);
        TableFormat f = TableFormat.fromContentType(contentType).orElseThrow(() -> new DensewireException(
                Category.UNSUPPORTED_MEDIA_TYPE, "the server answered " + contentType + ", which is no table format", -1,
                "Content-Type"));
        Table t = TableBodies.decode(name -> h.firstValue(name).orElse(null), body);
        return new TableResult(t, false, etag, lastModified, f, coding, r.body().length, attempts);
    }

    private byte[] body(HttpResponse<byte[]> r) {
        return ContentCodings.decode(ContentCodings.coding(r.headers().firstValue("Content-Encoding").orElse(null)),
                r.body(), maxResponseBytes);
    }

    private HttpRequest.Builder request(URI uri) {
        HttpRequest.Builder hb = HttpRequest.newBuilder(uri).timeout(timeout);
        if (apiKey != null) {
            hb.header("Authorization", "Bearer " + apiKey);
        }
        return hb;
    }

    /** A path segment, RFC 3986: unreserved bytes kept, the rest of the UTF-8 {@code %XX}. */
    static String pathSegment(String s) {
        StringBuilder sb = new StringBuilder();
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xFF;
            if (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
                sb.append((char) c);
            } else {
                sb.append('%').append(String.format(Locale.ROOT, "%02X", c));
            }
        }
        return sb.toString();
    }

    static List<TableInfo> parseList(byte[] json) {
        JsonNode doc;
        try {
            doc = DensewireJson.mapper().readTree(json);
        } catch (IOException e) {
            throw new DensewireException(Category.MALFORMED, "GET /v1/tables answered invalid JSON: " + e.getMessage(), -1, null, e);
        }
        JsonNode data = doc == null ? null : doc.get("data");
        if (data == null || !data.isArray()) {
            throw new DensewireException(Category.INVALID_FIELD, "GET /v1/tables answered no data array", -1, "data");
        }
        List<TableInfo> out = new ArrayList<>(data.size());
        for (int i = 0; i < data.size(); i++) {
            JsonNode d = data.get(i);
            String field = "data[" + i + "]";
            List<ColumnSpec> columns = new ArrayList<>();
            JsonNode cols = d.path("columns");
            for (int j = 0; j < cols.size(); j++) {
                try {
                    columns.add(ColumnSpec.parse(cols.get(j).path("name").asText(), cols.get(j).path("type").asText()));
                } catch (DensewireException e) {
                    throw new DensewireException(e.category(), e.detail(), -1, field + ".columns[" + j + "].type");
                }
            }
            OffsetDateTime refreshed = null;
            if (d.hasNonNull("refreshed_at")) {
                try {
                    refreshed = OffsetDateTime.parse(d.get("refreshed_at").asText());
                } catch (DateTimeParseException e) {
                    throw new DensewireException(Category.INVALID_FIELD, "not an RFC 3339 time: " + d.get("refreshed_at"), -1,
                            field + ".refreshed_at");
                }
            }
            List<String> formats = new ArrayList<>();
            d.path("formats").forEach(f -> formats.add(f.asText()));
            out.add(new TableInfo(d.path("name").asText(), d.path("rows").asLong(), columns,
                    d.hasNonNull("version") ? d.get("version").asText() : null, refreshed, formats));
        }
        return out;
    }

    private static <T> T join(CompletableFuture<T> f) {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            f.cancel(true);
            throw new CancellationException("interrupted");
        } catch (ExecutionException e) {
            Throwable t = e.getCause();
            while (t instanceof CompletionException && t.getCause() != null) {
                t = t.getCause();
            }
            if (t instanceof RuntimeException) {
                throw (RuntimeException) t;
            }
            if (t instanceof IOException) {
                throw new UncheckedIOException((IOException) t);
            }
            throw new IllegalStateException(t);
        }
    }

    // ------------------------------------------------------------------ configuration

    /** Options of the client. */
    public static final class Builder {
        private final URI baseUri;
        private HttpClient http;
        private String apiKey;
        private List<TableFormat> formats = defaultFormats();
        private Duration timeout = Duration.ofSeconds(60);
        private long maxResponseBytes = 1L << 31;
        private String acceptEncoding = ContentCodings.acceptEncoding();
        private int maxRetries = 2;
        private Duration backoffBase = Duration.ofMillis(500);
        private Duration backoffCap = Duration.ofSeconds(8);
        private java.util.function.DoubleSupplier retryRandom = RetryPolicy.DEFAULT_RANDOM;

        private Builder(URI baseUri) {
            this.baseUri = Objects.requireNonNull(baseUri, "baseUri");
        }

        /** Sent as {@code Authorization: Bearer <key>}. */
        public Builder apiKey(String apiKey) {
            this.apiKey = apiKey;
            return this;
        }

        /** The acceptable formats, best first (sent as {@code Accept} with falling q-values). */
        public Builder formats(TableFormat... preference) {
            this.formats = Retrier.preference(preference);
            return this;
        }

        public Builder timeout(Duration timeout) {
            this.timeout = Objects.requireNonNull(timeout);
            return this;
        }

        /**
         * The content codings to ask for, best first (default every one this client decodes: zstd and br when their
         * optional libraries are on the class path, gzip); {@code identity} alone asks for none.
         */
        public Builder contentCodings(String... codings) {
            if (codings.length == 0) {
                throw new IllegalArgumentException("at least one coding (identity for none)");
            }
            for (String c : codings) {
                if (!List.of("zstd", "br", "gzip", "identity").contains(c)) {
                    throw new IllegalArgumentException("unknown content coding " + c + " (zstd, br, gzip or identity)");
                }
                if (c.equals("zstd") && !ContentCodings.ZSTD || c.equals("br") && !ContentCodings.BROTLI) {
                    throw new IllegalStateException(c + " needs its library on the class path (zstd-jni; org.brotli:dec)");
                }
            }
            this.acceptEncoding = String.join(", ", codings);
            return this;
        }

        /** The largest decompressed body accepted (default 2 GiB): beyond it, {@code payload_too_large}. */
        public Builder maxResponseBytes(long max) {
            this.maxResponseBytes = max;
            return this;
        }

        /** As {@link DensewireClient.Builder#maxRetries}: retries of 429, 503 and failed connections (default 2). */
        public Builder maxRetries(int maxRetries) {
            this.maxRetries = Retrier.checkMaxRetries(maxRetries);
            return this;
        }

        /** As {@link DensewireClient.Builder#retryBackoff}: full-jitter backoff bounds (defaults 500 ms and 8 s). */
        public Builder retryBackoff(Duration base, Duration cap) {
            Retrier.checkBackoff(base, cap);
            this.backoffBase = base;
            this.backoffCap = cap;
            return this;
        }

        /** As {@link DensewireClient.Builder#retryRandom}: the source of the backoff's draws. */
        public Builder retryRandom(java.util.function.DoubleSupplier random) {
            this.retryRandom = Retrier.checkRandom(random);
            return this;
        }

        /** Use this HttpClient (its executor, proxy, TLS and HTTP version settings). */
        public Builder httpClient(HttpClient http) {
            this.http = http;
            return this;
        }

        public TablesClient build() {
            if (formats.contains(TableFormat.ARROW) && !ArrowSupport.available()) {
                throw new IllegalStateException("TableFormat.ARROW needs dev.densewire:densewire-arrow on the class path");
            }
            return new TablesClient(this);
        }
    }
}
