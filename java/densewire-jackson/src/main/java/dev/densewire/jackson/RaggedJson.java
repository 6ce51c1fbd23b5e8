package dev.densewire.jackson;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.densewire.Base64Codec;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Dtype;
import dev.densewire.Embeddings;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.JsonEnvelope;
import dev.densewire.Ragged;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedTensor;
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.Tensor;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Ragged and sparse responses in the JSON envelope (SPEC.md 20.3): section 6.2's response with {@code kind}, per
 * item the matrix ({@code embedding} and {@code shape}) or the sparse vector ({@code indices}, {@code values},
 * {@code nnz}), and {@code dimensions} required. Items are checked in the order of {@code data}, each after its
 * {@code index}, in the spec's order; every error names its field.
 */
public final class RaggedJson {
    private RaggedJson() {
    }

    private static DensewireException invalid(String field, String message) {
        return new DensewireException(Category.INVALID_FIELD, message, -1, field);
    }

    private static DensewireException shape(String field, String message) {
        return new DensewireException(Category.SHAPE_MISMATCH, message, -1, field);
    }

    /** The parts of section 6.2 both kinds share, checked in order: kind, dtype, byteorder, dimensions, data. */
    private static final class Head {
        ObjectNode doc;
        Dtype dtype;
        Endianness order;
        long dims;
        JsonNode data;
        String model;
        Embeddings.Usage usage;
        int[] index; // data[i]'s index
    }

    private static Head head(byte[] json, String kind) {
        DensewireJson.requireUtf8(json);
        JsonNode doc;
        try {
            doc = DensewireJson.mapper().readTree(json);
        } catch (JsonProcessingException e) {
            throw DensewireJson.translate(e);
        } catch (IOException e) {
            throw new DensewireException(Category.MALFORMED, "the JSON text is not UTF-8: " + e.getMessage(), -1, null, e);
        }
        if (doc == null || !doc.isObject()) {
            throw new DensewireException(Category.MALFORMED, "an embeddings response must be a JSON object", 0, null);
        }
        Head h = new Head();
        h.doc = (ObjectNode) doc;
        // SPEC.md 20.3's order: kind, data, dtype, byteorder, dimensions, model, usage (then every index,
        // then each item by position, in full)
        JsonNode k = doc.get("kind");
        Ragged.checkKind(k == null ? null : k.isTextual() ? k.textValue() : k.toString(), kind, "kind");
        h.data = doc.get("data");
        if (h.data == null || !h.data.isArray()) {
            throw invalid("data", "missing or not an array");
        }
        JsonNode dt = doc.get("dtype");
        if (dt != null && !dt.isNull() && !dt.isTextual()) {
            throw invalid("dtype", "must be a string");
        }
        h.dtype = dt == null || dt.isNull() ? Dtype.FLOAT32 : Dtype.fromWireName(dt.textValue());
        if (kind.equals("sparse")) {
            Ragged.checkValuesDtype(h.dtype, "dtype");
        }
        JsonNode bo = doc.get("byteorder");
        if (bo != null && !bo.isNull() && !bo.isTextual()) {
            throw invalid("byteorder", "must be a string");
        }
        h.order = bo == null || bo.isNull() ? Endianness.LITTLE : Endianness.fromWireName(bo.textValue());
        JsonNode dims = doc.get("dimensions");
        if (dims == null || !dims.isIntegralNumber() || !dims.canConvertToLong() || dims.longValue() < 0) {
            throw invalid("dimensions", "required for a " + kind + " response: a non-negative integer");
        }
        h.dims = dims.longValue();
        if (kind.equals("sparse")) {
            Ragged.checkVocabulary(h.dims, "dimensions");
        }
        JsonNode m = doc.get("model");
        if (m != null && !m.isNull() && !m.isTextual()) {
            throw invalid("model", "must be a string");
        }
        h.model = m != null && m.isTextual() ? m.textValue() : null;
        h.usage = usage(h);
        boolean[] seen = new boolean[h.data.size()];
        h.index = new int[h.data.size()];
        for (int i = 0; i < h.index.length; i++) {
            h.index[i] = index(h.data.get(i), i, seen);
        }
        return h;
    }

    /** Item {@code i}: an object, its {@code index} placed by section 6.2's rule; returns the index. */
    private static int index(JsonNode item, int i, boolean[] seen) {
        if (!item.isObject()) {
            throw invalid("data[" + i + "]", "an element of data is not an object");
        }
        String f = "data[" + i + "].index";
        JsonNode ix = item.get("index");
        if (ix == null) {
            throw invalid(f, "missing");
        }
        if (!ix.isIntegralNumber() || !ix.canConvertToLong() || ix.longValue() < 0) {
            throw invalid(f, "must be a non-negative integer, got " + ix);
        }
        long k = ix.longValue();
        if (k >= seen.length) {
            throw shape(f, "index " + k + " is outside 0.." + (seen.length - 1));
        }
        if (seen[(int) k]) {
            throw shape(f, "index " + k + " occurs twice");
        }
        seen[(int) k] = true;
        return (int) k;
    }

