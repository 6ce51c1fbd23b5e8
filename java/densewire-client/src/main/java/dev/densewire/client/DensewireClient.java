package dev.densewire.client;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Format;
import dev.densewire.Quantization;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.jackson.DensewireJson;
import dev.densewire.jackson.EmbeddingsRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Semaphore;

/**
 * A client of densewire's {@code POST /v1/embeddings} (SPEC.md sections 6 and 12) on {@link HttpClient}. It asks
 * for the fastest body first ({@code Accept: application/octet-stream, application/vnd.msgpack;q=0.9,
 * application/protobuf;q=0.8, application/json;q=0.5}) and decodes whatever the server chose by its
 * {@code Content-Type}, so it works with densewire servers and plain OpenAI-compatible ones alike. Large jobs go
 * through {@link #embedMany}: batches sent concurrently, at most {@code maxConcurrency} in flight.
 *
 * <pre>{@code
 * DensewireClient client = DensewireClient.builder(URI.create("http://localhost:8000"))
 *         .model("sentence-transformers/all-MiniLM-L6-v2").maxConcurrency(4).batchSize(256).build();
 * Embeddings e = client.embedMany(texts);
 * float[] first = e.tensor().row(0);
 * }</pre>
 *
 * <p>A {@code 429} or {@code 503} answer and a connection that failed before any answer are retried (2 times by
 * default, {@link Builder#maxRetries}) after an exponential backoff with full jitter added on top of the server's
 * {@code Retry-After} (SPEC.md section 18, {@link RetryPolicy}); an answer that is the caller's fault is never
 * retried.
 *
 * <p>Quantized embeddings (SPEC.md section 17): with {@code dtype(Dtype.INT8)} or {@code UINT8} the server answers
 * codes and names their ranges ({@link Embeddings#quantization()}); {@link Builder#dequantize(boolean)} turns them
 * back into float32 with the ranges of {@code GET /v1/quantization/{id}}, fetched once per id and kept
 * ({@link #quantization(String)}).
 *
 * <p>Errors: {@link DensewireApiException} for an error answer (status, code, param, message, offset, attempts), a
 * {@link DensewireException} for a body that does not decode, {@link UncheckedIOException} for I/O failures (its
 * message says how many attempts were made).
 */
public final class DensewireClient {
    private static final List<Format> DEFAULT_FORMATS = List.of(Format.RAW, Format.MSGPACK, Format.PROTOBUF, Format.JSON);

    private final HttpClient http;
    private final URI endpoint;
    private final String apiKey;
    private final String model;
    private final Dtype dtype;
    private final Integer dimensions;
    private final List<Format> formats;
    private final String accept;
    private final Duration timeout;
    private final int maxConcurrency;
    private final int batchSize;
    private final boolean gzip;
    private final boolean dequantize;
    private final String base;
    private final Retrier retrier;
    private final ConcurrentHashMap<String, CompletableFuture<Quantization.Ranges>> ranges = new ConcurrentHashMap<>();

    private DensewireClient(Builder b) {
        this.http = b.http != null ? b.http
                : HttpClient.newBuilder().connectTimeout(b.timeout).build();
        this.retrier = new Retrier(http, b.maxRetries, b.backoffBase, b.backoffCap);
        retrier.drawFrom(b.retryRandom);
        String base = b.baseUri.toString();
        this.base = base.endsWith("/") ? base : base + "/";
        this.endpoint = URI.create(this.base + "v1/embeddings");
        this.apiKey = b.apiKey;
        this.model = b.model;
        this.dtype = b.dtype;
        this.dimensions = b.dimensions;
        this.formats = List.copyOf(b.formats);
        this.accept = acceptHeader(formats);
        this.timeout = b.timeout;
        this.maxConcurrency = b.maxConcurrency;
        this.batchSize = b.batchSize;
        this.gzip = b.gzip;
        this.dequantize = b.dequantize;
    }

    public static Builder builder(URI baseUri) {
        return new Builder(baseUri);
    }

    /** The {@code Accept} header: the formats in preference order with falling q-values. */
    static String acceptHeader(List<Format> formats) {
        StringBuilder sb = new StringBuilder(formats.get(0).mediaType());
        double q = 1.0;
        for (int i = 1; i < formats.size(); i++) {
            q = q - 0.1;
            if (formats.get(i) == Format.JSON) {
                q = Math.min(q, 0.5); // JSON only when nothing binary fits
            }
            sb.append(", ").append(formats.get(i).mediaType()).append(";q=")
                    .append(String.format(Locale.ROOT, "%.1f", Math.max(q, 0.1)));
        }
        return sb.toString();
    }

    /** The Accept header this client sends. */
    public String accept() {
        return accept;
    }

    // ------------------------------------------------------------------ single requests

