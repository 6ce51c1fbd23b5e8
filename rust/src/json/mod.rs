//! The JSON embeddings envelope (SPEC.md section 6): response decoding and encoding, and the
//! request of `POST /v1/embeddings`.

mod decode;
mod encode;
mod request;

pub use decode::decode_json;
pub(crate) use decode::{json_error, put_number};
pub use encode::encode_json;
pub(crate) use encode::write_numbers;
pub use request::{EmbeddingsRequest, Input, MAX_INPUTS};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ByteOrder, DType, Embeddings, EncodingFormat, ErrorKind, JsonOptions, Tensor, Usage};

    fn err_of(text: &str) -> (ErrorKind, Option<String>, Option<u64>) {
        let e = decode_json(text.as_bytes()).unwrap_err();
        (e.kind(), e.field_name().map(str::to_owned), e.offset())
    }

    #[test]
    fn rows_by_index_and_defaults() {
        let e = decode_json(
            br#"{"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2.5]}],"extra":{"x":[1]}}"#,
        )
        .unwrap();
        assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, 2.5, 3.0, 4.0]);
        assert_eq!(e.model, None);
        // Every row needs its index; dimensions with no rows.
        assert_eq!(
            err_of(r#"{"data":[{"index":0,"embedding":[1]},{"embedding":[2]}]}"#).1.as_deref(),
            Some("data[1].index")
        );
        let e = decode_json(br#"{"data":[],"dimensions":7,"dtype":"float16"}"#).unwrap();
        assert_eq!((e.tensor.dtype(), e.tensor.shape()), (DType::Float16, (0, 7)));
    }

    #[test]
    fn a_huge_declared_dimensions_is_a_row_error_not_an_allocation() {
        // found by the json fuzz target: the tensor was allocated from `dimensions` before any row
        // was checked, so 2222222222222220 binary dimensions aborted the process
        let huge = r#"{"data":[{"index":0,"embedding":[255,0,240]}],"dtype":"binary","dimensions":2222222222222220}"#;
        assert_eq!(err_of(huge), (ErrorKind::ShapeMismatch, Some("data[0].embedding".into()), None));
        let b64 = r#"{"data":[{"index":0,"embedding":"AACAPw=="}],"dimensions":1000000000000}"#;
        assert_eq!(err_of(b64), (ErrorKind::LengthMismatch, Some("data[0].embedding".into()), Some(4)));
        let bad = r#"{"data":[{"index":0,"embedding":"AA*A"}],"dimensions":1000000000000}"#;
        assert_eq!(err_of(bad), (ErrorKind::InvalidBase64, Some("data[0].embedding".into()), Some(2)));
    }

    #[test]
    fn escaped_base64_and_big_endian() {
        // "\/" is a legal JSON escape of '/', so the row string is not borrowed.
        let e = decode_json(br#"{"data":[{"index":0,"embedding":"P4AAAMAgAAA9zMzN"}],"byteorder":"big"}"#).unwrap();
        assert_eq!(&*e.tensor.as_f32().unwrap(), &[1.0, -2.5, 0.1]);
        let e = decode_json(br#"{"data":[{"index":0,"embedding":"AACAP\/\/\/\/\/8="}],"dtype":"uint8"}"#).unwrap();
        assert_eq!(e.tensor.as_bytes(), &[0, 0, 0x80, 0x3f, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn integer_dtypes_check_ranges() {
        let e = decode_json(br#"{"data":[{"index":0,"embedding":[-128,127,0]}],"dtype":"int8"}"#).unwrap();
        assert_eq!(e.tensor.as_bytes(), &[0x80, 0x7f, 0]);
        assert_eq!(
            err_of(r#"{"data":[{"index":0,"embedding":[128]}],"dtype":"int8"}"#).1.as_deref(),
            Some("data[0].embedding[0]")
        );
        assert_eq!(err_of(r#"{"data":[{"index":0,"embedding":[1.5]}],"dtype":"uint8"}"#).0, ErrorKind::InvalidField);
        assert_eq!(err_of(r#"{"data":[{"index":0,"embedding":[1,"x"]}]}"#).1.as_deref(), Some("data[0].embedding[1]"));
        // binary rows are packed bytes; d defaults to 8 per byte.
        let e = decode_json(br#"{"data":[{"index":0,"embedding":[179,240]}],"dtype":"binary"}"#).unwrap();
        assert_eq!(e.tensor.shape(), (1, 16));
    }

    #[test]
    fn structural_errors() {
        assert_eq!(err_of("[1,2]").0, ErrorKind::Malformed);
        assert_eq!(err_of(r#"{"data":{}}"#).1.as_deref(), Some("data"));
        assert_eq!(err_of(r#"{"data":[7]}"#).1.as_deref(), Some("data[0]"));
        assert_eq!(err_of(r#"{"data":[{"index":"0","embedding":[1]}]}"#).1.as_deref(), Some("data[0].index"));
        assert_eq!(err_of(r#"{"data":[{"index":0}]}"#).1.as_deref(), Some("data[0].embedding"));
        assert_eq!(err_of(r#"{"data":[],"dimensions":-1}"#).1.as_deref(), Some("dimensions"));
        assert_eq!(err_of(r#"{"data":[],"dtype":5}"#).1.as_deref(), Some("dtype"));
        // A syntax error carries the byte offset of serde_json's line and column.
        assert_eq!(err_of("{\n  \"data\": [1,,2]}"), (ErrorKind::Malformed, None, Some(15)));
        // Base64 rows whose first row is not a whole number of items.
        assert_eq!(
            err_of(r#"{"data":[{"index":0,"embedding":"AAAA"}]}"#),
            (ErrorKind::LengthMismatch, Some("data[0].embedding".into()), Some(0))
        );
    }

    #[test]
    fn shortest_decimals_for_16_bit_dtypes() {
        let t = Tensor::from_slice(
            1,
            4,
            &[half::f16::from_bits(0x2e66), half::f16::from_bits(0x0001), half::f16::MAX, half::f16::from_bits(0x8000)],
        )
        .unwrap();
        let text = encode_json(&Embeddings::from_tensor(t), JsonOptions::default()).unwrap();
        assert!(text.contains(r#""embedding":[0.1,6e-8,65500.0,-0.0]"#), "{text}");
        let b = Tensor::from_slice(1, 2, &[half::bf16::from_bits(0x3dcd), half::bf16::from_bits(0x7f7f)]).unwrap();
        let text = encode_json(&Embeddings::from_tensor(b), JsonOptions::default()).unwrap();
        assert!(text.contains(r#""embedding":[0.1,3.39e38]"#), "{text}");
    }

    #[test]
    fn encode_writes_spec_key_order() {
        let t = Tensor::from_slice(1, 1, &[1.0f32]).unwrap();
        let e = Embeddings { tensor: t, model: Some("m\"x".into()), usage: None, quantization: None };
        let text = encode_json(&e, JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: ByteOrder::Big })
            .unwrap();
        assert_eq!(
            text,
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":"P4AAAA=="}],"model":"m\"x","usage":{"prompt_tokens":0,"total_tokens":0},"dtype":"float32","byteorder":"big","dimensions":1}"#
        );
    }

    #[test]
    fn request_round_trip_and_token_inputs() {
        let r = EmbeddingsRequest::parse(
            br#"{"input":[[1,2],[3]],"dimensions":8,"byteorder":"big","truncate":false,"user":"u"}"#,
        )
        .unwrap();
        assert_eq!(r.input, Input::TokenBatches(vec![vec![1, 2], vec![3]]));
        assert_eq!(EmbeddingsRequest::parse(r.to_json().as_bytes()).unwrap(), r);
        assert_eq!(EmbeddingsRequest::new(["a"]).to_json(), r#"{"input":["a"]}"#);
        let many = format!(r#"{{"input":[{}]}}"#, vec!["\"a\""; MAX_INPUTS + 1].join(","));
        assert_eq!(EmbeddingsRequest::parse(many.as_bytes()).unwrap_err().field_name(), Some("input"));
        assert_eq!(EmbeddingsRequest::parse(br#"{"model":"m"}"#).unwrap_err().field_name(), Some("input"));
        assert_eq!(EmbeddingsRequest::parse(br#"{"input":[[1],[]]}"#).unwrap_err().field_name(), Some("input[1]"));
        assert_eq!(
            EmbeddingsRequest::parse(br#"{"input":"a","encoding_format":"int"}"#).unwrap_err().field_name(),
            Some("encoding_format")
        );
    }

    #[test]
    fn usage_counts_are_non_negative_integers() {
        let with = |usage: &str| {
            let text = format!(r#"{{"data":[{{"index":0,"embedding":[1]}}],"usage":{usage}}}"#);
            decode_json(text.as_bytes()).map(|e| e.usage)
        };
        assert_eq!(
            with(r#"{"prompt_tokens":3,"total_tokens":4}"#).unwrap(),
            Some(Usage { prompt_tokens: 3, total_tokens: 4 })
        );
        assert_eq!(with("null").unwrap(), None);
        assert_eq!(with("{}").unwrap(), Some(Usage::default()));
        for (usage, field) in [
            (r#"{"prompt_tokens":-1,"total_tokens":0}"#, "usage.prompt_tokens"),
            (r#"{"prompt_tokens":1,"total_tokens":2.5}"#, "usage.total_tokens"),
            (r#"{"prompt_tokens":"3"}"#, "usage.prompt_tokens"),
            (r#"{"total_tokens":true}"#, "usage.total_tokens"),
            (r#"{"prompt_tokens":null}"#, "usage.prompt_tokens"),
            (r#"{"prompt_tokens":1e3080}"#, "usage.prompt_tokens"),
            (r#"{"total_tokens":9007199254740992}"#, "usage.total_tokens"),
            ("[3,3]", "usage"),
            (r#""3""#, "usage"),
        ] {
            let e = with(usage).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some(field)), "{usage}");
        }
    }
}