    private static Embeddings.Usage usage(Head h) {
        JsonNode u = h.doc.get("usage");
        if (u == null || u.isNull()) {
            return null;
        }
        try {
            EmbeddingsResponse.Usage pojo = DensewireJson.mapper().treeToValue(u, EmbeddingsResponse.Usage.class);
            return pojo.toUsage();
        } catch (JsonProcessingException e) {
            throw invalid("usage", "must be a map of token counts");
        }
    }

    /** {@code count * width}, or Long.MAX_VALUE past it: a byte count no text decodes to. */
    private static long saturated(long count, long width) {
        return width != 0 && count > Long.MAX_VALUE / width ? Long.MAX_VALUE : count * width;
    }

    /** A Base64 part of exactly {@code want} bytes, swapped to little-endian from {@code order}. */
    private static byte[] base64(String text, long want, Endianness order, int item, String field) {
        byte[] b;
        try {
            b = Base64Codec.decode(text);
        } catch (DensewireException e) {
            throw e.withField(field);
        }
        if (b.length != want) {
            throw new DensewireException(Category.LENGTH_MISMATCH, b.length + " bytes, " + want + " expected",
                    Math.min(b.length, want), field);
        }
        if (order == Endianness.BIG && item > 1) {
            for (int p = 0; p < b.length; p += item) {
                for (int a = p, z = p + item - 1; a < z; a++, z--) {
                    byte t = b[a];
                    b[a] = b[z];
                    b[z] = t;
                }
            }
        }
        return b;
    }

    /** Decodes a ragged JSON response (SPEC.md 20.3). */
    public static RaggedEmbeddings decodeRagged(byte[] json) {
        Head h = head(json, "ragged");
        long rb = h.dtype.rowBytes(h.dims);
        if (rb < 0 || h.dims > Integer.MAX_VALUE) {
            throw invalid("dimensions", "too large");
        }
        int n = h.data.size();
        byte[][] parts = new byte[n][];
        int[] counts = new int[n];
        for (int i = 0; i < n; i++) {
            JsonNode item = h.data.get(i);
            int k = h.index[i];
            String sf = "data[" + i + "].shape";
            String ef = "data[" + i + "].embedding";
            JsonNode s = item.get("shape");
            long m = -1;
            if (s != null && !s.isNull()) {
                if (!s.isArray() || s.size() != 2 || !s.get(0).canConvertToLong() || !s.get(0).isIntegralNumber()
                        || !s.get(1).isIntegralNumber() || s.get(0).longValue() < 0 || s.get(1).longValue() < 0) {
                    throw invalid(sf, "must be two non-negative integers [m, d]");
                }
                if (s.get(1).longValue() != h.dims) {
                    throw shape(sf, "shape[1] is " + s.get(1) + ", dimensions is " + h.dims);
                }
                m = s.get(0).longValue();
            }
            JsonNode e = item.get("embedding");
            if (e != null && e.isTextual()) {
                if (m < 0) {
                    throw invalid(sf, "required for a Base64 item");
                }
                parts[k] = base64(e.textValue(), saturated(m, rb), h.order, h.dtype.itemBytes(), ef);
                counts[k] = (int) m;
            } else if (e != null && e.isArray()) {
                if (m >= 0 && m != e.size()) {
                    throw shape(sf, e.size() + " rows, shape[0] is " + m);
                }
                long width = h.dtype.rowItems(h.dims);
                ByteBuffer out = ByteBuffer.allocate(Math.multiplyExact(e.size(), (int) rb)).order(ByteOrder.LITTLE_ENDIAN);
                for (int r = 0; r < e.size(); r++) {
                    JsonNode row = e.get(r);
                    if (!row.isArray() || row.size() != width) {
                        throw shape(ef + "[" + r + "]", "row " + r + " is not an array of " + width + " items");
                    }
                    for (int j = 0; j < row.size(); j++) {
                        JsonNode x = row.get(j);
                        String xf = ef + "[" + r + "][" + j + "]";
                        if (!x.isNumber()) {
                            throw invalid(xf, "must be a number");
                        }
                        JsonEnvelope.putNumber(out, h.dtype, x.doubleValue(), xf);
                    }
                }
                parts[k] = out.array();
                counts[k] = e.size();
            } else {
                throw invalid(ef, "neither a Base64 string nor an array of rows");
            }
        }
        int[] offsets = new int[n + 1];
        ByteArrayOutputStream rows = new ByteArrayOutputStream();
        for (int k = 0; k < n; k++) {
            offsets[k + 1] = Math.addExact(offsets[k], counts[k]);
            rows.write(parts[k], 0, parts[k].length);
        }
        Tensor t = Tensor.of(h.dtype, offsets[n], (int) h.dims, rows.toByteArray());
        return new RaggedEmbeddings(RaggedTensor.of(offsets, t), h.model, h.usage);
    }

