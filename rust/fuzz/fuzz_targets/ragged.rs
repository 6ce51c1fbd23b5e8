#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| densewire::fuzzing::ragged(data));
