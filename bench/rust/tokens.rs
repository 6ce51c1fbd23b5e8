//! Per-token embeddings (issue 32, SPEC.md 20): the client-side decode of 100 documents x 256 tokens
//! x 384 float32 (MiniLM's token states; 39.3 MB of floats) as densewire's ragged raw, Arrow,
//! MessagePack and Protobuf bodies against TEI's `/embed_all` JSON (`[[[f32]]]`) parsed by serde_json into
//! `Vec<Vec<Vec<f32>>>`, the usual Rust way; then 100 sparse vectors of 200 non-zeros over 30,522
//! (SPLADE's BERT vocabulary) against TEI's `/embed_sparse` JSON (`[[{index, value}]]`). Rounds interleaved (every contender once a round),
//! best and median of the rounds reported, with the ratio of each to the JSON parse.
//!
//!     cargo bench --manifest-path rust/Cargo.toml --bench tokens --features msgpack,protobuf,arrow
//!
//! `DENSEWIRE_BENCH_ROUNDS` (default 7) sets the rounds. The machine (lscpu model name) and the load
//! average are printed beside the figures: on a shared machine, rerun idle.

use densewire::{
    Batch, Bytes, EncodingFormat, Format, JsonOptions, RaggedEmbeddings, RaggedTensor, SparseEmbeddings, SparseTensor,
    Tensor,
};
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
    let protobuf = batch.encode(Format::Protobuf, opts).unwrap();
    let nested: Vec<Vec<Vec<f32>>> = (0..docs)
        .map(|i| (0..tokens).map(|t| values[((i * tokens + t) * d)..((i * tokens + t + 1) * d)].to_vec()).collect())
        .collect();
    let tei = Bytes::from(serde_json::to_vec(&nested).unwrap());
    let raw_headers: Vec<(String, String)> = raw.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let contenders: Vec<(&str, usize, Run)> = vec![
        (
            "TEI JSON [[[f32]]], serde_json",
            tei.len(),
            Box::new(|| {
                let v: Vec<Vec<Vec<f32>>> = serde_json::from_slice(&tei).unwrap();
                black_box(v);
            }),
        ),
        (
            "densewire ragged raw (as_f32 view)",
            raw.body.len(),
            Box::new(|| {
                let b = RaggedEmbeddings::decode(Format::Raw, &raw_headers, raw.body.clone(), false).unwrap();
                black_box(b.tensor.rows().as_f32().unwrap().len());
            }),
        ),
        (
            "densewire ragged Arrow",
            arrow.body.len(),
            Box::new(|| {
                let b = RaggedEmbeddings::decode(Format::Arrow, &[("", "")], arrow.body.clone(), false).unwrap();
                black_box(b.tensor.rows().as_f32().unwrap().len());
            }),
        ),
        (
            "densewire ragged MessagePack",
            msgpack.body.len(),
            Box::new(|| {
                let b = RaggedEmbeddings::decode(Format::Msgpack, &[("", "")], msgpack.body.clone(), false).unwrap();
                black_box(b.tensor.rows().to_f32_vec().unwrap().len());
            }),
        ),
        (
            "densewire ragged Protobuf",
            protobuf.body.len(),
            Box::new(|| {
                let b = RaggedEmbeddings::decode(Format::Protobuf, &[("", "")], protobuf.body.clone(), false).unwrap();
                black_box(b.tensor.rows().to_f32_vec().unwrap().len());
            }),
        ),
    ];
    let rounds: usize = std::env::var("DENSEWIRE_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{docs} documents x {tokens} tokens x {d} float32; {rounds} rounds interleaved; CPU {cpu}; load average {}",
        load.trim()
    );
    interleaved(&contenders, rounds);
    println!(
        "bytes: raw {:.3}x, Arrow {:.3}x of TEI's JSON",
        raw.body.len() as f64 / tei.len() as f64,
        arrow.body.len() as f64 / tei.len() as f64
    );
    drop(contenders);

    // Sparse: 100 vectors of 200 non-zeros over BERT's 30,522 (SPLADE), against TEI's /embed_sparse
    // JSON ([[{"index", "value"}]]) read by serde_json into Vec<Vec<{index, value}>>.
    let (nnz, vocab) = (200usize, 30_522u64);
    let sp_offsets: Vec<u32> = (0..=docs).map(|i| (i * nnz) as u32).collect();
    let sp_indices: Vec<u32> = (0..docs * nnz).map(|e| ((e % nnz) * 150 + (e / nnz * 7) % 150) as u32).collect();
    let sp_values: Vec<f32> = (0..docs * nnz).map(|e| ((e * 2654435761) % 100_000) as f32 / 99_991.0 * 3.0).collect();
    let sparse = SparseTensor::from_parts(
        vocab,
        sp_offsets,
        &sp_indices,
        Tensor::from_vec(1, docs * nnz, sp_values.clone()).unwrap(),
    )
    .unwrap();
    let sbatch: SparseEmbeddings = Batch::from_tensor(sparse);
    let sraw = sbatch.encode(Format::Raw, opts).unwrap();
    let sarrow = sbatch.encode(Format::Arrow, opts).unwrap();
    let smsgpack = sbatch.encode(Format::Msgpack, opts).unwrap();
    let sprotobuf = sbatch.encode(Format::Protobuf, opts).unwrap();
    let snested: Vec<Vec<TeiSparse>> = (0..docs)
        .map(|i| (i * nnz..(i + 1) * nnz).map(|e| TeiSparse { index: sp_indices[e], value: sp_values[e] }).collect())
        .collect();
    let stei = Bytes::from(serde_json::to_vec(&snested).unwrap());
    let sraw_headers: Vec<(String, String)> = sraw.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let sparse_contenders: Vec<(&str, usize, Run)> = vec![
        (
            "TEI JSON [[{index, value}]], serde_json",
            stei.len(),
            Box::new(|| {
                let v: Vec<Vec<TeiSparse>> = serde_json::from_slice(&stei).unwrap();
                black_box(v);
            }),
        ),
        (
            "densewire sparse raw (checked, views)",
            sraw.body.len(),
            Box::new(|| {
                let b = SparseEmbeddings::decode(Format::Raw, &sraw_headers, sraw.body.clone(), false).unwrap();
                black_box((b.tensor.indices().len(), b.tensor.values().as_f32().unwrap().len()));
            }),
        ),
        (
            "densewire sparse Arrow",
            sarrow.body.len(),
            Box::new(|| {
                let b = SparseEmbeddings::decode(Format::Arrow, &[("", "")], sarrow.body.clone(), false).unwrap();
                black_box((b.tensor.indices().len(), b.tensor.values().to_f32_vec().unwrap().len()));
            }),
        ),
        (
            "densewire sparse MessagePack",
            smsgpack.body.len(),
            Box::new(|| {
                let b = SparseEmbeddings::decode(Format::Msgpack, &[("", "")], smsgpack.body.clone(), false).unwrap();
                black_box((b.tensor.indices().len(), b.tensor.values().to_f32_vec().unwrap().len()));
            }),
        ),
        (
            "densewire sparse Protobuf",
            sprotobuf.body.len(),
            Box::new(|| {
                let b = SparseEmbeddings::decode(Format::Protobuf, &[("", "")], sprotobuf.body.clone(), false).unwrap();
                black_box((b.tensor.indices().len(), b.tensor.values().to_f32_vec().unwrap().len()));
            }),
        ),
    ];
    // every body holds TEI's numbers, bit for bit
    for (name, body, headers) in [
        ("raw", &sraw.body, &sraw_headers),
        ("arrow", &sarrow.body, &Vec::new()),
        ("msgpack", &smsgpack.body, &Vec::new()),
        ("protobuf", &sprotobuf.body, &Vec::new()),
    ] {
        let format = match name {
            "raw" => Format::Raw,
            "arrow" => Format::Arrow,
            "msgpack" => Format::Msgpack,
            _ => Format::Protobuf,
        };
        let b = SparseEmbeddings::decode(format, headers, body.clone(), false).unwrap();
        assert_eq!(&*b.tensor.indices(), &sp_indices[..], "{name}");
        assert_eq!(b.tensor.values().to_f32_vec().unwrap(), sp_values, "{name}");
    }
    println!();
    println!("{docs} sparse vectors x {nnz} non-zeros over {vocab}; {rounds} rounds interleaved");
    interleaved(&sparse_contenders, rounds);
    println!(
        "bytes: raw {:.3}x, Arrow {:.3}x of TEI's JSON",
        sraw.body.len() as f64 / stei.len() as f64,
        sarrow.body.len() as f64 / stei.len() as f64
    );
}