    /** Decodes a sparse JSON response (SPEC.md 20.3). */
    public static SparseEmbeddings decodeSparse(byte[] json) {
        Head h = head(json, "sparse");
        int item = h.dtype.itemBytes();
        int n = h.data.size();
        byte[][] idx = new byte[n][];
        byte[][] vals = new byte[n][];
        for (int i = 0; i < n; i++) {
            JsonNode it = h.data.get(i);
            int k = h.index[i];
            String p = "data[" + i + "].";
            JsonNode nnzNode = it.get("nnz");
            long nnz = -1;
            if (nnzNode != null && !nnzNode.isNull()) {
                if (!nnzNode.isIntegralNumber() || !nnzNode.canConvertToLong() || nnzNode.longValue() < 0) {
                    throw invalid(p + "nnz", "must be a non-negative integer");
                }
                nnz = nnzNode.longValue();
            }
            JsonNode ji = it.get("indices");
            JsonNode jv = it.get("values");
            if (ji != null && ji.isTextual() && jv != null && jv.isTextual()) {
                if (nnz < 0) {
                    throw invalid(p + "nnz", "required for a Base64 item");
                }
                // a count the text cannot back is its length_mismatch (the product saturates, never wraps)
                idx[k] = base64(ji.textValue(), saturated(nnz, 4), h.order, 4, p + "indices");
                vals[k] = base64(jv.textValue(), saturated(nnz, item), h.order, item, p + "values");
            } else if (ji != null && ji.isArray() && jv != null && jv.isArray()) {
                ByteBuffer ib = ByteBuffer.allocate(4 * ji.size()).order(ByteOrder.LITTLE_ENDIAN);
                for (int j = 0; j < ji.size(); j++) {
                    JsonNode x = ji.get(j);
                    if (!x.isIntegralNumber() || !x.canConvertToLong() || x.longValue() < 0 || x.longValue() > 0xFFFFFFFFL) {
                        throw invalid(p + "indices[" + j + "]", "an index is not an integer from 0 to 2^32 - 1");
                    }
                    ib.putInt((int) x.longValue());
                }
                if (jv.size() != ji.size() || nnz >= 0 && nnz != ji.size()) {
                    throw shape(p + "values", ji.size() + " indices, " + jv.size() + " values, nnz " + nnz);
                }
                ByteBuffer vb = ByteBuffer.allocate(item * jv.size()).order(ByteOrder.LITTLE_ENDIAN);
                for (int j = 0; j < jv.size(); j++) {
                    JsonNode x = jv.get(j);
                    if (!x.isNumber()) {
                        throw invalid(p + "values[" + j + "]", "must be a number");
                    }
                    JsonEnvelope.putNumber(vb, h.dtype, x.doubleValue(), p + "values[" + j + "]");
                }
                idx[k] = ib.array();
                vals[k] = vb.array();
            } else if (ji != null && (ji.isTextual() || ji.isArray())) {
                throw invalid(p + "values", "must be of the kind of indices (both Base64 or both arrays)");
            } else {
                throw invalid(p + "indices", "neither a Base64 string nor an array");
            }
            IntBuffer ints = ByteBuffer.wrap(idx[k]).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            for (int j = 0; j < ints.limit(); j++) {
                long x = Integer.toUnsignedLong(ints.get(j));
                if (x >= h.dims || j > 0 && x <= Integer.toUnsignedLong(ints.get(j - 1))) {
                    throw invalid(p + "indices[" + j + "]", "index " + x + " is not below " + h.dims
                            + " and above the one before it");
                }
            }
        }
        int[] offsets = new int[n + 1];
        ByteArrayOutputStream ib = new ByteArrayOutputStream();
        ByteArrayOutputStream vb = new ByteArrayOutputStream();
        for (int k = 0; k < n; k++) {
            offsets[k + 1] = Math.addExact(offsets[k], idx[k].length / 4);
            ib.write(idx[k], 0, idx[k].length);
            vb.write(vals[k], 0, vals[k].length);
        }
        int[] indices = new int[offsets[n]];
        ByteBuffer.wrap(ib.toByteArray()).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(indices);
        Tensor values = Tensor.of(h.dtype, 1, offsets[n], vb.toByteArray());
        return new SparseEmbeddings(SparseTensor.of(h.dims, offsets, indices, values), h.model, h.usage);
    }

    // ------------------------------------------------------------------ encoding

