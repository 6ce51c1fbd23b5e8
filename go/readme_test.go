package densewire_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExamples checks that every Go code block of README.md appears, line for line, in
// example_test.go, whose Example functions run with their // Output: — so the README's code runs.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	code := norm(string(examples))
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 5 {
		t.Fatalf("README.md has %d Go blocks", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(code, norm(b[1])) {
			t.Errorf("README block not found in example_test.go:\n%s", b[1])
		}
	}
}
