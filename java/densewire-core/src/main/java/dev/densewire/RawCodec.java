package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * The raw body of SPEC.md section 7: the tensor's little-endian bytes, described by {@code Densewire-*} headers.
 */
public final class RawCodec {
    public static final String VERSION = "Densewire-Version";
    public static final String DTYPE = "Densewire-Dtype";
    public static final String SHAPE = "Densewire-Shape";
    public static final String BYTEORDER = "Densewire-Byteorder";
    public static final String MODEL = "Densewire-Model";
    public static final String PROMPT_TOKENS = "Densewire-Prompt-Tokens";
    public static final String TOTAL_TOKENS = "Densewire-Total-Tokens";
    /** The quantization id of an {@code int8}/{@code uint8} response (SPEC.md section 17.5). */
    public static final String QUANTIZATION = "Densewire-Quantization";

    private static final Pattern SHAPE_VALUE = Pattern.compile("[0-9]+,[0-9]+");
    private static final Pattern COUNT_VALUE = Pattern.compile("[0-9]+");

    private RawCodec() {
    }

    /** The body: the tensor's bytes, little-endian (a copy). */
    public static byte[] encode(Tensor tensor) {
        return tensor.toByteArray();
    }

    /**
     * The headers describing a body, in the order of SPEC.md section 7; model, token and quantization headers only
     * when the embeddings carry them.
     */
    public static Map<String, String> headers(Embeddings embeddings) {
        Tensor t = embeddings.tensor();
        Map<String, String> h = new LinkedHashMap<>();
        h.put(VERSION, "1");
        h.put(DTYPE, t.dtype().wireName());
        h.put(SHAPE, t.rows() + "," + t.dims());
        h.put(BYTEORDER, "little");
        if (embeddings.model() != null) {
            h.put(MODEL, embeddings.model());
        }
        if (embeddings.usage() != null) {
            h.put(PROMPT_TOKENS, Long.toString(embeddings.usage().promptTokens()));
            h.put(TOTAL_TOKENS, Long.toString(embeddings.usage().totalTokens()));
        }
        if (embeddings.quantization() != null) {
            h.put(QUANTIZATION, embeddings.quantization());
        }
        return h;
    }

    /** Decodes a body with its headers (names matched case-insensitively); the tensor wraps {@code body}. */
    public static Embeddings decode(Map<String, String> headers, byte[] body) {
        Map<String, String> ci = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
        ci.putAll(headers);
        return decode(ci::get, ByteBuffer.wrap(body));
    }

    /**
     * Decodes a body; {@code header} returns a header's value by name, matching names case-insensitively (as
     * {@code java.net.http.HttpHeaders} does), or null when absent. The tensor wraps {@code body} without copying.
     */
    public static Embeddings decode(Function<String, String> header, ByteBuffer body) {
        String kind = header.apply(RaggedRaw.KIND);
        Ragged.checkNoKind(kind != null, kind, RaggedRaw.KIND);
        String dtypeName = header.apply(DTYPE);
        if (dtypeName == null) {
            throw DensewireException.on(Category.INVALID_FIELD, DTYPE, "header is missing");
        }
        Dtype dtype = Dtype.fromWireName(dtypeName.trim(), DTYPE);
        String shape = header.apply(SHAPE);
        if (shape == null) {
            throw DensewireException.on(Category.INVALID_FIELD, SHAPE, "header is missing");
        }
        shape = shape.trim();
        if (!SHAPE_VALUE.matcher(shape).matches()) {
            throw DensewireException.on(Category.INVALID_FIELD, SHAPE,
                    "must be n,d in decimal without spaces, got " + Dtype.quote(shape));
        }
        int comma = shape.indexOf(',');
        long n = parseCount(shape.substring(0, comma), SHAPE);
        long d = parseCount(shape.substring(comma + 1), SHAPE);
        String order = header.apply(BYTEORDER);
        if (order != null && !order.trim().equals("little")) {
            throw DensewireException.on(Category.INVALID_FIELD, BYTEORDER,
                    "raw bodies are little-endian, got " + Dtype.quote(order));
        }
        Tensor tensor = Shapes.tensor(dtype, n, d, body, null, SHAPE);
        String model = header.apply(MODEL);
        String prompt = header.apply(PROMPT_TOKENS);
        String total = header.apply(TOTAL_TOKENS);
        Embeddings.Usage usage = null;
        if (prompt != null || total != null) {
            usage = new Embeddings.Usage(prompt == null ? 0 : parseCount(prompt.trim(), PROMPT_TOKENS),
                    total == null ? 0 : parseCount(total.trim(), TOTAL_TOKENS));
        }
        String quantization = header.apply(QUANTIZATION);
        return new Embeddings(tensor, model, usage, quantization == null ? null : quantization.trim());
    }

    static long parseCount(String s, String field) {
        if (!COUNT_VALUE.matcher(s).matches() || s.length() > 18) {
            throw DensewireException.on(Category.INVALID_FIELD, field, "not a non-negative decimal integer: " + Dtype.quote(s));
        }
        return Long.parseLong(s);
    }
}
