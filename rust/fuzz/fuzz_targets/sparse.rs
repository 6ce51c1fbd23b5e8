#![no_main]
// Arrow is one of the formats these bodies are read in: arrow-ipc's panics are caught by read_stream.
libfuzzer_sys::fuzz_target!(init: densewire::fuzzing::tolerate_arrow_panics(), |data: &[u8]| densewire::fuzzing::sparse(data));
