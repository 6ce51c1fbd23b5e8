//! In-process throughput of densewire's codecs on the benchmark tensor (256 x 1024 float32,
//! 1 MiB), plus Base64 by base64-simd (what densewire uses) against the `base64` crate.
//!
//!     cargo bench --manifest-path rust/Cargo.toml --bench decode --features msgpack,protobuf,arrow
//!
//! Each line: the best of 5 rounds of ~200 ms each, in MB/s of tensor bytes (1 MB = 10^6 bytes).

use base64::Engine as _;
use densewire::{
    Bytes, DType, Embeddings, EncodingFormat, Format, JsonOptions, Tensor, Usage, decode_base64,
    decode_json, encode_base64, encode_json, tensor_from_base64,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn measure(name: &str, bytes: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut best = 0f64;
    for _ in 0..5 {
        let start = Instant::now();
        let mut iters = 0u64;
        while start.elapsed() < Duration::from_millis(200) {
            f();
            iters += 1;
        }
        let mbps = bytes as f64 * iters as f64 / start.elapsed().as_secs_f64() / 1e6;
        best = best.max(mbps);
    }
    println!("{name:<44} {best:>10.0} MB/s");
    best
}

fn main() {
    let (n, d) = (256usize, 1024usize);
    let values: Vec<f32> = (0..n * d)
        .map(|i| ((i * 2654435761) % 1000) as f32 / 997.0 - 0.5)
        .collect();
    let tensor = Tensor::from_vec(n, d, values).unwrap();
    let bytes = tensor.as_bytes().len();
    let e = Embeddings {
        tensor: tensor.clone(),
        model: Some("densewire-hash-1024".into()),
        usage: Some(Usage {
            prompt_tokens: 256,
            total_tokens: 256,
        }),
        quantization: None,
    };
    println!("tensor: {n} x {d} float32 = {bytes} bytes");

    println!("\n-- Base64 (whole tensor as one string)");
    let b64 = encode_base64(tensor.as_bytes());
    let simd = measure(
        "decode base64-simd (densewire::decode_base64)",
        bytes,
        || {
            black_box(decode_base64(black_box(&b64)).unwrap());
        },
    );
    let plain = measure("decode base64 crate (STANDARD)", bytes, || {
        black_box(
            base64::engine::general_purpose::STANDARD
                .decode(black_box(&b64))
                .unwrap(),
        );
    });
    println!(
        "{:<44} {:>10.2}x",
        "base64-simd / base64 (decode)",
        simd / plain
    );
    let simd_e = measure(
        "encode base64-simd (densewire::encode_base64)",
        bytes,
        || {
            black_box(encode_base64(black_box(tensor.as_bytes())));
        },
    );
    let plain_e = measure("encode base64 crate (STANDARD)", bytes, || {
        black_box(base64::engine::general_purpose::STANDARD.encode(black_box(tensor.as_bytes())));
    });
    println!(
        "{:<44} {:>10.2}x",
        "base64-simd / base64 (encode)",
        simd_e / plain_e
    );
    measure("tensor_from_base64 little-endian + view", bytes, || {
        let t = tensor_from_base64(
            black_box(&b64),
            DType::Float32,
            n,
            d,
            densewire::ByteOrder::Little,
        )
        .unwrap();
        black_box(t.as_f32().unwrap()[0]);
    });

    println!("\n-- decode a response body to a float32 view");
    let mut bodies = Vec::new();
    for (label, format, enc) in [
        ("raw", Format::Raw, EncodingFormat::Base64),
        ("msgpack", Format::Msgpack, EncodingFormat::Base64),
        ("protobuf", Format::Protobuf, EncodingFormat::Base64),
        ("arrow", Format::Arrow, EncodingFormat::Base64),
        ("json base64", Format::Json, EncodingFormat::Base64),
        ("json float", Format::Json, EncodingFormat::Float),
    ] {
        let encoded = e
            .encode(
                format,
                JsonOptions {
                    encoding_format: enc,
                    ..Default::default()
                },
            )
            .unwrap();
        bodies.push((label, format, enc, encoded));
    }
    for (label, format, _, encoded) in &bodies {
        // The body as a client holds it: in an 8-byte-aligned buffer.
        let mut owned = vec![0u64; encoded.body.len().div_ceil(8)];
        bytemuck_copy(&mut owned, &encoded.body);
        let body = Bytes::from_owner(AlignedBody(owned, encoded.body.len()));
        let headers = encoded.headers.clone();
        let mut zero_copy = false;
        measure(
            &format!("decode {label} ({} body bytes)", body.len()),
            bytes,
            || {
                let e = Embeddings::decode(*format, &headers, body.clone(), true).unwrap();
                let v = e.tensor.as_f32().unwrap();
                zero_copy = matches!(v, std::borrow::Cow::Borrowed(_));
                black_box(v[0]);
            },
        );
        println!("{:<44} {:>10}", "   view borrowed (no copy)", zero_copy);
    }

    println!("\n-- encode a response body");
    for (label, format, enc, _) in &bodies {
        measure(&format!("encode {label}"), bytes, || {
            black_box(
                e.encode(
                    *format,
                    JsonOptions {
                        encoding_format: *enc,
                        ..Default::default()
                    },
                )
                .unwrap(),
            );
        });
    }

    println!("\n-- JSON float envelope via serde_json::Value (what a generic client does)");
    let float_text = encode_json(&e, JsonOptions::default()).unwrap();
    let ours = measure("densewire::decode_json (float rows)", bytes, || {
        black_box(decode_json(black_box(float_text.as_bytes())).unwrap());
    });
    let generic = measure("serde_json::Value then Vec<f32>", bytes, || {
        let v: serde_json::Value =
            serde_json::from_slice(black_box(float_text.as_bytes())).unwrap();
        let rows: Vec<f32> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| {
                r["embedding"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
            })
            .collect();
        black_box(rows);
    });
    println!(
        "{:<44} {:>10.2}x",
        "densewire / serde_json::Value",
        ours / generic
    );

    println!("\n-- conversions (input bytes per second)");
    measure("float32 -> float16", bytes, || {
        black_box(tensor.convert(DType::Float16).unwrap());
    });
    measure("float32 -> bfloat16", bytes, || {
        black_box(tensor.convert(DType::BFloat16).unwrap());
    });
    measure("float32 -> binary", bytes, || {
        black_box(tensor.convert(DType::Binary).unwrap());
    });
}

struct AlignedBody(Vec<u64>, usize);

impl AsRef<[u8]> for AlignedBody {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.0)[..self.1]
    }
}

fn bytemuck_copy(dst: &mut [u64], src: &[u8]) {
    bytemuck::cast_slice_mut::<u64, u8>(dst)[..src.len()].copy_from_slice(src);
}
