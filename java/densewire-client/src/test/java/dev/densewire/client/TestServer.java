package dev.densewire.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.densewire.DensewireException;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.Format;
import dev.densewire.MsgpackCodec;
import dev.densewire.ProtobufCodec;
import dev.densewire.RawCodec;
import dev.densewire.Tensor;
import dev.densewire.arrow.ArrowCodec;
import dev.densewire.jackson.DensewireJson;
import dev.densewire.jackson.EmbeddingsRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.zip.GZIPOutputStream;

/**
 * An in-process embeddings server answering like SPEC.md sections 6, 11 and 12: it negotiates the format from
 * {@code Accept} (q-values, server order JSON, raw, msgpack, protobuf, arrow at equal q), and answers with the
 * body a {@code responder} gives for the parsed request.
 */
final class TestServer implements AutoCloseable {
    /** What to answer: the embeddings for a request, or throw a DensewireException for an error answer. */
    interface Responder extends Function<EmbeddingsRequest, Embeddings> {
    }

    private final HttpServer server;
    private final ExecutorService executor = Executors.newFixedThreadPool(8);
    final ConcurrentLinkedQueue<String> accepts = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<Format> served = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<EmbeddingsRequest> requests = new ConcurrentLinkedQueue<>();
    final AtomicInteger inFlight = new AtomicInteger();
    final AtomicInteger maxInFlight = new AtomicInteger();
    volatile Responder responder;
    volatile String apiKey;
    volatile long delayMillis;
    /** When set, the body is answered as-is with this content type (an OpenAI-style server ignoring Accept). */
    volatile byte[] fixedBody;
    volatile String fixedContentType;
    volatile Map<String, String> fixedHeaders = Map.of();
    volatile int fixedStatus = 200;
    /** The published quantization objects of GET /v1/quantization/{id} (SPEC.md 17.6), by id, and the GETs made. */
    volatile Map<String, byte[]> quantizationObjects = Map.of();
    final AtomicInteger quantizationFetches = new AtomicInteger();

    TestServer(Responder responder) throws IOException {
        this.responder = responder;
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.setExecutor(executor);
        server.createContext("/v1/embeddings", this::handle);
        server.createContext("/v1/quantization/", this::handleQuantization);
        server.start();
    }

    URI uri() {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
    }

