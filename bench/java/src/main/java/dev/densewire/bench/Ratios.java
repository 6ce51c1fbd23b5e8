package dev.densewire.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * A cross-check of the JMH figures that holds up on a shared, loaded machine: the variants run interleaved
 * (round-robin, so a burst of load from other processes hits them all alike) and each operation is timed in this
 * thread's CPU time (time spent preempted does not count). Prints the median milliseconds per operation and the
 * operations per CPU-second.
 *
 * <pre>java -cp target/benchmarks.jar dev.densewire.bench.Ratios [rounds]</pre>
 */
public final class Ratios {
    private Ratios() {
    }

    private interface Op {
        Object run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 40;
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        List<Rows.Row> rows = Rows.rows();
        Map<Variant, Object> payloads = new EnumMap<>(Variant.class);
        Map<Variant, byte[]> jsons = new EnumMap<>(Variant.class);
        for (Variant v : Variant.values()) {
            payloads.put(v, v.payload(rows));
            jsons.put(v, v.writer.writeValueAsBytes(payloads.get(v)));
        }
        String[] ops = {"read", "write", "writeRead"};
        Map<Variant, List<long[]>> samples = new EnumMap<>(Variant.class);
        for (Variant v : Variant.values()) {
            samples.put(v, new ArrayList<>());
        }
        Object sink = null;
        for (int round = -10; round < rounds; round++) { // 10 warm-up rounds
            for (Variant v : Variant.values()) {
                Object payload = payloads.get(v);
                byte[] json = jsons.get(v);
                Op[] run = {() -> v.reader.readValue(json), () -> v.writer.writeValueAsBytes(payload),
                    () -> v.reader.readValue(v.writer.writeValueAsBytes(payload))};
                long[] t = new long[3];
                for (int k = 0; k < 3; k++) {
                    long start = mx.getCurrentThreadCpuTime();
                    sink = run[k].run();
                    t[k] = mx.getCurrentThreadCpuTime() - start;
                }
                if (round >= 0) {
                    samples.get(v).add(t);
                }
            }
        }
        if (sink == null) {
            throw new IllegalStateException();
        }
        System.out.printf("%-15s %12s %12s %12s   (median CPU ms per op; ops per CPU-second)%n", "variant", ops[0], ops[1], ops[2]);
        Map<Variant, double[]> med = new EnumMap<>(Variant.class);
        for (Variant v : Variant.values()) {
            double[] m = new double[3];
            for (int k = 0; k < 3; k++) {
                final int kk = k;
                long[] s = samples.get(v).stream().mapToLong(a -> a[kk]).sorted().toArray();
                m[k] = s[s.length / 2] / 1e6;
            }
            med.put(v, m);
            System.out.printf("%-15s %7.2f %5.1f/s %7.2f %5.1f/s %7.2f %5.1f/s%n", v, m[0], 1000 / m[0], m[1], 1000 / m[1],
                    m[2], 1000 / m[2]);
        }
        for (Variant base : new Variant[] {Variant.JACKSON, Variant.JACKSON_FAST, Variant.JACKSON_BINARY}) {
            for (Variant v : new Variant[] {Variant.DENSEWIRE_LE, Variant.DENSEWIRE_BE}) {
                double[] b = med.get(base);
                double[] m = med.get(v);
                System.out.printf("%s vs %s: read %.1fx, write %.1fx, write+read %.1fx%n", v, base, b[0] / m[0], b[1] / m[1],
                        b[2] / m[2]);
            }
        }
        System.out.println(Arrays.toString(ops) + " over " + rounds + " interleaved rounds");
    }
}
