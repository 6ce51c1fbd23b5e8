package dev.densewire.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.densewire.EncodingFormat;
import dev.densewire.Endianness;
import dev.densewire.RaggedEmbeddings;
import dev.densewire.RaggedMsgpack;
import dev.densewire.RaggedProtobuf;
import dev.densewire.RaggedRaw;
import dev.densewire.SparseEmbeddings;
import dev.densewire.arrow.RaggedArrow;
import dev.densewire.jackson.RaggedJson;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Ragged and sparse bodies (SPEC.md 20). Input: a first line {@code KIND FORMAT [response]} followed, for raw, by
 * {@code ;}-joined {@code name: value} headers after a tab; a line feed; the body. What decodes re-encodes in the
 * same format to a body that decodes to the same tensor.
 */
class RaggedFuzzTest {
    @FuzzTest
    void fuzz(byte[] input) {
        Fuzzing.Split in = Fuzzing.Split.of(input);
        String[] head = in.line().split("\t", 2);
        String[] words = head[0].split(" ");
        if (words.length < 2) {
            return;
        }
        boolean response = words.length > 2 && words[2].equals("response");
        Map<String, String> headers = new LinkedHashMap<>();
        if (head.length > 1) {
            for (String pair : head[1].split(";")) {
                int colon = pair.indexOf(':');
                if (colon > 0) {
                    headers.put(pair.substring(0, colon).trim(), pair.substring(colon + 1).trim());
                }
            }
        }
        byte[] body = in.rest();
        String format = words[1];
        if (words[0].equals("ragged")) {
            RaggedEmbeddings e = Fuzzing.decodes(() -> ragged(format, headers, body, response));
            if (e != null) {
                Map<String, String> h = RaggedRaw.headers(e);
                byte[] again = switch (format) {
                    case "json" -> RaggedJson.encode(e, EncodingFormat.BASE64, Endianness.LITTLE);
                    case "raw" -> RaggedRaw.encode(e);
                    case "msgpack" -> RaggedMsgpack.encode(e);
                    case "protobuf" -> RaggedProtobuf.encodeResponse(e);
                    default -> RaggedArrow.encode(e);
                };
                Fuzzing.same(e.tensor(), ragged(format, h, again, true).tensor());
            }
        } else if (words[0].equals("sparse")) {
            SparseEmbeddings e = Fuzzing.decodes(() -> sparse(format, headers, body, response));
            if (e != null) {
                Map<String, String> h = RaggedRaw.headers(e);
                byte[] again = switch (format) {
                    case "json" -> RaggedJson.encode(e, EncodingFormat.BASE64, Endianness.LITTLE);
                    case "raw" -> RaggedRaw.encode(e);
                    case "msgpack" -> RaggedMsgpack.encode(e);
                    case "protobuf" -> RaggedProtobuf.encodeResponse(e);
                    default -> RaggedArrow.encode(e);
                };
                Fuzzing.same(e.tensor(), sparse(format, h, again, true).tensor());
            }
        }
    }

    private static RaggedEmbeddings ragged(String format, Map<String, String> headers, byte[] body, boolean response) {
        return switch (format) {
            case "json" -> RaggedJson.decodeRagged(body);
            case "raw" -> RaggedRaw.decodeRagged(headers, body);
            case "msgpack" -> RaggedMsgpack.decodeRagged(body);
            case "protobuf" -> RaggedProtobuf.decodeRagged(body, response);
            default -> RaggedArrow.decodeRagged(body);
        };
    }

    private static SparseEmbeddings sparse(String format, Map<String, String> headers, byte[] body, boolean response) {
        return switch (format) {
            case "json" -> RaggedJson.decodeSparse(body);
            case "raw" -> RaggedRaw.decodeSparse(headers, body);
            case "msgpack" -> RaggedMsgpack.decodeSparse(body);
            case "protobuf" -> RaggedProtobuf.decodeSparse(body, response);
            default -> RaggedArrow.decodeSparse(body);
        };
    }
}
