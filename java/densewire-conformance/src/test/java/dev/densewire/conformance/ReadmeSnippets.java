package dev.densewire.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The check shared by the README example tests: every example of a test class, the code between
 * {@code // README:name} and {@code // END} (its indentation removed), appears verbatim in
 * java/README.md, so the README shows code that compiles and runs.
 */
final class ReadmeSnippets {
    private static final Pattern EXAMPLE =
            Pattern.compile("(?m)^( *)// README:([\\w-]+)\\n(.*?)^ *// END$", Pattern.DOTALL);

    private ReadmeSnippets() {}

    /** Asserts that each example of {@code testClass}'s source is in java/README.md, and that there are {@code expected}. */
    static void assertShownVerbatim(Class<?> testClass, int expected) throws IOException {
        Path module = Path.of("").toAbsolutePath();
        String source = Files.readString(module.resolve(
                "src/test/java/dev/densewire/conformance/" + testClass.getSimpleName() + ".java"));
        String readme = Files.readString(module.resolve("../README.md"), StandardCharsets.UTF_8);
        Matcher m = EXAMPLE.matcher(source);
        int count = 0;
        while (m.find()) {
            String indent = m.group(1);
            StringBuilder snippet = new StringBuilder();
            for (String line : m.group(3).split("\n", -1)) {
                snippet.append(line.startsWith(indent) ? line.substring(indent.length()) : line).append('\n');
            }
            String code = snippet.toString().stripTrailing() + "\n";
            assertTrue(readme.contains(code), "README.md lacks example '" + m.group(2) + "':\n" + code);
            count++;
        }
        assertEquals(expected, count, "examples found in " + testClass.getSimpleName());
    }
}
