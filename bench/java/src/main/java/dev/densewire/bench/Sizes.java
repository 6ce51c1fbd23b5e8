package dev.densewire.bench;

import java.util.List;

/** Prints the payload size of each variant and checks that every variant reads back the same bits. */
public final class Sizes {
    private Sizes() {
    }

    public static void main(String[] args) throws Exception {
        List<Rows.Row> rows = Rows.rows();
        long base = 0;
        for (Variant v : Variant.values()) {
            byte[] json = v.writer.writeValueAsBytes(v.payload(rows));
            List<?> back = v.reader.readValue(json);
            for (int i = 0; i < rows.size(); i++) {
                Object r = back.get(i);
                float[] emb = r instanceof Rows.Row ? ((Rows.Row) r).emb : ((Rows.NativeRow) r).emb;
                if (!java.util.Arrays.equals(emb, rows.get(i).emb)) {
                    throw new IllegalStateException(v + " changed row " + i);
                }
            }
            if (base == 0) {
                base = json.length;
            }
            System.out.printf("%-15s %,12d bytes  %+.0f%%%n", v, json.length, 100.0 * (json.length - base) / base);
        }
    }
}
