package dev.densewire.client;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import dev.densewire.Table;

/** Arrow bodies through densewire-arrow, an optional dependency: only touched when it is on the class path. */
final class ArrowSupport {
    private static final boolean AVAILABLE = probe();

    private ArrowSupport() {
    }

    private static boolean probe() {
        try {
            Class.forName("dev.densewire.arrow.ArrowCodec", false, ArrowSupport.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    static boolean available() {
        return AVAILABLE;
    }

    private static void require() {
        if (!AVAILABLE) {
            throw new DensewireException(Category.UNSUPPORTED_MEDIA_TYPE,
                    "an Arrow body needs dev.densewire:densewire-arrow on the class path", -1, "Content-Type");
        }
    }

    static Embeddings decode(byte[] body) {
        require();
        return dev.densewire.arrow.ArrowCodec.decode(body);
    }

    static dev.densewire.RaggedEmbeddings decodeRagged(byte[] body) {
        require();
        return dev.densewire.arrow.RaggedArrow.decodeRagged(body);
    }

    static dev.densewire.SparseEmbeddings decodeSparse(byte[] body) {
        require();
        return dev.densewire.arrow.RaggedArrow.decodeSparse(body);
    }

    static Table decodeTable(byte[] body) {
        require();
        return dev.densewire.arrow.ArrowTables.decode(body);
    }

    static byte[] encodeTable(Table t) {
        require();
        return dev.densewire.arrow.ArrowTables.encode(t);
    }
}
