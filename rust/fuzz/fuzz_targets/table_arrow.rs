#![no_main]
libfuzzer_sys::fuzz_target!(init: densewire::fuzzing::tolerate_arrow_panics(), |data: &[u8]| densewire::fuzzing::table_arrow(data));
