package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The golden runner's use of capabilities.json (Capabilities): unclaimed cases are listed, not run. */
class CapabilitiesTest {

    private static JsonNode without(String feature) {
        JsonNode caps = Capabilities.load();
        ArrayNode claims = (ArrayNode) caps.get("claims").get("java");
        for (int i = 0; i < claims.size(); i++) {
            if (claims.get(i).asText().equals(feature)) {
                claims.remove(i);
                return caps;
            }
        }
        throw new AssertionError("java does not claim " + feature);
    }

    @Test
    void aPlantedUnclaimedFeatureListsItsCasesAndRunsNone() {
        JsonNode cases = Golden.load("tensors.json").get("cases");
        Capabilities.Plan p = Capabilities.plan(Map.of("tensors.json", cases), "java", without("dtype.bfloat16"));
        List<String> bf16 = new ArrayList<>();
        cases.forEach(c -> {
            if (c.get("dtype").asText().equals("bfloat16")) {
                bf16.add(Golden.id(c));
            }
        });
        assertFalse(bf16.isEmpty());
        assertEquals(Map.of("dtype.bfloat16", bf16), p.notClaimed());
        assertTrue(bf16.stream().noneMatch(p.run()::contains));
        assertEquals(cases.size() - bf16.size(), p.run().size());
        assertTrue(p.lines().contains("not claimed by java: " + bf16.size() + " cases: dtype.bfloat16 ("
                + String.join(", ", bf16) + ")"), p.lines().toString());
    }

    @Test
    void aPlantedUnclaimedTableFormatListsItsCasesAndRunsNone() {
        JsonNode cases = Golden.load("tables.json").get("cases");
        Capabilities.Plan all = Capabilities.plan(Map.of("tables.json", cases), "java", Capabilities.load());
        assertEquals(cases.size(), all.run().size(), "Java claims every table format: every table case runs");
        Capabilities.Plan p = Capabilities.plan(Map.of("tables.json", cases), "java", without("table.csv"));
        List<String> csv = p.notClaimed().get("table.csv");
        assertTrue(csv != null && !csv.isEmpty(), p.lines().toString());
        assertTrue(csv.stream().noneMatch(p.run()::contains));
        assertEquals(cases.size() - csv.size(), p.run().size());
    }

    @Test
    void aClaimedFeatureNoGoldenCaseNeedsIsReported() {
        JsonNode caps = Capabilities.load();
        ((ArrayNode) caps.get("claims").get("java")).add("planted.feature");
        Capabilities.Plan p = Capabilities.plan(Map.of("conversions.json", Golden.load("conversions.json").get("cases")),
                "java", caps);
        assertTrue(p.unexercised().contains("planted.feature"));
        assertTrue(p.lines().stream().anyMatch(l -> l.startsWith("claimed by java but exercised by no golden case: ")
                && l.contains("planted.feature")), p.lines().toString());
    }

    @Test
    void aCaseMissingFromCapabilitiesFailsTheRunner() {
        JsonNode caps = Capabilities.load();
        ((ObjectNode) caps.get("cases").get("interop.json")).remove("interop.openai.response_float");
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> Capabilities.plan(Map.of("interop.json", Golden.load("interop.json").get("cases")), "java", caps));
        assertTrue(e.getMessage().contains("case interop.openai.response_float is not in capabilities.json"), e.getMessage());
    }
}
