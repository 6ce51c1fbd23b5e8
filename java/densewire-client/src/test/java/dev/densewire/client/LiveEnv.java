package dev.densewire.client;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.URI;

/** The URL of a real server that scripts/test.sh starts: a test skips without it, unless CI=true (then it fails). */
final class LiveEnv {
    private LiveEnv() {
    }

    static URI require(String variable, String what) {
        String url = System.getenv(variable);
        if (url == null || url.isBlank()) {
            if ("true".equals(System.getenv("CI"))) {
                fail(variable + " is not set, and CI=true: scripts/test.sh must start " + what);
            }
            assumeTrue(false, variable + " is not set (scripts/test.sh starts " + what + " there); skipped");
        }
        return URI.create(url);
    }
}