    /** The embeddings of {@code texts} in one request (at most 2048 texts). */
    public Embeddings embed(List<String> texts) {
        return embed(request(texts));
    }

    /** Sends a request as given (the client's model, dtype and dimensions fill only fields left null). */
    public Embeddings embed(EmbeddingsRequest request) {
        return join(embedAsync(request));
    }

    public CompletableFuture<Embeddings> embedAsync(EmbeddingsRequest request) {
        EmbeddingsRequest r = complete(request);
        HttpRequest.Builder hb = HttpRequest.newBuilder(endpoint)
                .timeout(timeout)
                .header("Content-Type", "application/json")
                .header("Accept", accept)
                .POST(HttpRequest.BodyPublishers.ofByteArray(DensewireJson.writeRequest(r)));
        if (gzip) {
            hb.header("Accept-Encoding", "gzip");
        }
        if (apiKey != null) {
            hb.header("Authorization", "Bearer " + apiKey);
        }
        return retrier.send(hb.build(), HttpResponse.BodyHandlers.ofByteArray())
                .thenApply(a -> Responses.decode(a.response(), a.attempts()))
                .thenCompose(e -> dequantize ? dequantizeAsync(e) : CompletableFuture.completedFuture(e));
    }

    /**
     * The per-token embeddings of each text (the model's last hidden state of every token, special tokens included):
     * TEI's {@code POST /embed_all} (SPEC.md 6.4), one {@code (tokens, hidden)} matrix per text over one buffer
     * ({@link dev.densewire.RaggedTensor#matrix}), asked for in this client's formats (densewire's ragged raw body
     * first by default) or read from TEI's own {@code [[[f32]]]} JSON. {@code truncate}: cut texts longer than the
     * model's maximum (null: the server's default).
     */
    public RaggedEmbeddings embedTokens(List<String> texts, Boolean truncate) {
        return join(embedTokensAsync(texts, truncate));
    }

    public CompletableFuture<RaggedEmbeddings> embedTokensAsync(List<String> texts, Boolean truncate) {
        return postRoot("embed_all", TokenBodies.request(texts, truncate)).thenApply(a -> TokenBodies.decode(a.response(), a.attempts()));
    }

    /**
     * The sparse (SPLADE) vector of each text: TEI's {@code POST /embed_sparse}, per text its non-zero vocabulary
     * weights as a {@link SparseTensor} whose indices and values are one buffer each, asked for in this client's
     * formats (densewire's sparse raw body first by default) or read from TEI's own {@code [[{index, value}]]} JSON
     * (which has no vocabulary size: {@link SparseOptions#vocabSize()}, else one past the largest index). The
     * request's options ({@link SparseOptions}) are TEI's ({@code truncate}, {@code truncation_direction},
     * {@code prompt_name}) and densewire serve's {@code max_active_dims}; {@link SparseOptions#DEFAULTS} sets none.
     */
    public SparseEmbeddings embedSparse(List<String> texts, SparseOptions options) {
        return join(embedSparseAsync(texts, options));
    }

    public CompletableFuture<SparseEmbeddings> embedSparseAsync(List<String> texts, SparseOptions options) {
        Objects.requireNonNull(options, "options (SparseOptions.DEFAULTS sets none)");
        return postRoot("embed_sparse", TokenBodies.sparseRequest(texts, options))
                .thenApply(a -> TokenBodies.decodeSparse(a.response(), a.attempts(), texts.size(), options.vocabSize()));
    }

