//! Fuzz bodies, shared by the cargo-fuzz targets in `fuzz/` and by the corpus test that runs them
//! as ordinary tests. Each takes arbitrary bytes, must never panic, and checks that whatever
//! decodes re-encodes to something that decodes to the same tensor.

use crate::{
    ByteOrder, DType, Embeddings, EmbeddingsRequest, EncodingFormat, Format, JsonOptions, Tensor, decode_base64,
    decode_json, decode_raw, encode_json, tensor_from_base64, tensor_to_base64,
};
use bytes::Bytes;

pub use crate::base64::decode_base64_reference;

fn roundtrip(e: &Embeddings, format: Format) {
    if !format.is_supported() {
        return;
    }
    let enc = e
        .encode(format, JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: ByteOrder::Little })
        .unwrap_or_else(|err| panic!("{format}: a decoded tensor failed to encode: {err}"));
    let back = Embeddings::decode(format, &enc.headers, enc.body, e.model.is_some() || e.usage.is_some())
        .unwrap_or_else(|err| panic!("{format}: our own encoding failed to decode: {err}"));
    assert_eq!(back.tensor, e.tensor, "{format}: round trip changed the tensor");
}

/// Base64: the fast path must agree with the scalar reference on every input, and a decoded
/// string must re-encode to a string that decodes to the same bytes.
pub fn base64(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let fast = decode_base64(s);
    let slow = crate::base64::decode_base64_reference(s);
    assert_eq!(fast, slow, "fast and reference Base64 decoders disagree on {s:?}");
    if let Ok(bytes) = fast {
        let again = decode_base64(&crate::encode_base64(&bytes)).expect("canonical Base64 decodes");
        assert_eq!(again, bytes);
        // Also as a tensor in both byte orders.
        for dtype in [DType::Float32, DType::Float16, DType::Float64, DType::Binary] {
            let item = dtype.item_bytes();
            if bytes.len() % item == 0 {
                let dims = if dtype == DType::Binary { bytes.len() * 8 } else { bytes.len() / item };
                for order in [ByteOrder::Little, ByteOrder::Big] {
                    let t = tensor_from_base64(s, dtype, 1, dims, order).expect("length checked");
                    let back = tensor_from_base64(&tensor_to_base64(&t, order), dtype, 1, dims, order).unwrap();
                    assert_eq!(back, t);
                }
            }
        }
    }
}

/// Raw: the first bytes choose the headers, the rest is the body.
pub fn raw(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let dtype = DType::ALL[data[0] as usize % 7].name();
    let shape = format!("{},{}", data[1] % 8, data[2]);
    let headers = [("Densewire-Dtype", dtype), ("Densewire-Shape", shape.as_str())];
    if let Ok(e) = decode_raw(&headers, Bytes::copy_from_slice(&data[3..])) {
        roundtrip(&e, Format::Raw);
        roundtrip(&e, Format::Json);
    }
}

/// JSON envelope.
pub fn json(data: &[u8]) {
    if let Ok(e) = decode_json(data) {
        roundtrip(&e, Format::Json);
        if let Ok(text) = encode_json(&e, JsonOptions::default()) {
            let back = decode_json(text.as_bytes()).expect("our float JSON decodes");
            assert_eq!(back.tensor, e.tensor, "float JSON round trip changed bits");
        }
        for f in [Format::Msgpack, Format::Protobuf, Format::Arrow] {
            roundtrip(&e, f);
        }
    }
}

/// The embeddings request.
pub fn request(data: &[u8]) {
    if let Ok(r) = EmbeddingsRequest::parse(data) {
        let back = EmbeddingsRequest::parse(r.to_json().as_bytes()).expect("our request JSON parses");
        assert_eq!(back, r);
    }
}

/// Content negotiation never panics and returns an offered format.
pub fn negotiate(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(f) = crate::negotiate(Some(s), None, &[Format::Json, Format::Raw]) {
        assert!(matches!(f, Format::Json | Format::Raw));
    }
}

/// MessagePack.
pub fn msgpack(data: &[u8]) {
    #[cfg(feature = "msgpack")]
    if let Ok(e) = crate::decode_msgpack(Bytes::copy_from_slice(data)) {
        roundtrip(&e, Format::Msgpack);
        roundtrip(&e, Format::Json);
    }
    #[cfg(not(feature = "msgpack"))]
    let _ = data;
}

/// Protobuf, as a `Tensor` and as an `EmbeddingsResponse`.
pub fn protobuf(data: &[u8]) {
    #[cfg(feature = "protobuf")]
    {
        if let Ok(t) = crate::decode_protobuf_tensor(Bytes::copy_from_slice(data)) {
            roundtrip(&Embeddings::from_tensor(t), Format::Protobuf);
        }
        if let Ok(e) = crate::decode_protobuf_response(Bytes::copy_from_slice(data)) {
            roundtrip(&e, Format::Protobuf);
        }
    }
    #[cfg(not(feature = "protobuf"))]
    let _ = data;
}

/// Arrow IPC stream.
pub fn arrow(data: &[u8]) {
    #[cfg(feature = "arrow")]
    if let Ok(e) = crate::decode_arrow(Bytes::copy_from_slice(data)) {
        roundtrip(&e, Format::Arrow);
    }
    #[cfg(not(feature = "arrow"))]
    let _ = data;
}

/// For the arrow fuzz target: panics raised inside the arrow crates are caught by
/// [`crate::decode_arrow`] and reported as `malformed` (an upstream arrow-ipc bug), so they must
/// not abort the fuzzer; every other panic still aborts, as libFuzzer needs.
pub fn tolerate_arrow_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_arrow = info.location().is_some_and(|l| l.file().contains("/arrow-"));
        if !in_arrow {
            previous(info);
        }
    }));
}

/// Every target by name, for the corpus runner.
pub const TARGETS: [(&str, fn(&[u8])); 8] = [
    ("base64", base64),
    ("raw", raw),
    ("json", json),
    ("request", request),
    ("negotiate", negotiate),
    ("msgpack", msgpack),
    ("protobuf", protobuf),
    ("arrow", arrow),
];

#[allow(dead_code)]
fn _assert_tensor_is_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Tensor>();
}