    private void handle(HttpExchange ex) throws IOException {
        int now = inFlight.incrementAndGet();
        maxInFlight.accumulateAndGet(now, Math::max);
        try {
            if (delayMillis > 0) {
                Thread.sleep(delayMillis);
            }
            byte[] reqBody = ex.getRequestBody().readAllBytes();
            String accept = ex.getRequestHeaders().getFirst("Accept");
            accepts.add(String.valueOf(accept));
            if (fixedBody != null) {
                fixedHeaders.forEach((k, v) -> ex.getResponseHeaders().add(k, v));
                send(ex, fixedStatus, fixedContentType, fixedBody, false);
                return;
            }
            if (apiKey != null && !("Bearer " + apiKey).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
                throw new DensewireException(DensewireException.Category.UNAUTHORIZED, "missing or wrong API key", -1, null);
            }
            EmbeddingsRequest req = DensewireJson.readRequest(reqBody);
            if (req.dtype() != null) {
                Dtype.fromWireName(req.dtype());
            }
            requests.add(req);
            Format format = negotiate(accept);
            if (format == null) {
                throw new DensewireException(DensewireException.Category.NOT_ACCEPTABLE,
                        "supported: application/json, application/octet-stream, ...", -1, "Accept");
            }
            Embeddings e = responder.apply(req);
            served.add(format);
            boolean gzip = String.valueOf(ex.getRequestHeaders().getFirst("Accept-Encoding")).contains("gzip");
            ex.getResponseHeaders().add("Vary", "Accept, Accept-Encoding");
            switch (format) {
                case RAW:
                    RawCodec.headers(e).forEach((k, v) -> ex.getResponseHeaders().add(k, v));
                    send(ex, 200, format.mediaType(), RawCodec.encode(e.tensor()), gzip);
                    break;
                case MSGPACK:
                    send(ex, 200, format.mediaType(), MsgpackCodec.encode(e), gzip);
                    break;
                case PROTOBUF:
                    send(ex, 200, format.mediaType(), ProtobufCodec.encodeResponse(e), gzip);
                    break;
                case ARROW:
                    send(ex, 200, format.mediaType(), ArrowCodec.encode(e), gzip);
                    break;
                default: {
                    EncodingFormat ef = EncodingFormat.fromWireName(req.encodingFormat() == null ? "float" : req.encodingFormat());
                    Endianness order = Endianness.fromWireName(req.byteorder() == null ? "little" : req.byteorder());
                    send(ex, 200, format.mediaType(), DensewireJson.writeResponse(e, ef, order), gzip);
                }
            }
        } catch (DensewireException e) {
            send(ex, e.category().httpStatus(), "application/json", DensewireJson.writeError(e), false);
        } catch (RuntimeException e) {
            DensewireException wrapped = new DensewireException(DensewireException.Category.UNAVAILABLE, e.toString(), -1, null);
            send(ex, 500, "application/json", DensewireJson.writeError(wrapped), false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            inFlight.decrementAndGet();
            ex.close();
        }
    }

    private void handleQuantization(HttpExchange ex) throws IOException {
        try {
            quantizationFetches.incrementAndGet();
            String id = ex.getRequestURI().getPath().substring("/v1/quantization/".length());
            byte[] body = quantizationObjects.get(id);
            if (body == null) {
                send(ex, 404, "application/json", DensewireJson.writeError(new DensewireException(
                        DensewireException.Category.NOT_FOUND, "no quantization " + id, -1, "id")), false);
            } else {
                ex.getResponseHeaders().add("Cache-Control", "public, max-age=31536000, immutable");
                send(ex, 200, "application/json", body, String.valueOf(ex.getRequestHeaders().getFirst("Accept-Encoding"))
                        .contains("gzip"));
            }
        } finally {
            ex.close();
        }
    }

    private static void send(HttpExchange ex, int status, String type, byte[] body, boolean gzip) throws IOException {
        if (gzip && body.length > 64) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            try (GZIPOutputStream z = new GZIPOutputStream(buf)) {
                z.write(body);
            }
            body = buf.toByteArray();
            ex.getResponseHeaders().add("Content-Encoding", "gzip");
        }
        ex.getResponseHeaders().add("Content-Type", type);
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    /** RFC 9110 negotiation over our five types: highest q wins, server order breaks ties, q=0 excludes. */
    static Format negotiate(String accept) {
        if (accept == null || accept.isBlank()) {
            return Format.JSON;
        }
        Format best = null;
        double bestQ = 0;
        for (Format f : Format.values()) {
            double q = quality(accept, f);
            if (q > bestQ) {
                best = f;
                bestQ = q;
            }
        }
        return best;
    }

    private static double quality(String accept, Format f) {
        double q = 0;
        int specificity = -1;
        for (String range : accept.split(",")) {
            String[] parts = range.trim().split(";");
            String type = parts[0].trim().toLowerCase(Locale.ROOT);
            double rq = 1;
            for (int i = 1; i < parts.length; i++) {
                String p = parts[i].trim();
                if (p.startsWith("q=")) {
                    rq = Double.parseDouble(p.substring(2));
                }
            }
            int spec = type.equals("*/*") ? 0 : type.equals("application/*") ? 1
                    : (type.equals(f.mediaType()) || f.aliases().contains(type)) ? 2 : -1;
            if (spec > specificity) {
                specificity = spec;
                q = rq;
            }
        }
        return specificity < 0 ? 0 : q;
    }

    /** Row i of a batch: {i-th text's number, its length, 0.5, -1}: rows can be traced back to their inputs. */
    static Embeddings numbered(EmbeddingsRequest req) {
        @SuppressWarnings("unchecked")
        List<String> texts = (List<String>) req.input();
        float[] v = new float[texts.size() * 4];
        for (int i = 0; i < texts.size(); i++) {
            String t = texts.get(i);
            v[i * 4] = Float.parseFloat(t.substring(t.indexOf(' ') + 1));
            v[i * 4 + 1] = t.length();
            v[i * 4 + 2] = 0.5f;
            v[i * 4 + 3] = -1f;
        }
        return new Embeddings(Tensor.ofFloats(texts.size(), 4, v), req.model(),
                new Embeddings.Usage(texts.size() * 2L, texts.size() * 2L));
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
