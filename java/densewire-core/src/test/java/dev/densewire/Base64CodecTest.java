package dev.densewire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.densewire.DensewireException.Category;
import java.util.Base64;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class Base64CodecTest {
    private static final String ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    /**
     * java.util.Base64 (the String path), the spec's rules ({@link Base64Codec#locateError}) and the table decoder
     * (the char[] path) accept exactly the same strings, decode them to the same bytes, and the two strict paths
     * report the same offsets.
     */
    @Test
    void threeDecodersAgreeOnRandomStrings() {
        SplittableRandom r = new SplittableRandom(42);
        String extra = "=== \n-_*\u00e9\u20ac";
        int accepted = 0;
        for (int iter = 0; iter < 60_000; iter++) {
            int len = r.nextInt(14);
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < len; i++) {
                sb.append(r.nextInt(10) < 8 ? ALPHABET.charAt(r.nextInt(64)) : extra.charAt(r.nextInt(extra.length())));
            }
            String s = sb.toString();
            byte[] jdk;
            try {
                jdk = Base64.getDecoder().decode(s);
            } catch (IllegalArgumentException e) {
                jdk = null;
            }
            DensewireException spec = Base64Codec.locateError(s);
            assertEquals(jdk == null, spec != null, () -> "JDK and spec disagree on \"" + s + "\"");
            char[] buf = ("xx" + s + "yy").toCharArray();
            byte[] table;
            try {
                table = Base64Codec.decode(buf, 2, s.length());
            } catch (DensewireException e) {
                assertNotNull(spec, "table decoder rejected a valid string: " + s);
                assertEquals(Category.INVALID_BASE64, e.category());
                assertEquals(spec.offset(), e.offset(), s);
                continue;
            }
            if (spec != null) {
                fail("table decoder accepted \"" + s + "\": " + spec.getMessage());
            }
            assertArrayEquals(jdk, table, s);
            assertArrayEquals(jdk, Base64Codec.decode(s), s);
            accepted++;
        }
        assertTrue(accepted > 3_000, "accepted " + accepted);
    }

    @Test
    void roundTripsEveryLength() {
        SplittableRandom r = new SplittableRandom(1);
        for (int n = 0; n < 100; n++) {
            byte[] b = new byte[n];
            r.nextBytes(b);
            String s = Base64Codec.encode(b);
            assertArrayEquals(b, Base64Codec.decode(s));
            assertArrayEquals(b, Base64Codec.decode(s.toCharArray(), 0, s.length()));
            String unpadded = s.replace("=", "");
            assertArrayEquals(b, Base64Codec.decode(unpadded));
            assertArrayEquals(b, Base64Codec.decode(unpadded.toCharArray(), 0, unpadded.length()));
        }
    }

    @Test
    void floatsBothOrders() {
        float[] v = {1.0f, -2.5f, 0.1f};
        assertEquals("AACAPwAAIMDNzMw9", Base64Codec.encodeFloats(v, Endianness.LITTLE));
        assertEquals("P4AAAMAgAAA9zMzN", Base64Codec.encodeFloats(v, Endianness.BIG));
        assertArrayEquals(v, Base64Codec.decodeFloats("P4AAAMAgAAA9zMzN", Endianness.BIG));
        assertArrayEquals(v, Base64Codec.decodeFloats("AACAPwAAIMDNzMw9".toCharArray(), 0, 16, Endianness.LITTLE));
        double[] d = {1.0, -2.5, 0.1};
        assertEquals("P/AAAAAAAADABAAAAAAAAD+5mZmZmZma", Base64Codec.encodeDoubles(d, Endianness.BIG));
        assertArrayEquals(d, Base64Codec.decodeDoubles("P/AAAAAAAADABAAAAAAAAD+5mZmZmZma", Endianness.BIG));
    }

    @Test
    void floatBlockDecoderMatchesTheByteDecoder() {
        SplittableRandom r = new SplittableRandom(11);
        for (int n = 0; n < 40; n++) {
            float[] v = new float[n];
            for (int i = 0; i < n; i++) {
                v[i] = Float.intBitsToFloat(r.nextInt());
            }
            for (Endianness o : Endianness.values()) {
                String s = Base64Codec.encodeFloats(v, o);
                float[] back = Base64Codec.decodeFloats(("[" + s + "]").toCharArray(), 1, s.length(), o);
                for (int i = 0; i < n; i++) {
                    assertEquals(Float.floatToRawIntBits(v[i]), Float.floatToRawIntBits(back[i]));
                }
                if (s.length() > 2) { // a bad character anywhere is found at its offset
                    for (int at : new int[] {0, s.length() / 2, s.length() - 1}) {
                        char[] bad = s.toCharArray();
                        bad[at] = '-';
                        DensewireException e = assertThrows(DensewireException.class,
                                () -> Base64Codec.decodeFloats(bad, 0, bad.length, o));
                        assertEquals(at, e.offset().getAsLong());
                    }
                }
            }
        }
    }

    @Test
    void lengthChecks() {
        DensewireException e = assertThrows(DensewireException.class,
                () -> Base64Codec.decodeFloats("AACAPwAA", Endianness.LITTLE));
        assertEquals(Category.LENGTH_MISMATCH, e.category());
        assertEquals(6, e.offset().getAsLong());
        DensewireException c = assertThrows(DensewireException.class,
                () -> Base64Codec.decodeFloats("AACAPwAAAEA=", Endianness.LITTLE, 3));
        assertEquals(8, c.offset().getAsLong());
        assertNull(Base64Codec.locateError(""));
        assertEquals(0, Base64Codec.decode("").length);
    }

    @Test
    void messagesNameTheCharacter() {
        DensewireException e = assertThrows(DensewireException.class, () -> Base64Codec.decode("AAAA\nAAA"));
        assertTrue(e.getMessage().contains("'\\n' at offset 4"), e.getMessage());
        assertTrue(e.getMessage().endsWith("[invalid_base64]"), e.getMessage());
    }
}
