package dev.densewire.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedMsgpack;
import dev.densewire.RaggedProtobuf;
import dev.densewire.RaggedRaw;
import dev.densewire.RaggedTensor;
import dev.densewire.SparseEmbeddings;
import dev.densewire.SparseTensor;
import dev.densewire.Tensor;
import dev.densewire.arrow.RaggedArrow;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * Per-token and sparse output (issue 32 item 6, SPEC.md 20): the client-side decode of 100 documents x 256 tokens x
 * 384 float32 (MiniLM's token-state shape, 39.3 MB of floats) as densewire's ragged raw, Arrow, MessagePack and
 * Protobuf bodies against TEI's {@code /embed_all} JSON ({@code [[[f32]]]}) read by Jackson into
 * {@code float[][][]}; and 100 sparse vectors of 200 non-zeros over a vocabulary of 30,522 against TEI's
 * {@code /embed_sparse} JSON ({@code [[{index, value}]]}) into {@code Entry[][]}. Side by side in one run, rounds
 * interleaved (every decoder once a round, after 2 warm-up rounds), best and median. Not JMH: JMH runs one benchmark
 * after the other, and the machine this ran on was shared.
 *
 * <pre>
 * mvn -f java/pom.xml -B -q install -DskipTests -pl densewire-core,densewire-jackson,densewire-arrow -am
 * cd bench/java &amp;&amp; mvn -B -q package
 * java --add-opens=java.base/java.nio=ALL-UNNAMED -cp target/benchmarks.jar dev.densewire.bench.TokenDecode [rounds] [docs]
 * java --add-opens=java.base/java.nio=ALL-UNNAMED -cp target/benchmarks.jar dev.densewire.bench.TokenDecode --check
 * </pre>
 *
 * The values are the same synthetic ones in every language's bench (bench/RESULTS-tokens.md): entry e is
 * float32(k) / 99991 - 0.5 with k = (e mod 100000) * 35761 mod 100000, computed in float32; TEI's JSON holds their
 * shortest float32 decimals (as TEI's serde writes them). {@code --check} decodes a small batch with every decoder,
 * compares it with Jackson's reading of the JSON bit for bit and exits non-zero on a difference.
 */
public final class TokenDecode {
    private static final int VOCAB = 30522;
    private static final ObjectMapper JACKSON = new ObjectMapper();

    /** One entry of TEI's {@code /embed_sparse} answer. */
    public record Entry(int index, float value) {}

    private TokenDecode() {}

    static int k(long e) {
        return (int) ((e % 100000) * 35761 % 100000);
    }

    static float tokValue(long e) {
        return (float) k(e) / 99991f - 0.5f;
    }

    static float spValue(long e) {
        return (float) k(e) / 99991f * 3f;
    }

    static int spIndex(int i, int j) {
        return j * 150 + (i * 7) % 150;
    }

    /** The shortest decimal that reads back as the same float (what TEI's serde writes). */
    static String shortest(float x) {
        BigDecimal exact = new BigDecimal(x);
        for (int p = 1; p < 10; p++) {
            BigDecimal d = exact.round(new MathContext(p));
            if (Float.parseFloat(d.toString()) == x) {
                return d.stripTrailingZeros().toPlainString();
            }
        }
        return Float.toString(x);
    }

    record Bodies(byte[] tei, byte[] raw, Map<String, String> rawHeaders, byte[] arrow, byte[] msgpack, byte[] protobuf) {}

    static Bodies tokens(int docs, int tokens, int d) {
        String[] text = new String[100000];
        for (int k = 0; k < text.length; k++) {
            text[k] = shortest((float) k / 99991f - 0.5f);
        }
        float[] values = new float[docs * tokens * d];
        StringBuilder json = new StringBuilder(docs * tokens * d * 12);
        json.append('[');
        for (int i = 0; i < docs; i++) {
            json.append(i == 0 ? "[" : ",[");
            for (int t = 0; t < tokens; t++) {
                json.append(t == 0 ? "[" : ",[");
                for (int j = 0; j < d; j++) {
                    int e = (i * tokens + t) * d + j;
                    values[e] = tokValue(e);
                    json.append(j == 0 ? "" : ",").append(text[k(e)]);
                }
                json.append(']');
            }
            json.append(']');
        }
        json.append(']');
        int[] offsets = new int[docs + 1];
        for (int i = 0; i <= docs; i++) {
            offsets[i] = i * tokens;
        }
        RaggedEmbeddings e = new RaggedEmbeddings(RaggedTensor.of(offsets, Tensor.ofFloats(docs * tokens, d, values)), "bench-model", null);
        return new Bodies(json.toString().getBytes(StandardCharsets.UTF_8), RaggedRaw.encode(e), RaggedRaw.headers(e),
                RaggedArrow.encode(e), RaggedMsgpack.encode(e), RaggedProtobuf.encodeResponse(e));
    }

    static Bodies sparse(int docs, int nnz) {
        int[] offsets = new int[docs + 1];
        int[] indices = new int[docs * nnz];
        float[] values = new float[docs * nnz];
        StringBuilder json = new StringBuilder(docs * nnz * 32).append('[');
        for (int i = 0; i < docs; i++) {
            json.append(i == 0 ? "[" : ",[");
            for (int j = 0; j < nnz; j++) {
                int e = i * nnz + j;
                indices[e] = spIndex(i, j);
                values[e] = spValue(e);
                json.append(j == 0 ? "" : ",").append("{\"index\":").append(indices[e]).append(",\"value\":")
                        .append(shortest(values[e])).append('}');
            }
            json.append(']');
            offsets[i + 1] = (i + 1) * nnz;
        }
        json.append(']');
        SparseEmbeddings e = new SparseEmbeddings(SparseTensor.of(VOCAB, offsets, indices, Tensor.ofFloats(1, docs * nnz, values)), "bench-model", null);
        return new Bodies(json.toString().getBytes(StandardCharsets.UTF_8), RaggedRaw.encode(e), RaggedRaw.headers(e),
                RaggedArrow.encode(e), RaggedMsgpack.encode(e), RaggedProtobuf.encodeResponse(e));
    }

    /** The decoders, each ending with what a client uses: Jackson's arrays, densewire's views (or one copy). */
    static Map<String, Callable<Object>> ragged(Bodies b) {
        Map<String, Callable<Object>> m = new LinkedHashMap<>();
        m.put("TEI JSON [[[f32]]], Jackson float[][][]", () -> JACKSON.readValue(b.tei(), float[][][].class));
        m.put("densewire ragged raw", () -> RaggedRaw.decodeRagged(b.rawHeaders(), b.raw()).tensor().rows().asFloatBuffer());
        m.put("densewire ragged Arrow", () -> RaggedArrow.decodeRagged(b.arrow()).tensor().rows().asFloatBuffer());
        m.put("densewire ragged MessagePack", () -> RaggedMsgpack.decodeRagged(b.msgpack()).tensor().rows().asFloatBuffer());
        m.put("densewire ragged Protobuf", () -> RaggedProtobuf.decodeRagged(b.protobuf(), true).tensor().rows().asFloatBuffer());
        return m;
    }

    static Map<String, Callable<Object>> sparse(Bodies b) {
        Map<String, Callable<Object>> m = new LinkedHashMap<>();
        m.put("TEI JSON [[{index, value}]], Jackson Entry[][]", () -> JACKSON.readValue(b.tei(), Entry[][].class));
        m.put("densewire sparse raw", () -> RaggedRaw.decodeSparse(b.rawHeaders(), b.raw()).tensor());
        m.put("densewire sparse Arrow", () -> RaggedArrow.decodeSparse(b.arrow()).tensor());
        m.put("densewire sparse MessagePack", () -> RaggedMsgpack.decodeSparse(b.msgpack()).tensor());
        m.put("densewire sparse Protobuf", () -> RaggedProtobuf.decodeSparse(b.protobuf(), true).tensor());
        return m;
    }

    static void check() throws Exception {
        Bodies t = tokens(3, 5, 7);
        float[][][] want = JACKSON.readValue(t.tei(), float[][][].class);
        List<RaggedEmbeddings> got = List.of(RaggedRaw.decodeRagged(t.rawHeaders(), t.raw()), RaggedArrow.decodeRagged(t.arrow()),
                RaggedMsgpack.decodeRagged(t.msgpack()), RaggedProtobuf.decodeRagged(t.protobuf(), true));
        for (RaggedEmbeddings g : got) {
            for (int i = 0; i < want.length; i++) {
                float[][] rows = g.tensor().matrix(i).toFloatRows();
                if (!Arrays.deepEquals(rows, want[i])) {
                    throw new AssertionError("matrix " + i + " differs from TEI's JSON: " + Arrays.deepToString(rows));
                }
            }
        }
        Bodies s = sparse(4, 6);
        Entry[][] entries = JACKSON.readValue(s.tei(), Entry[][].class);
        List<SparseEmbeddings> sg = List.of(RaggedRaw.decodeSparse(s.rawHeaders(), s.raw()), RaggedArrow.decodeSparse(s.arrow()),
                RaggedMsgpack.decodeSparse(s.msgpack()), RaggedProtobuf.decodeSparse(s.protobuf(), true));
        for (SparseEmbeddings g : sg) {
            float[] v = g.tensor().values().toFloatArray();
            int e = 0;
            for (Entry[] vector : entries) {
                for (Entry x : vector) {
                    if (g.tensor().indices().get(e) != x.index() || v[e] != x.value()) {
                        throw new AssertionError("entry " + e + " differs from TEI's JSON");
                    }
                    e++;
                }
            }
            if (g.tensor().vocabularySize() != VOCAB || e != g.tensor().nonZeros()) {
                throw new AssertionError("vocabulary or length differs");
            }
        }
        System.out.println("TokenDecode --check: every ragged and sparse body decodes to TEI's JSON, bit for bit");
    }

    static Object sink;

    static void run(String title, Map<String, Callable<Object>> decoders, long[] bytes, int rounds) throws Exception {
        List<String> names = new ArrayList<>(decoders.keySet());
        double[][] times = new double[names.size()][rounds];
        for (int r = -2; r < rounds; r++) {
            for (int i = 0; i < names.size(); i++) {
                Callable<Object> fn = decoders.get(names.get(i));
                int calls = 1;
                long t0 = System.nanoTime();
                sink = fn.call();
                long once = System.nanoTime() - t0;
                if (once < 1_000_000) { // under 1 ms: time 200 calls
                    calls = 200;
                    t0 = System.nanoTime();
                    for (int c = 0; c < calls; c++) {
                        sink = fn.call();
                    }
                    once = System.nanoTime() - t0;
                }
                if (r >= 0) {
                    times[i][r] = once / 1e6 / calls;
                }
            }
        }
        System.out.println();
        System.out.println(title);
        System.out.println("| decoder | bytes | x TEI bytes | best ms | median ms | x JSON (best) | x JSON (median) |");
        System.out.println("|---|---:|---:|---:|---:|---:|---:|");
        double[] best = new double[names.size()];
        double[] median = new double[names.size()];
        for (int i = 0; i < names.size(); i++) {
            double[] t = times[i].clone();
            Arrays.sort(t);
            best[i] = t[0];
            median[i] = t[t.length / 2];
        }
        for (int i = 0; i < names.size(); i++) {
            System.out.printf("| %s | %,d | %.3f | %.4f | %.4f | %,.1f | %,.1f |%n", names.get(i), bytes[i], (double) bytes[i] / bytes[0],
                    best[i], median[i], best[0] / best[i], median[0] / median[i]);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--check")) {
            check();
            return;
        }
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
        int docs = args.length > 1 ? Integer.parseInt(args[1]) : 100;
        System.out.printf("java %s (%s), %s, Jackson %s; load average %s%n", System.getProperty("java.version"), System.getProperty("java.vm.name"),
                cpu(), com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION, load());
        Bodies t = tokens(docs, 256, 384);
        run(docs + " documents x 256 tokens x 384 float32, " + rounds + " interleaved rounds after 2 warm-up rounds (under 1 ms: 200 calls a round)",
                ragged(t), new long[] {t.tei().length, t.raw().length, t.arrow().length, t.msgpack().length, t.protobuf().length}, rounds);
        t = null;
        Bodies s = sparse(docs, 200);
        run(docs + " sparse vectors x 200 non-zeros over " + VOCAB, sparse(s),
                new long[] {s.tei().length, s.raw().length, s.arrow().length, s.msgpack().length, s.protobuf().length}, rounds);
        System.out.printf("%nload average at the end %s%n", load());
    }

    static String cpu() throws IOException {
        return Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name")).findFirst()
                .map(l -> l.substring(l.indexOf(':') + 1).trim() + " x " + Runtime.getRuntime().availableProcessors()).orElse("?");
    }

    static String load() throws IOException {
        return Files.readString(Path.of("/proc/loadavg")).trim();
    }
}
