//! In-process throughput of the PostgreSQL binary COPY codecs (SPEC.md section 16) on 10,000 x 1,536
//! float32 vectors (61.4 MB) with int8 ids, side by side with a plain copy of the same bytes (the
//! floor any encoder pays: it must write every byte once), so the figures read as ratios.
//!
//!     cargo bench --manifest-path rust/Cargo.toml --bench pgcopy
//!
//! Each line: the best of 5 rounds of ~300 ms each, in MB/s of float32 tensor bytes (1 MB = 10^6 bytes),
//! and its ratio to the plain copy.

use densewire::{
    CopyColumns, DType, PgIdType, PgIds, PgVectorType, Tensor, decode_pgcopy, encode_pgcopy,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn measure(name: &str, bytes: usize, floor: Option<f64>, mut f: impl FnMut()) -> f64 {
    f();
    let mut best = 0f64;
    for _ in 0..5 {
        let start = Instant::now();
        let mut iters = 0u64;
        while start.elapsed() < Duration::from_millis(300) {
            f();
            iters += 1;
        }
        best = best.max(bytes as f64 * iters as f64 / start.elapsed().as_secs_f64() / 1e6);
    }
    match floor {
        Some(c) => println!(
            "{name:<46} {best:>8.0} MB/s  {:>5.2} x the plain copy",
            best / c
        ),
        None => println!("{name:<46} {best:>8.0} MB/s"),
    }
    best
}

fn main() {
    let (n, d) = (10_000usize, 1_536usize);
    let values: Vec<f32> = (0..n * d)
        .map(|i| ((i * 2654435761) % 1000) as f32 / 997.0 - 0.5)
        .collect();
    let t = Tensor::from_vec(n, d, values).unwrap();
    let bytes = t.as_bytes().len();
    let ids = PgIds::from((0..n as i64).collect::<Vec<_>>());
    let copy = measure(
        "plain copy of the tensor bytes (Vec::from)",
        bytes,
        None,
        || {
            black_box(black_box(t.as_bytes()).to_vec());
        },
    );
    for ty in [PgVectorType::Vector, PgVectorType::Halfvec] {
        let cols = CopyColumns::new(ty, "embedding").with_id(PgIdType::Int8, "id");
        let stream = encode_pgcopy(&t, &cols, Some(&ids)).unwrap();
        measure(
            &format!("encode_pgcopy {ty}({d}) + int8 id"),
            bytes,
            Some(copy),
            || {
                black_box(encode_pgcopy(black_box(&t), &cols, Some(&ids)).unwrap());
            },
        );
        measure(
            &format!("decode_pgcopy {ty}({d}) + int8 id"),
            bytes,
            Some(copy),
            || {
                black_box(decode_pgcopy(black_box(&stream), &cols).unwrap());
            },
        );
    }
    let half = t.convert(DType::Float16).unwrap();
    let cols = CopyColumns::new(PgVectorType::Halfvec, "embedding");
    measure(
        "encode_pgcopy halfvec from float16 (no rounding)",
        bytes,
        Some(copy),
        || {
            black_box(encode_pgcopy(black_box(&half), &cols, None).unwrap());
        },
    );
}
