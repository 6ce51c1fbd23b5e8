package dev.densewire.bench;

import dev.densewire.PgCopy;
import dev.densewire.Tensor;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Random;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * Loading n x d float32 vectors into a pgvector {@code vector(d)} column through PgJDBC's {@code CopyManager}, side
 * by side in one run, alternating: (a) text COPY of pgvector literals ({@code [0.1,...]}, Java's shortest float
 * text), (b) densewire's binary COPY ({@code PgCopy.inputStream}, encoded while PostgreSQL reads), (c) the same
 * binary stream encoded beforehand (the server-side limit: no client work during the COPY). Prints wall time,
 * rows/s and the calling thread's CPU time (which does all the client-side encoding) per run, and the medians.
 *
 * <pre>
 * java -cp target/benchmarks.jar dev.densewire.bench.PgCopyIngest postgresql://dw@127.0.0.1:PORT/postgres 20000 1536 5
 * </pre>
 */
public final class PgCopyIngest {
    private PgCopyIngest() {
    }

    public static void main(String[] args) throws Exception {
        URI u = URI.create(args[0]);
        int n = Integer.parseInt(args[1]);
        int d = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);
        String jdbc = "jdbc:postgresql://" + u.getHost() + ":" + u.getPort() + u.getPath() + "?user=" + u.getUserInfo();
        Random rng = new Random(18);
        float[] v = new float[n * d];
        for (int k = 0; k < v.length; k++) {
            v[k] = (float) (rng.nextGaussian() / Math.sqrt(d));
        }
        Tensor vectors = Tensor.ofFloats(n, d, v);
        PgCopy.Columns cols = PgCopy.Columns.of(PgCopy.VectorType.VECTOR);
        ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
        String[] names = {"text COPY (pgvector literals)", "densewire binary COPY (PgCopy.inputStream)",
            "binary COPY of a pre-encoded stream (server-side limit)"};
        List<List<double[]>> results = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            results.add(new ArrayList<>());
        }
        try (Connection conn = DriverManager.getConnection(jdbc); Statement st = conn.createStatement()) {
            CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();
            st.execute("DROP TABLE IF EXISTS dw_bench_ingest");
            st.execute("CREATE UNLOGGED TABLE dw_bench_ingest (embedding vector(" + d + "))");
            byte[] pre = PgCopy.encode(vectors, cols);
            for (int round = 0; round <= rounds; round++) { // round 0 warms the JIT and the server up, not counted
                for (int variant = 0; variant < 3; variant++) {
                    st.execute("TRUNCATE dw_bench_ingest");
                    long c0 = cpu.getCurrentThreadCpuTime();
                    long t0 = System.nanoTime();
                    long rows;
                    if (variant == 0) {
                        rows = copy.copyIn("COPY dw_bench_ingest (embedding) FROM STDIN", textRows(v, n, d));
                    } else if (variant == 1) {
                        rows = copy.copyIn(PgCopy.copyFromStdin("dw_bench_ingest", cols), PgCopy.inputStream(vectors, cols, null, 1024));
                    } else {
                        rows = copy.copyIn(PgCopy.copyFromStdin("dw_bench_ingest", cols), new ByteArrayInputStream(pre));
                    }
                    double wall = (System.nanoTime() - t0) / 1e9;
                    double client = (cpu.getCurrentThreadCpuTime() - c0) / 1e9;
                    if (rows != n) {
                        throw new IllegalStateException(names[variant] + ": " + rows + " rows");
                    }
                    System.out.printf("round %d  %-58s %7.3f s  %9.0f rows/s  client CPU %6.3f s%n", round, names[variant],
                            wall, n / wall, client);
                    if (round > 0) {
                        results.get(variant).add(new double[] {wall, client});
                    }
                }
            }
            st.execute("DROP TABLE dw_bench_ingest");
        }
        double[] medWall = new double[3];
        double[] medCpu = new double[3];
        for (int i = 0; i < 3; i++) {
            medWall[i] = median(results.get(i), 0);
            medCpu[i] = median(results.get(i), 1);
            System.out.printf("median  %-58s %7.3f s  %9.0f rows/s  client CPU %6.3f s (%.1f us/row)%n", names[i], medWall[i],
                    n / medWall[i], medCpu[i], medCpu[i] / n * 1e6);
        }
        System.out.printf("binary COPY rows/s: %.2fx text COPY, %.0f%% of the pre-encoded stream's; client CPU %.1fx less than text%n",
                medWall[0] / medWall[1], 100 * medWall[2] / medWall[1], medCpu[0] / medCpu[1]);
    }

    private static double median(List<double[]> xs, int k) {
        double[] a = xs.stream().mapToDouble(x -> x[k]).sorted().toArray();
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
    }

    /** The text COPY stream, one {@code [x,y,...]} line a row, made 1,024 rows at a time as PostgreSQL reads. */
    private static InputStream textRows(float[] v, int n, int d) {
        return new SequenceInputStream(new Enumeration<InputStream>() {
            private int row;

            @Override
            public boolean hasMoreElements() {
                return row < n;
            }

            @Override
            public InputStream nextElement() {
                StringBuilder sb = new StringBuilder(1024 * d * 12);
                int stop = Math.min(n, row + 1024);
                for (; row < stop; row++) {
                    sb.append('[');
                    for (int j = 0; j < d; j++) {
                        if (j > 0) {
                            sb.append(',');
                        }
                        sb.append(v[row * d + j]);
                    }
                    sb.append("]\n");
                }
                return new ByteArrayInputStream(sb.toString().getBytes(StandardCharsets.US_ASCII));
            }
        });
    }
}
