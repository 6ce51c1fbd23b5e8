//! Runs every fuzz target's body (`densewire::fuzzing`) over its corpus in `fuzz/corpus/<target>/`
//! as an ordinary test, so the fuzz bodies are exercised by `cargo test` even where cargo-fuzz and
//! nightly are not available. A missing or empty corpus fails: nothing is skipped silently.

use std::path::PathBuf;

#[test]
fn every_fuzz_target_over_its_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz").join("corpus");
    let mut total = 0;
    for (name, body) in densewire::fuzzing::TARGETS {
        let dir = root.join(name);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()));
        let mut count = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_file() {
                let data = std::fs::read(&path).unwrap();
                let r = std::panic::catch_unwind(|| body(&data));
                assert!(r.is_ok(), "fuzz target {name} panicked on {}", path.display());
                // Every prefix too: truncated inputs are the classic decoder bug.
                for cut in [0, data.len() / 2, data.len().saturating_sub(1)] {
                    body(&data[..cut]);
                }
                count += 1;
            }
        }
        assert!(count > 0, "the corpus of fuzz target {name} is empty");
        println!("fuzz target {name}: {count} corpus inputs ok");
        total += count;
    }
    println!("{total} corpus inputs over {} targets", densewire::fuzzing::TARGETS.len());
}
