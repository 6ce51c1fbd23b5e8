package dev.densewire.jackson;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.JsonEnvelope;
import dev.densewire.Tensor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The Open Inference Protocol (KServe v2) response reader of SPEC.md section 19: a JSON object alone, or the
 * binary tensor extension's JSON header of {@code Inference-Header-Content-Length} bytes followed by the blobs of
 * the outputs that have {@code parameters.binary_data_size}. Tensors read from blobs are views of the body (no
 * copy), and so are {@code BYTES} elements. Checks run in the spec's order; the first failure is a
 * {@link DensewireException} with its category, its offset in the body and its field.
 *
 * <pre>{@code
 * HttpResponse<byte[]> response = http.send(request, HttpResponse.BodyHandlers.ofByteArray());
 * KserveResponse r = Kserve.decode(name -> response.headers().firstValue(name).orElse(null),
 *         ByteBuffer.wrap(response.body()));
 * Tensor t = r.output("embedding").tensor(); // a view of the body
 * }</pre>
 */
public final class Kserve {
    /** The header giving the byte length of the JSON header before the blobs. */
    public static final String HEADER_LENGTH = "Inference-Header-Content-Length";

    private static final String[] NAMES = {"FP32", "FP16", "BF16", "FP64", "INT8", "UINT8"};
    private static final Dtype[] DTYPES = {Dtype.FLOAT32, Dtype.FLOAT16, Dtype.BFLOAT16, Dtype.FLOAT64, Dtype.INT8,
        Dtype.UINT8};
    private static final List<String> OTHER = List.of("BOOL", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UINT64");

    private Kserve() {
    }

    /** The densewire dtype of a KServe datatype, or null for {@code BYTES}; {@code unknown_dtype} on {@code field}. */
    public static Dtype dtypeOf(String datatype, String field) {
        if (datatype.equals("BYTES")) {
            return null;
        }
        for (int i = 0; i < NAMES.length; i++) {
            if (NAMES[i].equals(datatype)) {
                return DTYPES[i];
            }
        }
        String expected = "expected one of " + String.join(", ", NAMES) + " or BYTES";
        String shown = datatype.length() > 40 ? datatype.substring(0, 40) : datatype;
        throw new DensewireException(Category.UNKNOWN_DTYPE, OTHER.contains(datatype)
                ? datatype + " has no densewire dtype; " + expected : "unknown datatype \"" + shown + "\"; " + expected,
                -1, field);
    }

    /** The KServe datatype of a dtype, or null ({@code binary} has none). */
    public static String datatypeOf(Dtype dtype) {
        for (int i = 0; i < DTYPES.length; i++) {
            if (DTYPES[i] == dtype) {
                return NAMES[i];
            }
        }
        return null;
    }

    /** Reads a response body with its HTTP headers (names matched case-insensitively). */
    public static KserveResponse decode(Map<String, String> headers, byte[] body) {
        Map<String, String> ci = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
        ci.putAll(headers);
        return decode(ci::get, ByteBuffer.wrap(body));
    }

    /**
     * Reads a response body, from its position to its limit (offsets count from its position); {@code header}
     * gives a header's value by name, case-insensitively (as {@code java.net.http.HttpHeaders} does), or null.
     */
    public static KserveResponse decode(Function<String, String> header, ByteBuffer body) {
        ByteBuffer b = body.slice();
        int len = b.remaining();
        int h = headerLength(header.apply(HEADER_LENGTH), len);
        if (h == 0) {
            throw new DensewireException(Category.MALFORMED,
                    "a response has a JSON header; Inference-Header-Content-Length is 0", 0, HEADER_LENGTH);
        }
        if (h < 0) {
            h = len;
        }
        JsonNode doc = parseHeader(b, h);
        JsonNode outputs = doc.get("outputs");
        if (outputs == null || !outputs.isArray()) {
            throw invalid("outputs", "must be an array of outputs, not " + kind(outputs));
        }
        List<Spec> specs = new ArrayList<>();
        for (int i = 0; i < outputs.size(); i++) {
            specs.add(spec(i, outputs.get(i)));
        }
        long pos = h;
        List<KserveOutput> read = new ArrayList<>(specs.size());
        for (Spec s : specs) {
            String f = s.field;
            JsonNode data = s.object.get("data");
            Tensor tensor = null;
            List<ByteBuffer> elements = null;
            if (s.size >= 0 && data != null) {
                throw invalid(f + ".data", "has both data and parameters.binary_data_size");
            }
            if (s.size < 0 && data == null) {
                throw invalid(f + ".data", "has neither data nor parameters.binary_data_size");
            }
            if (s.size >= 0) {
                String sfield = f + ".parameters.binary_data_size";
                if (s.size > len - pos) {
                    throw new DensewireException(Category.TRUNCATED, "a blob of " + s.size + " bytes at offset " + pos
                            + " runs past the end of the " + len + "-byte body", len, sfield);
                }
                int start = (int) pos;
                int size = (int) s.size;
                pos += size;
                ByteBuffer blob = b.duplicate().position(start).limit(start + size).slice();
                if (s.dtype == null) {
                    elements = bytesElements(blob, start, f);
                    if (count(s.shape) != elements.size()) {
                        throw new DensewireException(Category.SHAPE_MISMATCH, elements.size() + " BYTES elements, the shape "
                                + Arrays.toString(s.shape) + " holds " + count(s.shape), -1, f);
                    }
                } else {
                    long[] nd = nd(s.shape);
                    long expected = s.dtype.rowBytes(nd[1]) < 0 ? -1 : multiply(nd[0], s.dtype.rowBytes(nd[1]));
                    if (expected < 0 || nd[0] > Integer.MAX_VALUE || nd[1] > Integer.MAX_VALUE) {
                        throw invalid(f + ".shape", "is too large: no body holds it");
                    }
                    if (size != expected) {
                        throw new DensewireException(Category.LENGTH_MISMATCH, "a blob of " + size + " bytes, the shape "
                                + Arrays.toString(s.shape) + " of " + s.datatype + " needs " + expected,
                                start + Math.min(size, expected), sfield);
                    }
                    tensor = Tensor.of(s.dtype, (int) nd[0], (int) nd[1], blob);
                }
            } else {
                String dfield = f + ".data";
                if (!data.isArray()) {
                    throw invalid(dfield, "must be an array, not " + kind(data));
                }
                List<JsonNode> values = new ArrayList<>();
                flatten(data, values);
                if (count(s.shape) != values.size()) {
                    throw new DensewireException(Category.SHAPE_MISMATCH, values.size() + " elements, the shape "
                            + Arrays.toString(s.shape) + " holds " + count(s.shape), -1, dfield);
                }
                if (s.dtype == null) {
                    elements = new ArrayList<>(values.size());
                    for (int j = 0; j < values.size(); j++) {
                        JsonNode v = values.get(j);
                        if (!v.isTextual()) {
                            throw invalid(dfield + "[" + j + "]", "must be a string, not " + kind(v));
                        }
                        elements.add(ByteBuffer.wrap(v.textValue().getBytes(java.nio.charset.StandardCharsets.UTF_8))
                                .asReadOnlyBuffer());
                    }
                } else {
                    tensor = fromJson(values, s.dtype, nd(s.shape), dfield);
                }
            }
            read.add(new KserveOutput(s.name, s.datatype, s.shape, s.parameters, s.size >= 0, tensor,
                    elements == null ? null : List.copyOf(elements)));
        }
        if (pos != len) {
            throw new DensewireException(Category.MALFORMED, (len - pos) + " bytes after the last tensor", pos, null);
        }
        JsonNode params = doc.get("parameters");
        return new KserveResponse(text(doc, "model_name"), text(doc, "model_version"), text(doc, "id"),
                params != null && params.isObject() ? (ObjectNode) params : JsonNodeFactory.instance.objectNode(),
                List.copyOf(read));
    }

    /** Step 1: the header length, -1 when absent. */
    private static int headerLength(String value, int bodyLength) {
        if (value == null) {
            return -1;
        }
        String t = value.trim();
        if (t.isEmpty() || !t.chars().allMatch(c -> c >= '0' && c <= '9')) {
            String shown = value.length() > 40 ? value.substring(0, 40) : value;
            throw invalid(HEADER_LENGTH, "must be a decimal byte count, not \"" + shown + "\"");
        }
        long n = t.length() > 18 ? Long.MAX_VALUE : Long.parseLong(t);
        if (n > bodyLength) {
            throw new DensewireException(Category.TRUNCATED, "the JSON header is " + t + " bytes but the body has only "
                    + bodyLength, bodyLength, HEADER_LENGTH);
        }
        return (int) n;
    }

    /** Step 2: the header, a UTF-8 JSON object. */
    private static JsonNode parseHeader(ByteBuffer b, int h) {
        byte[] text;
        int offset;
        if (b.hasArray()) {
            text = b.array();
            offset = b.arrayOffset() + b.position();
        } else {
            text = new byte[h];
            b.duplicate().get(text);
            offset = 0;
        }
        byte[] head = offset == 0 && text.length == h ? text : Arrays.copyOfRange(text, offset, offset + h);
        DensewireJson.requireUtf8(head);
        JsonNode doc;
        try {
            doc = DensewireJson.mapper().readTree(head);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw DensewireJson.translate(e);
        } catch (java.io.IOException e) {
            throw new DensewireException(Category.MALFORMED, "the inference header is not UTF-8 JSON: " + e.getMessage(),
                    -1, null, e);
        }
        if (doc == null || !doc.isObject()) {
            throw new DensewireException(Category.MALFORMED, "the inference header must be a JSON object, not "
                    + kind(doc), 0, null);
        }
        return doc;
    }

    private static final class Spec {
        String field;
        String name;
        String datatype;
        Dtype dtype;
        long[] shape;
        long size = -1;
        JsonNode object;
        ObjectNode parameters;
    }

    /** Step 3: one output's header. */
    private static Spec spec(int i, JsonNode o) {
        Spec s = new Spec();
        s.field = "outputs[" + i + "]";
        if (!o.isObject()) {
            throw invalid(s.field, "must be an object, not " + kind(o));
        }
        s.object = o;
        JsonNode name = o.get("name");
        if (name == null || !name.isTextual()) {
            throw invalid(s.field + ".name", "must be a string, not " + kind(name));
        }
        s.name = name.textValue();
        JsonNode datatype = o.get("datatype");
        if (datatype == null || !datatype.isTextual()) {
            throw invalid(s.field + ".datatype", "must be a string, not " + kind(datatype));
        }
        s.datatype = datatype.textValue();
        JsonNode params = o.get("parameters");
        if (params == null || params.isNull()) {
            s.parameters = JsonNodeFactory.instance.objectNode();
        } else if (params.isObject()) {
            s.parameters = (ObjectNode) params;
        } else {
            throw invalid(s.field + ".parameters", "must be an object, not " + kind(params));
        }
        JsonNode size = s.parameters.get("binary_data_size");
        if (size != null && !size.isNull()) {
            // SPEC.md 19.3: an integer from 0 to 2^53 - 1; nothing past it is capped or cut to fit
            if (!size.isIntegralNumber() || size.bigIntegerValue().signum() < 0
                    || size.bigIntegerValue().bitLength() > 53) {
                throw invalid(s.field + ".parameters.binary_data_size", "must be an integer from 0 to 2^53 - 1, not " + size);
            }
            s.size = size.longValue();
        }
        s.dtype = dtypeOf(s.datatype, s.field + ".datatype");
        JsonNode shape = o.get("shape");
        boolean ok = shape != null && shape.isArray() && (s.dtype == null || shape.size() == 1 || shape.size() == 2);
        if (ok) {
            s.shape = new long[shape.size()];
            for (int k = 0; k < shape.size(); k++) {
                JsonNode v = shape.get(k);
                if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0
                        || s.dtype != null && v.longValue() > Integer.MAX_VALUE) {
                    ok = false;
                    break;
                }
                s.shape[k] = v.longValue();
            }
        }
        if (!ok) {
            String shown = shape == null ? "absent" : shape.toString();
            throw invalid(s.field + ".shape", "must be an array of " + (s.dtype == null ? "" : "one or two (each at most 2^31 - 1) ")
                    + "non-negative integers, not " + (shown.length() > 60 ? shown.substring(0, 60) : shown));
        }
        JsonNode q = s.parameters.get("quantization");
        if (q != null && !q.isNull() && !q.isTextual()) {
            throw invalid(s.field + ".parameters.quantization", "must be a string, not " + kind(q));
        }
        return s;
    }