/// One entry of TEI's `/embed_sparse` answer.
#[derive(serde::Serialize, serde::Deserialize)]
struct TeiSparse {
    index: u32,
    value: f32,
}

type Run<'a> = Box<dyn Fn() + 'a>;

/// Every contender once a round (after one warm-up), then best and median and their ratios to the first.
fn interleaved(contenders: &[(&str, usize, Run)], rounds: usize) {
    let mut times = vec![Vec::new(); contenders.len()];
    for (_, _, f) in contenders {
        f(); // warm-up
    }
    for _ in 0..rounds {
        for (i, (_, _, f)) in contenders.iter().enumerate() {
            let start = Instant::now();
            f();
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let json_best = times[0].iter().cloned().fold(f64::INFINITY, f64::min);
    let json_median = median(times[0].clone());
    println!(
        "{:<42} {:>12} {:>10} {:>10} {:>12} {:>12}",
        "contender", "bytes", "best ms", "median ms", "x JSON best", "x JSON med"
    );
    for (i, (name, bytes, _)) in contenders.iter().enumerate() {
        let best = times[i].iter().cloned().fold(f64::INFINITY, f64::min);
        let med = median(times[i].clone());
        println!(
            "{name:<42} {bytes:>12} {:>10.3} {:>10.3} {:>12.1} {:>12.1}",
            best * 1e3,
            med * 1e3,
            json_best / best,
            json_median / med
        );
    }
}
