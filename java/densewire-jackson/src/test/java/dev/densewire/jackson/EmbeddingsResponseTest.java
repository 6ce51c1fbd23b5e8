package dev.densewire.jackson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import org.junit.jupiter.api.Test;

class EmbeddingsResponseTest {
    private static Embeddings withUsage(String usage) {
        return DensewireJson.readResponse("{\"data\":[{\"index\":0,\"embedding\":[1.0]}],\"usage\":" + usage + "}");
    }

    @Test
    void usageCountsAreNonNegativeIntegers() {
        assertEquals(new Embeddings.Usage(3, 4), withUsage("{\"prompt_tokens\":3,\"total_tokens\":4}").usage());
        assertEquals(new Embeddings.Usage(0, 0), withUsage("{}").usage());
        assertEquals(new Embeddings.Usage(9007199254740991L, 0), withUsage("{\"prompt_tokens\":9007199254740991}").usage());
        assertNull(withUsage("null").usage());
        String[][] bad = {
            {"{\"prompt_tokens\":-1,\"total_tokens\":0}", "usage.prompt_tokens"},
            {"{\"prompt_tokens\":1,\"total_tokens\":2.5}", "usage.total_tokens"},
            {"{\"prompt_tokens\":3.0}", "usage.prompt_tokens"},
            {"{\"prompt_tokens\":\"3\"}", "usage.prompt_tokens"}, // not coerced, as Jackson would a Long
            {"{\"total_tokens\":true}", "usage.total_tokens"},
            {"{\"prompt_tokens\":null}", "usage.prompt_tokens"},
            {"{\"prompt_tokens\":18446744073709551616}", "usage.prompt_tokens"},
            {"{\"total_tokens\":9007199254740992}", "usage.total_tokens"},
            {"{\"prompt_tokens\":1e3080}", "usage.prompt_tokens"},
            {"[3,3]", "usage"},
            {"\"3\"", "usage"},
        };
        for (String[] c : bad) {
            DensewireException e = assertThrows(DensewireException.class, () -> withUsage(c[0]), c[0]);
            assertEquals(Category.INVALID_FIELD, e.category(), c[0] + ": " + e.getMessage());
            assertEquals(c[1], e.field().orElse(null), c[0] + ": " + e.getMessage());
        }
    }
}