    /** A JSON POST to one of TEI's routes at the server's root, with this client's Accept, key and retries. */
    private CompletableFuture<Retrier.Answer<byte[]>> postRoot(String route, byte[] json) {
        HttpRequest.Builder hb = HttpRequest.newBuilder(URI.create(base + route)).timeout(timeout)
                .header("Content-Type", "application/json").header("Accept", accept)
                .POST(HttpRequest.BodyPublishers.ofByteArray(json));
        if (apiKey != null) {
            hb.header("Authorization", "Bearer " + apiKey);
        }
        return retrier.send(hb.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    // ------------------------------------------------------------------ quantized embeddings

    /**
     * The ranges a quantization id names, from {@code GET /v1/quantization/{id}} (SPEC.md section 17.6), checked
     * ({@link DensewireJson#readQuantization}); fetched once per id and kept (the object is immutable).
     */
    public Quantization.Ranges quantization(String id) {
        return join(quantizationAsync(id));
    }

    public CompletableFuture<Quantization.Ranges> quantizationAsync(String id) {
        Objects.requireNonNull(id, "id");
        CompletableFuture<Quantization.Ranges> f = ranges.computeIfAbsent(id, this::fetchRanges);
        f.whenComplete((r, t) -> {
            if (t != null) {
                ranges.remove(id, f); // a failed fetch is not kept: the next call asks again
            }
        });
        return f;
    }

    private CompletableFuture<Quantization.Ranges> fetchRanges(String id) {
        URI uri = URI.create(base + "v1/quantization/" + URLEncoder.encode(id, StandardCharsets.UTF_8).replace("+", "%20"));
        HttpRequest.Builder hb = HttpRequest.newBuilder(uri).timeout(timeout).header("Accept", "application/json").GET();
        if (gzip) {
            hb.header("Accept-Encoding", "gzip");
        }
        if (apiKey != null) {
            hb.header("Authorization", "Bearer " + apiKey);
        }
        return retrier.send(hb.build(), HttpResponse.BodyHandlers.ofByteArray()).thenApply(a -> {
            HttpResponse<byte[]> response = a.response();
            if (response.statusCode() >= 300) {
                throw Responses.apiError(response.statusCode(), response.headers(), response.body(), a.attempts());
            }
            byte[] body = ContentCodings.decode(ContentCodings.coding(response.headers().firstValue("Content-Encoding")
                    .orElse(null)), response.body(), 1L << 30);
            Quantization.Ranges r = DensewireJson.readQuantization(body);
            if (!r.id().equals(id)) {
                throw new DensewireException(Category.INVALID_FIELD, "GET " + uri.getPath() + " answered the ranges of "
                        + r.id() + ", not " + id, -1, "id");
            }
            return r;
        });
    }

    /**
     * An {@code int8}/{@code uint8} answer as float32 with the ranges its quantization id names; any other dtype as
     * it is. Codes without an id cannot be dequantized: {@code invalid_field} on {@code quantization}.
     */
    private CompletableFuture<Embeddings> dequantizeAsync(Embeddings e) {
        Dtype dt = e.tensor().dtype();
        if (dt != Dtype.INT8 && dt != Dtype.UINT8) {
            return CompletableFuture.completedFuture(e);
        }
        if (e.quantization() == null) {
            return CompletableFuture.failedFuture(new DensewireException(Category.INVALID_FIELD, "the server answered "
                    + dt + " codes without a quantization id: no published ranges to dequantize them with", -1,
                    "quantization"));
        }
        return quantizationAsync(e.quantization()).thenApply(r -> new Embeddings(Quantization.dequantize(e.tensor(), r),
                e.model(), e.usage(), e.quantization()));
    }

    private EmbeddingsRequest request(List<String> texts) {
        return EmbeddingsRequest.of(texts);
    }

    private EmbeddingsRequest complete(EmbeddingsRequest request) {
        EmbeddingsRequest r = request.withInput(request.input());
        if (r.model() == null) {
            r.model(model);
        }
        if (r.dtype() == null && dtype != null) {
            r.dtype(dtype);
        }
        if (r.dimensions() == null) {
            r.dimensions(dimensions);
        }
        if (r.encodingFormat() == null) {
            r.encodingFormat(EncodingFormat.BASE64); // if the server answers JSON, Base64 rows are 3x smaller
        }
        return r;
    }

    // ------------------------------------------------------------------ large jobs

    /**
     * The embeddings of any number of texts: batches of {@code batchSize}, at most {@code maxConcurrency} in
     * flight, rows returned in input order, usage summed. The first failure cancels what is still pending and
     * is thrown.
     */
    public Embeddings embedMany(List<String> texts) {
        List<List<String>> batches = new ArrayList<>();
        for (int i = 0; i < texts.size(); i += batchSize) {
            batches.add(texts.subList(i, Math.min(texts.size(), i + batchSize)));
        }
        if (batches.isEmpty()) {
            return embed(texts);
        }
        Semaphore permits = new Semaphore(maxConcurrency);
        List<CompletableFuture<Embeddings>> futures = new ArrayList<>(batches.size());
        CompletableFuture<Void> failed = new CompletableFuture<>();
        try {
            for (List<String> batch : batches) {
                permits.acquire();
                if (failed.isDone()) {
                    permits.release();
                    break;
                }
                CompletableFuture<Embeddings> f = embedAsync(request(batch));
                f.whenComplete((e, t) -> {
                    permits.release();
                    if (t != null) {
                        failed.complete(null);
                    }
                });
                futures.add(f);
            }
        } catch (InterruptedException e) {
            futures.forEach(f -> f.cancel(true));
            Thread.currentThread().interrupt();
            throw new CancellationException("interrupted while waiting for a free request slot");
        }
        List<Embeddings> parts = new ArrayList<>(futures.size());
        try {
            for (CompletableFuture<Embeddings> f : futures) {
                parts.add(join(f));
            }
        } catch (RuntimeException e) {
            futures.forEach(f -> f.cancel(true));
            throw e;
        }
        return Responses.concat(parts);
    }

    private static <T> T join(CompletableFuture<T> f) {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            f.cancel(true);
            throw new CancellationException("interrupted");
        } catch (ExecutionException e) {
            throw unwrap(e.getCause());
        }
    }

    private static RuntimeException unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        if (t instanceof IOException) {
            return new UncheckedIOException((IOException) t);
        }
        return new IllegalStateException(t);
    }