    /** The elements of a BYTES blob (a 4-byte little-endian length, then the bytes); {@code start}: its offset. */
    private static List<ByteBuffer> bytesElements(ByteBuffer blob, int start, String field) {
        List<ByteBuffer> out = new ArrayList<>();
        ByteBuffer le = blob.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int end = blob.remaining();
        int pos = 0;
        while (pos < end) {
            if (end - pos < 4) {
                throw new DensewireException(Category.MALFORMED, "a BYTES element length needs 4 bytes, " + (end - pos)
                        + " left in the tensor", start + pos, field);
            }
            long n = Integer.toUnsignedLong(le.getInt(pos));
            if (n > end - pos - 4) {
                throw new DensewireException(Category.MALFORMED, "a BYTES element of " + n + " bytes runs past the end of "
                        + "its tensor (" + (end - pos - 4) + " bytes left)", start + pos, field);
            }
            out.add(blob.duplicate().position(pos + 4).limit(pos + 4 + (int) n).slice().asReadOnlyBuffer());
            pos += 4 + (int) n;
        }
        return out;
    }

    private static void flatten(JsonNode v, List<JsonNode> out) {
        if (v.isArray()) {
            for (JsonNode x : v) {
                flatten(x, out);
            }
        } else {
            out.add(v);
        }
    }

