package dev.densewire.bench;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * The published case: Jackson reading and writing 1,000 rows of {_id, text, float[1024]}, as JSON arrays
 * (default and with fast float parsing/writing), as Jackson 2.20's native binary shape, and with the
 * densewire module (little- and big-endian Base64). Throughput in operations (whole payloads) per second.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class JsonVectorsBenchmark {
    @Param({"JACKSON", "JACKSON_FAST", "JACKSON_BINARY", "DENSEWIRE_LE", "DENSEWIRE_BE"})
    public Variant variant;

    private Object payload;
    private byte[] json;

    @Setup
    public void setup() throws IOException {
        List<Rows.Row> rows = Rows.rows();
        payload = variant.payload(rows);
        json = variant.writer.writeValueAsBytes(payload);
        List<?> back = variant.reader.readValue(json);
        if (back.size() != rows.size()) {
            throw new IllegalStateException("round trip lost rows");
        }
        System.out.printf("%n[size] %s: %,d bytes%n", variant, json.length);
    }

    @Benchmark
    public List<?> read() throws IOException {
        return variant.reader.readValue(json);
    }

    @Benchmark
    public byte[] write() throws IOException {
        return variant.writer.writeValueAsBytes(payload);
    }

    @Benchmark
    public List<?> writeRead() throws IOException {
        return variant.reader.readValue(variant.writer.writeValueAsBytes(payload));
    }
}
