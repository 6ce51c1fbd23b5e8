package dev.densewire.arrow;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.arrow.flatbuf.Message;

/**
 * Checks the framing of an Arrow IPC stream before Arrow's reader sees it: every message's metadata length and
 * body length must lie within the body. Arrow's Java reader allocates what a message declares before reading it,
 * so a 20-byte body declaring a 2 GiB message would otherwise run the JVM out of memory (found by the Jazzer target
 * TensorArrowFuzzTest).
 */
final class ArrowFraming {
    private ArrowFraming() {
    }

    /**
     * @throws DensewireException a message longer than what is left of the body: {@code truncated} at the body's
     *                            length; a negative length or metadata that is no Message: {@code malformed} at the
     *                            message's offset
     */
    static void check(byte[] body) {
        ByteBuffer b = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        int p = 0;
        while (p + 4 <= body.length) {
            int at = p;
            int len = b.getInt(p);
            p += 4;
            if (len == -1) { // continuation marker, then the length
                if (p + 4 > body.length) {
                    return; // Arrow's reader reports the cut (truncated)
                }
                len = b.getInt(p);
                p += 4;
            }
            if (len == 0) {
                return; // end of stream
            }
            if (len < 0) {
                throw new DensewireException(Category.MALFORMED, "an Arrow message declares a negative length " + len, at, null);
            }
            if (len > body.length - p) {
                throw new DensewireException(Category.TRUNCATED, "an Arrow message of " + len + " bytes at offset " + at
                        + " runs past the end of the body", body.length, null);
            }
            long bodyLength;
            try {
                Message m = Message.getRootAsMessage(b.duplicate().position(p).limit(p + len).slice().order(ByteOrder.LITTLE_ENDIAN));
                bodyLength = m.bodyLength();
            } catch (RuntimeException e) {
                throw new DensewireException(Category.MALFORMED, "the Arrow message at offset " + at + " has no valid metadata",
                        at, null, e);
            }
            p += len;
            if (bodyLength < 0) {
                throw new DensewireException(Category.MALFORMED, "an Arrow message declares a negative body length", at, null);
            }
            if (bodyLength > body.length - p) {
                throw new DensewireException(Category.TRUNCATED, "an Arrow message body of " + bodyLength + " bytes at offset "
                        + p + " runs past the end of the body", body.length, null);
            }
            p += (int) bodyLength;
        }
    }
}
