package dev.densewire.bench;

import com.fasterxml.jackson.annotation.JsonFormat;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/** The published case's data: 1,000 query rows {_id, text, float[1024] emb}, unit-length vectors. */
public final class Rows {
    public static final int ROWS = 1000;
    public static final int DIMS = 1024;

    private Rows() {
    }

    /** A row as plain Jackson and the densewire module see it. */
    @JsonPropertyOrder({"_id", "text", "emb"})
    public static class Row {
        @JsonProperty("_id")
        public String id;
        public String text;
        public float[] emb;
    }

    /** The same row with Jackson 2.20's native binary shape (big-endian Base64). */
    @JsonPropertyOrder({"_id", "text", "emb"})
    public static class NativeRow {
        @JsonProperty("_id")
        public String id;
        public String text;
        @JsonFormat(shape = JsonFormat.Shape.BINARY)
        public float[] emb;
    }

    private static final String[] WORDS = {"vector", "search", "embedding", "latency", "query", "index", "cosine",
        "payload", "wire", "format", "model", "batch", "token", "server", "client", "shard"};

    public static List<Row> rows() {
        SplittableRandom r = new SplittableRandom(2024);
        List<Row> out = new ArrayList<>(ROWS);
        for (int i = 0; i < ROWS; i++) {
            Row row = new Row();
            row.id = String.format("q-%06d", i);
            StringBuilder sb = new StringBuilder();
            for (int w = 0; w < 8; w++) {
                sb.append(w == 0 ? "" : " ").append(WORDS[r.nextInt(WORDS.length)]);
            }
            row.text = sb.toString();
            float[] v = new float[DIMS];
            double norm = 0;
            for (int k = 0; k < DIMS; k++) {
                v[k] = (float) r.nextGaussian();
                norm += v[k] * v[k];
            }
            float inv = (float) (1 / Math.sqrt(norm));
            for (int k = 0; k < DIMS; k++) {
                v[k] *= inv;
            }
            row.emb = v;
            out.add(row);
        }
        return out;
    }

    public static List<NativeRow> nativeRows(List<Row> rows) {
        List<NativeRow> out = new ArrayList<>(rows.size());
        for (Row r : rows) {
            NativeRow n = new NativeRow();
            n.id = r.id;
            n.text = r.text;
            n.emb = r.emb;
            out.add(n);
        }
        return out;
    }
}
