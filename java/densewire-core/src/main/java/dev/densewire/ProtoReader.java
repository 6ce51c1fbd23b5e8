package dev.densewire;

import dev.densewire.DensewireException.Category;

/**
 * A cursor over {@code [pos, end)} of a body starting at {@code base}; offsets are relative to base. In an
 * embedded message ({@code nested}), a field running past the message's end while staying inside the body
 * is {@code malformed} at the field's tag; at the top level it is {@code truncated} at the body's length.
 */
final class ProtoReader {
    /** Unknown groups nested deeper than this are malformed ("groups nested too deeply"). */
    static final int MAX_GROUP_DEPTH = 64;

    final byte[] b;
    final int base;
    final int end;
    final boolean nested;
    int pos;

    ProtoReader(byte[] b, int base, int pos, int end, boolean nested) {
        this.b = b;
        this.base = base;
        this.pos = pos;
        this.end = end;
        this.nested = nested;
    }

    /** In an embedded message, running past its end is a malformed field, not a short body. */
    DensewireException pastEnd(DensewireException e, int tagAt) {
        if (nested && e.category() == Category.TRUNCATED) {
            return DensewireException.at(Category.MALFORMED, tagAt - base,
                    "a field runs past the end of its embedded message: " + e.detail());
        }
        return e;
    }

    boolean more() {
        return pos < end;
    }

    long varint() {
        int start = pos;
        long result = 0;
        for (int shift = 0; ; shift += 7) {
            if (pos >= end) {
                throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a varint");
            }
            if (pos - start == 10) {
                throw DensewireException.at(Category.MALFORMED, start - base, "varint longer than 10 bytes");
            }
            int x = b[pos++];
            if (shift < 64) {
                result |= (long) (x & 0x7F) << shift;
            }
            if (x >= 0) {
                return result;
            }
        }
    }

    /** Inside a nested message, ending early means its length was wrong: still reported as the body's end. */
    private int truncatedAt() {
        return end - base;
    }

    long tag() {
        int at = pos;
        long tag = varint();
        if ((tag >>> 3) == 0) {
            throw DensewireException.at(Category.MALFORMED, at - base, "field number 0");
        }
        return tag;
    }

    int lengthDelimited() {
        long n = varint();
        if (n > end - pos || n < 0) {
            throw DensewireException.at(Category.TRUNCATED, truncatedAt(),
                    "a " + n + "-byte field runs past the end of the body");
        }
        return (int) n;
    }

    void expect(int wire, int want, int tagAt, String name) {
        if (wire != want) {
            throw DensewireException.at(Category.MALFORMED, tagAt - base,
                    "field " + name + " has wire type " + wire + ", expected " + want);
        }
    }

    /** Skips the value of an unknown field whose tag ({@code tag}, at {@code tagAt}) was just read. */
    void skip(long tag, int tagAt) {
        skip(tag, tagAt, 0);
    }

    /**
     * A group (deprecated wire type 3) is skipped up to the end-group tag (wire type 4) of the same field number,
     * its inner fields (nested groups included, at most 64 deep) skipped alike; an end-group tag anywhere else
     * is malformed at that tag.
     */
    private void skip(long tag, int tagAt, int depth) {
        int wire = (int) (tag & 7);
        switch (wire) {
            case 0:
                varint();
                break;
            case 1:
            case 5: {
                int size = wire == 1 ? 8 : 4;
                if (size > end - pos) {
                    throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a fixed-size field");
                }
                pos += size;
                break;
            }
            case 2: {
                int n = lengthDelimited(); // read before adding: pos moves past the length varint
                pos += n;
                break;
            }
            case 3: {
                if (depth >= MAX_GROUP_DEPTH) {
                    throw DensewireException.at(Category.MALFORMED, tagAt - base, "groups nested too deeply");
                }
                while (true) {
                    if (pos >= end) {
                        throw DensewireException.at(Category.TRUNCATED, truncatedAt(), "body ends inside a group");
                    }
                    int innerAt = pos;
                    long inner = tag();
                    if ((inner & 7) == 4) {
                        if ((inner >>> 3) != (tag >>> 3)) {
                            throw DensewireException.at(Category.MALFORMED, innerAt - base,
                                    "end-group tag does not match its start");
                        }
                        break;
                    }
                    skip(inner, innerAt, depth + 1);
                }
                break;
            }
            case 4:
                throw DensewireException.at(Category.MALFORMED, tagAt - base, "end-group tag without a start");
            default:
                throw DensewireException.at(Category.MALFORMED, tagAt - base, "unsupported wire type " + wire);
        }
    }
}