    private static void base64(StringBuilder sb, ByteBuffer bytes, Endianness order, int item) {
        byte[] b = new byte[bytes.remaining()];
        bytes.duplicate().get(b);
        if (order == Endianness.BIG && item > 1) {
            for (int p = 0; p < b.length; p += item) {
                for (int a = p, z = p + item - 1; a < z; a++, z--) {
                    byte t = b[a];
                    b[a] = b[z];
                    b[z] = t;
                }
            }
        }
        sb.append('"').append(Base64.getEncoder().encodeToString(b)).append('"');
    }

    /** Row {@code r} of {@code t} as numbers; a {@code non_finite} error renamed to {@code field + [j]}. */
    private static void numbers(StringBuilder sb, Tensor t, int r, String field) {
        try {
            JsonEnvelope.appendNumbers(sb, t, r);
        } catch (DensewireException e) {
            String f = e.field().orElse("");
            throw e.withField(field + f.substring(Math.max(0, f.lastIndexOf('['))));
        }
    }

    private static byte[] tail(StringBuilder sb, String model, Embeddings.Usage usage, String kind, Dtype dtype,
            EncodingFormat format, Endianness order, long dims) {
        Embeddings.Usage u = usage == null ? new Embeddings.Usage(0, 0) : usage;
        sb.append("],\"model\":");
        JsonEnvelope.appendString(sb, model == null ? "" : model);
        sb.append(",\"usage\":{\"prompt_tokens\":").append(u.promptTokens()).append(",\"total_tokens\":")
                .append(u.totalTokens()).append("},\"kind\":\"").append(kind).append("\",\"dtype\":\"")
                .append(dtype.wireName()).append("\",\"byteorder\":\"")
                .append(format == EncodingFormat.BASE64 ? order.wireName() : "little").append("\",\"dimensions\":")
                .append(dims).append('}');
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * A ragged response as the JSON envelope.
     *
     * @throws DensewireException {@code non_finite} on {@code data[i].embedding[r][k]} for NaN or infinity as numbers
     */
    public static byte[] encode(RaggedEmbeddings e, EncodingFormat format, Endianness order) {
        RaggedTensor t = e.tensor();
        StringBuilder sb = new StringBuilder(128 + t.rows().byteLength() * 2);
        sb.append("{\"object\":\"list\",\"data\":[");
        for (int i = 0; i < t.size(); i++) {
            Tensor m = t.matrix(i);
            sb.append(i > 0 ? "," : "").append("{\"object\":\"embedding\",\"index\":").append(i).append(",\"embedding\":");
            if (format == EncodingFormat.BASE64) {
                base64(sb, m.data(), order, t.dtype().itemBytes());
            } else {
                sb.append('[');
                for (int r = 0; r < m.rows(); r++) {
                    sb.append(r > 0 ? "," : "");
                    numbers(sb, m, r, "data[" + i + "].embedding[" + r + "]");
                }
                sb.append(']');
            }
            sb.append(",\"shape\":[").append(m.rows()).append(',').append(t.dims()).append("]}");
        }
        return tail(sb, e.model(), e.usage(), "ragged", t.dtype(), format, order, t.dims());
    }

    /**
     * A sparse response as the JSON envelope.
     *
     * @throws DensewireException {@code non_finite} on {@code data[i].values[j]} for NaN or infinity as numbers
     */
    public static byte[] encode(SparseEmbeddings e, EncodingFormat format, Endianness order) {
        SparseTensor t = e.tensor();
        int item = t.dtype().itemBytes();
        StringBuilder sb = new StringBuilder(128 + t.nonZeros() * 24);
        sb.append("{\"object\":\"list\",\"data\":[");
        IntBuffer indices = t.indices();
        for (int i = 0; i < t.size(); i++) {
            int from = t.offset(i);
            int to = t.offset(i + 1);
            sb.append(i > 0 ? "," : "").append("{\"object\":\"sparse_embedding\",\"index\":").append(i)
                    .append(",\"indices\":");
            ByteBuffer vals = t.values().data().position(from * item).limit(to * item).slice();
            if (format == EncodingFormat.BASE64) {
                base64(sb, t.indexBytes().position(4 * from).limit(4 * to).slice(), order, 4);
                sb.append(",\"values\":");
                base64(sb, vals, order, item);
            } else {
                sb.append('[');
                for (int j = from; j < to; j++) {
                    sb.append(j > from ? "," : "").append(Integer.toUnsignedLong(indices.get(j)));
                }
                sb.append("],\"values\":");
                numbers(sb, Tensor.of(t.dtype(), 1, to - from, vals), 0, "data[" + i + "].values");
            }
            sb.append(",\"nnz\":").append(to - from).append('}');
        }
        return tail(sb, e.model(), e.usage(), "sparse", t.dtype(), format, order, t.vocabularySize());
    }
}