    private static Tensor fromJson(List<JsonNode> values, Dtype dtype, long[] nd, String field) {
        if (nd[0] > Integer.MAX_VALUE || nd[1] > Integer.MAX_VALUE) {
            throw invalid(field.substring(0, field.length() - ".data".length()) + ".shape",
                    "is larger than this implementation supports");
        }
        ByteBuffer out = ByteBuffer.allocate(values.size() * dtype.itemBytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int j = 0; j < values.size(); j++) {
            JsonNode v = values.get(j);
            String f = field + "[" + j + "]";
            if (!v.isNumber()) {
                throw invalid(f, "must be a number, not " + kind(v));
            }
            JsonEnvelope.putNumber(out, dtype, v.doubleValue(), f); // 3.0 is the integer 3 (SPEC.md 3.5)
        }
        out.flip();
        return Tensor.of(dtype, (int) nd[0], (int) nd[1], out);
    }

    /** {@code [n, d]} as {@code (n, d)}, {@code [d]} as {@code (1, d)}. */
    private static long[] nd(long[] shape) {
        return shape.length == 1 ? new long[] {1, shape[0]} : new long[] {shape[0], shape[1]};
    }

    /** The element count of a shape, or -1 when it overflows a long (no body holds it). */
    private static long count(long[] shape) {
        long n = 1;
        for (long s : shape) {
            n = multiply(n, s);
            if (n < 0) {
                return -1;
            }
        }
        return n;
    }

    private static long multiply(long a, long b) {
        long hi = Math.multiplyHigh(a, b);
        long lo = a * b;
        return hi != 0 || lo < 0 ? -1 : lo;
    }

    private static String text(JsonNode doc, String key) {
        JsonNode v = doc.get(key);
        return v != null && v.isTextual() ? v.textValue() : null;
    }

    private static String kind(JsonNode v) {
        if (v == null) {
            return "absent";
        }
        switch (v.getNodeType()) {
            case NULL:
                return "null";
            case BOOLEAN:
                return "a boolean";
            case NUMBER:
                return v.isIntegralNumber() ? "an integer" : "a number";
            case STRING:
                return "a string";
            case ARRAY:
                return "an array";
            case OBJECT:
                return "an object";
            default:
                return v.getNodeType().toString().toLowerCase(java.util.Locale.ROOT);
        }
    }

    private static DensewireException invalid(String field, String message) {
        return new DensewireException(Category.INVALID_FIELD, message, -1, field);
    }
}
