//! The shared checks of SPEC.md 20.1 and 20.2, and round trips of every format.

use super::*;
use crate::embeddings::EncodingFormat;

fn ragged() -> RaggedEmbeddings {
    let rows = Tensor::from_slice(3, 2, &[1.0f32, 2.0, 3.0, 4.0, 0.5, -1.5]).unwrap();
    let mut b = Batch::from_tensor(RaggedTensor::new(vec![0, 2, 2, 3], rows).unwrap());
    b.model = Some("m".into());
    b.usage = Some(Usage { prompt_tokens: 3, total_tokens: 3 });
    b
}

fn sparse() -> SparseEmbeddings {
    let values = Tensor::from_slice(1, 3, &[0.5f32, 0.25, 1.5]).unwrap();
    let mut b = Batch::from_tensor(SparseTensor::from_parts(30522, vec![0, 2, 2, 3], &[1, 7, 30521], values).unwrap());
    b.model = Some("m".into());
    b.usage = Some(Usage { prompt_tokens: 5, total_tokens: 5 });
    b
}

#[test]
fn matrices_are_views_of_one_buffer() {
    let b = ragged();
    let t = &b.tensor;
    assert_eq!((t.len(), t.dims(), t.offsets()), (3, 2, &[0, 2, 2, 3][..]));
    assert_eq!(t.matrix(1).rows(), 0);
    let m = t.matrix(2);
    assert_eq!(&*m.as_f32().unwrap(), &[0.5, -1.5]);
    assert_eq!(m.as_bytes().as_ptr(), t.rows().as_bytes()[16..].as_ptr());
}

#[test]
fn offsets_and_indices_are_checked_with_their_offsets() {
    let e = check_offsets(&[0, 2, 1], 100).unwrap_err();
    assert_eq!((e.kind(), e.offset(), e.field_name()), (ErrorKind::InvalidField, Some(108), Some("offsets")));
    assert_eq!(check_offsets(&[1, 2], 0).unwrap_err().offset(), Some(0));
    let e = read_offsets(&[0; 6], 1, 0).unwrap_err();
    assert_eq!((e.kind(), e.offset()), (ErrorKind::LengthMismatch, Some(6)));
    let idx: Vec<u8> = [1u32, 5, 3, 2].iter().flat_map(|i| i.to_le_bytes()).collect();
    // vectors [1, 5] and [3, 2]: the 2 after 3 is out of order (entry 3), not the 3 after 5 (a new vector)
    assert_eq!(check_indices(&idx, &[0, 2, 4], 10, 0).unwrap_err().offset(), Some(12));
    assert_eq!(check_indices(&idx, &[0, 2, 4], 5, 0).unwrap_err().offset(), Some(4)); // 5 is not below V = 5
    assert!(check_vocab(0, "shape").is_err() && check_vocab(MAX_VOCABULARY + 1, "shape").is_err());
    assert!(SparseTensor::from_parts(10, vec![0, 1], &[1], Tensor::from_slice(1, 1, &[1i8]).unwrap()).is_err());
}

#[test]
fn every_format_round_trips() {
    for format in Format::supported() {
        for opts in [
            JsonOptions::default(),
            JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: crate::ByteOrder::Big },
        ] {
            let b = ragged();
            let enc = b.encode(format, opts).unwrap();
            let back = RaggedEmbeddings::decode(format, &enc.headers, enc.body, true).unwrap();
            assert_eq!(back, b, "{format}");
            let s = sparse();
            let enc = s.encode(format, opts).unwrap();
            let back = SparseEmbeddings::decode(format, &enc.headers, enc.body, true).unwrap();
            assert_eq!(back, s, "{format}");
        }
    }
}

#[test]
fn a_body_of_one_kind_is_not_read_as_the_other() {
    let enc = ragged().encode(Format::Json, JsonOptions::default()).unwrap();
    assert_eq!(
        SparseEmbeddings::decode(Format::Json, &[("", "")], enc.body, true).unwrap_err().field_name(),
        Some("kind")
    );
    let enc = sparse().encode(Format::Raw, JsonOptions::default()).unwrap();
    let e = RaggedEmbeddings::decode(Format::Raw, &enc.headers, enc.body, false).unwrap_err();
    assert_eq!(e.field_name(), Some(HEADER_KIND));
}
