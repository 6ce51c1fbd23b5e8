//! Per-token embeddings (issue 32, SPEC.md 20): the client-side decode of 100 documents x 256 tokens
//! x 384 float32 (MiniLM's token states; 39.3 MB of floats) as densewire's ragged raw, Arrow and
//! MessagePack bodies against TEI's `/embed_all` JSON (`[[[f32]]]`) parsed by serde_json into
//! `Vec<Vec<Vec<f32>>>`, the usual Rust way. Rounds interleaved (every contender once a round),
//! best and median of the rounds reported, with the ratio of each to the JSON parse.
//!
//!     cargo bench --manifest-path rust/Cargo.toml --bench tokens --features msgpack,protobuf,arrow
//!
//! `DENSEWIRE_BENCH_ROUNDS` (default 7) sets the rounds. The machine (lscpu model name) and the load
//! average are printed beside the figures: on a shared machine, rerun idle.

use densewire::{Batch, Bytes, EncodingFormat, Format, JsonOptions, RaggedEmbeddings, RaggedTensor, Tensor};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let (docs, tokens, d) = (100usize, 256usize, 384usize);
    let n = docs * tokens;
    let values: Vec<f32> = (0..n * d).map(|i| ((i * 2654435761) % 100_000) as f32 / 99_991.0 - 0.5).collect();
    let offsets: Vec<u32> = (0..=docs).map(|i| (i * tokens) as u32).collect();
    let rows = Tensor::from_vec(n, d, values.clone()).unwrap();
    let batch: RaggedEmbeddings = Batch::from_tensor(RaggedTensor::new(offsets, rows).unwrap());
    let opts = JsonOptions { encoding_format: EncodingFormat::Base64, ..JsonOptions::default() };
    let raw = batch.encode(Format::Raw, opts).unwrap();
    let arrow = batch.encode(Format::Arrow, opts).unwrap();
    let msgpack = batch.encode(Format::Msgpack, opts).unwrap();
    let nested: Vec<Vec<Vec<f32>>> =
        (0..docs).map(|i| (0..tokens).map(|t| values[((i * tokens + t) * d)..((i * tokens + t + 1) * d)].to_vec()).collect()).collect();
    let tei = Bytes::from(serde_json::to_vec(&nested).unwrap());
    let raw_headers: Vec<(String, String)> = raw.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    type Run<'a> = Box<dyn Fn() + 'a>;
    let contenders: Vec<(&str, usize, Run)> = vec![
        ("TEI JSON [[[f32]]], serde_json", tei.len(), Box::new(|| {
            let v: Vec<Vec<Vec<f32>>> = serde_json::from_slice(&tei).unwrap();
            black_box(v);
        })),
        ("densewire ragged raw (as_f32 view)", raw.body.len(), Box::new(|| {
            let b = RaggedEmbeddings::decode(Format::Raw, &raw_headers, raw.body.clone(), false).unwrap();
            black_box(b.tensor.rows().as_f32().unwrap().len());
        })),
        ("densewire ragged Arrow", arrow.body.len(), Box::new(|| {
            let b = RaggedEmbeddings::decode(Format::Arrow, &[("", "")], arrow.body.clone(), false).unwrap();
            black_box(b.tensor.rows().as_f32().unwrap().len());
        })),
        ("densewire ragged MessagePack", msgpack.body.len(), Box::new(|| {
            let b = RaggedEmbeddings::decode(Format::Msgpack, &[("", "")], msgpack.body.clone(), false).unwrap();
            black_box(b.tensor.rows().to_f32_vec().unwrap().len());
        })),
    ];
    let rounds: usize = std::env::var("DENSEWIRE_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let mut times = vec![Vec::new(); contenders.len()];
    for (_, _, f) in &contenders {
        f(); // warm-up
    }
    for _ in 0..rounds {
        for (i, (_, _, f)) in contenders.iter().enumerate() {
            let start = Instant::now();
            f();
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("{docs} documents x {tokens} tokens x {d} float32; {rounds} rounds interleaved; CPU {cpu}; load average {}", load.trim());
    let json_best = times[0].iter().cloned().fold(f64::INFINITY, f64::min);
    let json_median = median(times[0].clone());
    println!("{:<38} {:>12} {:>10} {:>10} {:>12} {:>12}", "contender", "bytes", "best ms", "median ms", "x JSON best", "x JSON med");
    for (i, (name, bytes, _)) in contenders.iter().enumerate() {
        let best = times[i].iter().cloned().fold(f64::INFINITY, f64::min);
        let med = median(times[i].clone());
        println!(
            "{name:<38} {bytes:>12} {:>10.3} {:>10.3} {:>12.1} {:>12.1}",
            best * 1e3,
            med * 1e3,
            json_best / best,
            json_median / med
        );
    }
    println!("bytes: raw {:.3}x, Arrow {:.3}x of TEI's JSON", raw.body.len() as f64 / tei.len() as f64, arrow.body.len() as f64 / tei.len() as f64);
}