    // ------------------------------------------------------------------ configuration

    /** Options of the client. */
    public static final class Builder {
        private final URI baseUri;
        private HttpClient http;
        private String apiKey;
        private String model;
        private Dtype dtype;
        private Integer dimensions;
        private List<Format> formats = DEFAULT_FORMATS;
        private Duration timeout = Duration.ofSeconds(60);
        private int maxConcurrency = 4;
        private int batchSize = 256;
        private boolean gzip = true;
        private boolean dequantize;
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

        /** The default model of requests that name none (else the server's default). */
        public Builder model(String model) {
            this.model = model;
            return this;
        }

        /** The element type to ask for (float32, float16, bfloat16, int8, uint8, binary). */
        public Builder dtype(Dtype dtype) {
            this.dtype = dtype;
            return this;
        }

        public Builder dimensions(Integer dimensions) {
            this.dimensions = dimensions;
            return this;
        }

        /**
         * The acceptable formats in preference order (default raw, MessagePack, Protobuf, JSON). Arrow needs
         * densewire-arrow on the class path.
         */
        public Builder formats(Format... preference) {
            this.formats = Retrier.preference(preference);
            return this;
        }

        /** Rows per request of {@link #embedMany} (1 to 2048; default 256). */
        public Builder batchSize(int batchSize) {
            if (batchSize < 1 || batchSize > 2048) {
                throw new IllegalArgumentException("batchSize must be 1..2048, got " + batchSize);
            }
            this.batchSize = batchSize;
            return this;
        }

        /** Requests in flight at once in {@link #embedMany} (default 4). */
        public Builder maxConcurrency(int maxConcurrency) {
            if (maxConcurrency < 1) {
                throw new IllegalArgumentException("maxConcurrency must be at least 1");
            }
            this.maxConcurrency = maxConcurrency;
            return this;
        }

        public Builder timeout(Duration timeout) {
            this.timeout = Objects.requireNonNull(timeout);
            return this;
        }

        /**
         * Turn {@code int8}/{@code uint8} answers back into float32 (default false): each answer's quantization id
         * names ranges the client fetches once from {@code GET /v1/quantization/{id}} (SPEC.md section 17.6) and
         * dequantizes with ({@link Quantization#dequantize}). The answer keeps its id; other dtypes are left as
         * they are.
         */
        public Builder dequantize(boolean dequantize) {
            this.dequantize = dequantize;
            return this;
        }

        /** Ask for gzip-compressed responses (default true). */
        public Builder gzip(boolean gzip) {
            this.gzip = gzip;
            return this;
        }

        /**
         * How many times a request is sent again after a {@code 429} or {@code 503} answer or a connection that
         * failed before any answer (default 2, as the OpenAI SDKs; 0 never retries). Other answers are never
         * retried (SPEC.md section 18, {@link RetryPolicy}).
         */
        public Builder maxRetries(int maxRetries) {
            this.maxRetries = Retrier.checkMaxRetries(maxRetries);
            return this;
        }

        /**
         * The backoff before retry n: a uniform wait in {@code [0, min(cap, base * 2^(n-1)))} (full jitter), added to
         * the server's {@code Retry-After} (defaults 500 ms and 8 s). A {@code Retry-After} over a minute is not
         * waited for: the error comes at once and carries it ({@link DensewireApiException#retryAfter()}).
         */
        public Builder retryBackoff(Duration base, Duration cap) {
            Retrier.checkBackoff(base, cap);
            this.backoffBase = base;
            this.backoffCap = cap;
            return this;
        }

        /**
         * The source of the backoff's random draws, each uniform in [0, 1) (default
         * {@link RetryPolicy#DEFAULT_RANDOM}, {@code ThreadLocalRandom}): the jitter of retry n is {@code draw *
         * min(cap, base * 2^(n-1))} seconds. Pass {@code new SplittableRandom(seed)::nextDouble} (from one thread) or
         * {@code new Random(seed)::nextDouble} for a reproducible schedule, a constant to test one wait. Called from
         * the HttpClient's threads.
         */
        public Builder retryRandom(java.util.function.DoubleSupplier random) {
            this.retryRandom = Retrier.checkRandom(random);
            return this;
        }

        /** Use this HttpClient (its executor, proxy, TLS and HTTP version settings). */
        public Builder httpClient(HttpClient http) {
            this.http = http;
            return this;
        }

        public DensewireClient build() {
            if (formats.contains(Format.ARROW) && !ArrowSupport.available()) {
                throw new IllegalStateException("Format.ARROW needs dev.densewire:densewire-arrow on the class path");
            }
            return new DensewireClient(this);
        }
    }

}
