//! Fuzz bodies, shared by the cargo-fuzz targets in `fuzz/` and by the corpus test that runs them
//! as ordinary tests. Each takes arbitrary bytes, must never panic, and checks that whatever
//! decodes re-encodes to something that decodes to the same tensor (or table: the `table_*`
//! bodies).

use crate::{
    ByteOrder, Column, ColumnData, ColumnType, DType, Embeddings, EmbeddingsRequest, EncodingFormat, Error, ErrorKind,
    Format, JsonOptions, Table, TableFormat, Tensor, decode_base64, decode_json, decode_raw, encode_json,
    tensor_from_base64, tensor_to_base64,
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
    let back = Embeddings::decode(format, &enc.headers, enc.body, e.has_envelope())
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

// ------------------------------------------------------------------ tables (SPEC.md section 15)
//
// Every table body mirrors Go's FuzzDecodeTable* (go/table_fuzz_test.go): a decoder error must be a
// decoding category with an offset inside the body; a decoded table must be valid (as Go's
// Table.Validate) and re-encode, in its own format, to a body that decodes to the same table (floats
// compared by their bits). Beyond Go, every decoded table also goes through every other encoder of
// this crate (`table_round_trips`): MessagePack and Protobuf keep every bit, JSON refuses
// non-finite floats (`non_finite`, only when the table holds one), CSV spells every NaN `NaN` (its
// payload and sign are not carried: the one place SPEC.md section 15.1 lets bits differ).

/// A table decoder's error (Go's checkDecodeError): a decoding category, an offset inside the
/// body, a message.
fn check_table_error(e: &Error, len: usize) {
    assert!(
        matches!(
            e.kind(),
            ErrorKind::LengthMismatch
                | ErrorKind::ShapeMismatch
                | ErrorKind::UnknownDtype
                | ErrorKind::Truncated
                | ErrorKind::Malformed
                | ErrorKind::InvalidField
        ),
        "a table decoder failed with category {:?}: {e}",
        e.kind()
    );
    if let Some(o) = e.offset() {
        assert!(o <= len as u64, "offset {o} is outside the body of {len} bytes: {e}");
    }
    assert!(!e.message().is_empty(), "an error without a message: {e:?}");
}

/// A decoded table is valid (Go's `Table.Validate`): column names non-empty and unique, every type
/// one of section 15.1 (its name parses back, so a vector has `d >= 1`), every column `rows` values
/// of its type, bools 0 or 1.
pub fn check_table(t: &Table) {
    let mut names = std::collections::HashSet::new();
    for c in &t.columns {
        assert!(!c.name.is_empty(), "a column without a name");
        assert!(names.insert(c.name.as_str()), "column {:?} appears twice", c.name);
        assert_eq!(ColumnType::from_name(&c.ty.name()).ok(), Some(c.ty), "column {:?}: type {}", c.name, c.ty);
        if let Err(e) = Column::new(c.name.clone(), c.ty, c.data.clone(), t.rows) {
            panic!("column {:?} is not {} values of {}: {e}", c.name, t.rows, c.ty);
        }
    }
}

fn has_non_finite(t: &Table) -> bool {
    t.columns.iter().any(|c| match &c.data {
        ColumnData::Float32(v) | ColumnData::Float32Vector(v) => v.as_slice().iter().any(|x| !x.is_finite()),
        ColumnData::Float64(v) => v.as_slice().iter().any(|x| !x.is_finite()),
        _ => false,
    })
}

/// `got == want`, floats by their bits; with `any_nan`, a NaN matches any NaN (CSV's `NaN`).
fn same_table(what: &str, got: &Table, want: &Table, any_nan: bool) {
    if !any_nan || got == want {
        assert_eq!(got, want, "{what}: the table changed");
        return;
    }
    assert_eq!((&got.name, got.rows, got.specs()), (&want.name, want.rows, want.specs()), "{what}");
    for (g, w) in got.columns.iter().zip(&want.columns) {
        // Widening float32 to float64 is exact, so distinct non-NaN values stay distinct.
        let floats = |d: &ColumnData| -> Option<Vec<f64>> {
            match d {
                ColumnData::Float32(v) | ColumnData::Float32Vector(v) => {
                    Some(v.as_slice().iter().map(|&x| x as f64).collect())
                }
                ColumnData::Float64(v) => Some(v.as_slice().to_vec()),
                _ => None,
            }
        };
        let same = match (floats(&g.data), floats(&w.data)) {
            (Some(a), Some(b)) => {
                a.len() == b.len()
                    && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan())
            }
            _ => g.data == w.data,
        };
        assert!(same, "{what}: column {:?} changed:\n{:?}\nwas\n{:?}", w.name, g.data, w.data);
    }
}

/// Whether the text encodings of `t` stay small. A table without columns may claim any number
/// of rows in a few bytes (`"rows":1e18` in JSON columns, a varint in Protobuf): valid, but JSON
/// objects, JSON rows and CSV spend bytes on every row.
fn text_is_small(t: &Table) -> bool {
    let per_row: usize = t.columns.iter().map(|c| c.name.len() + 8).sum::<usize>() + 4;
    t.rows.saturating_mul(per_row) <= 1 << 24
}

/// `t` (decoded from `from`) survives every encoder of this crate: see the comment above.
fn table_round_trips(t: &Table, from: TableFormat) {
    check_table(t);
    let specs = t.specs();
    let header = crate::columns_header(&specs);
    assert_eq!(crate::parse_columns_header(&header).as_ref(), Ok(&specs), "Densewire-Columns {header:?}");
    #[cfg(feature = "msgpack")]
    {
        let back = crate::decode_table_msgpack(crate::encode_table_msgpack(t).into())
            .unwrap_or_else(|e| panic!("{from:?} -> MessagePack: our encoding fails to decode: {e}"));
        same_table(&format!("{from:?} -> MessagePack"), &back, t, false);
    }
    #[cfg(feature = "protobuf")]
    for split in [false, true] {
        let back = crate::decode_table_protobuf(crate::encode_table_protobuf(t, split).into())
            .unwrap_or_else(|e| panic!("{from:?} -> Protobuf (split {split}): our encoding fails to decode: {e}"));
        same_table(&format!("{from:?} -> Protobuf (split {split})"), &back, t, false);
    }
    if !text_is_small(t) {
        assert!(t.columns.is_empty(), "{} rows of {} columns", t.rows, t.columns.len());
        return;
    }
    for layout in [TableFormat::Json, TableFormat::JsonRows, TableFormat::JsonColumns] {
        let what = format!("{from:?} -> {layout:?}");
        match crate::encode_table_json(t, layout) {
            Ok(text) => {
                let back = match layout {
                    TableFormat::Json => crate::decode_table_json_objects(text.as_bytes(), &t.name, &specs),
                    TableFormat::JsonRows => crate::decode_table_json_rows(text.as_bytes()),
                    _ => crate::decode_table_json_columns(text.as_bytes()),
                };
                let back = back.unwrap_or_else(|e| panic!("{what}: our encoding fails to decode: {e}\n{text}"));
                same_table(&what, &back, t, false);
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NonFinite, "{what}: {e}");
                assert!(has_non_finite(t), "{what}: non_finite without a NaN or an infinity: {e}");
            }
        }
    }
    let text = crate::encode_table_csv(t).unwrap_or_else(|e| panic!("{from:?} -> CSV: {e}"));
    let back = crate::decode_table_csv(text.as_bytes(), &t.name, &specs)
        .unwrap_or_else(|e| panic!("{from:?} -> CSV: our encoding fails to decode: {e}\n{text:?}"));
    same_table(&format!("{from:?} -> CSV"), &back, t, true);
}

/// Splits `data` at its first newline: the `Densewire-Columns` value (UTF-8, or `None`) and the
/// body, so that the fuzzer mutates the schema of the typeless formats too.
fn schema_and_body(data: &[u8]) -> Option<(&str, &[u8])> {
    let nl = data.iter().position(|&b| b == b'\n')?;
    Some((std::str::from_utf8(&data[..nl]).ok()?, &data[nl + 1..]))
}

/// The three JSON layouts, chosen by the first byte (`% 3`: objects, rows, columns). For objects
/// the rest is `Densewire-Columns` value, newline, body; for rows and columns the rest is the
/// body. Text that is not JSON must fail as `malformed` (or `truncated` when it ends early).
pub fn table_json(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let format = [TableFormat::Json, TableFormat::JsonRows, TableFormat::JsonColumns][selector as usize % 3];
    let (columns, body) = match format {
        TableFormat::Json => match schema_and_body(rest) {
            Some(split) => split,
            None => return,
        },
        _ => ("", rest),
    };
    let headers = [(crate::HEADER_TABLE, "t"), (crate::HEADER_COLUMNS, columns)];
    let decoded = Table::decode(format, &headers, Bytes::copy_from_slice(body));
    let is_json = serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
    match decoded {
        Ok(t) => {
            assert!(is_json, "{format:?}: accepted text that is not JSON");
            // JSON has no infinities and a number beyond a float column's range is refused
            // (SPEC.md section 15.3): a decoded table always re-encodes.
            assert!(!has_non_finite(&t), "{format:?}: a NaN or an infinity from JSON");
            let text = crate::encode_table_json(&t, format)
                .unwrap_or_else(|e| panic!("{format:?}: a decoded table fails to encode: {e}"));
            let back = Table::decode(format, &headers, Bytes::from(text.clone()))
                .unwrap_or_else(|e| panic!("{format:?}: our encoding fails to decode: {e}\n{text}"));
            same_table(&format!("{format:?} re-encoded"), &back, &t, false);
            table_round_trips(&t, format);
        }
        Err(e) => {
            check_table_error(&e, body.len());
            let schema_ok = format != TableFormat::Json || crate::parse_columns_header(columns).is_ok();
            if schema_ok && !is_json {
                assert!(
                    matches!(e.kind(), ErrorKind::Malformed | ErrorKind::Truncated),
                    "{format:?}: invalid JSON: {e}"
                );
            }
        }
    }
}

/// CSV: `Densewire-Columns` value, newline, body.
pub fn table_csv(data: &[u8]) {
    let Some((columns, body)) = schema_and_body(data) else { return };
    let headers = [(crate::HEADER_TABLE, "t"), (crate::HEADER_COLUMNS, columns)];
    match Table::decode(TableFormat::Csv, &headers, Bytes::copy_from_slice(body)) {
        Ok(t) => {
            let text =
                crate::encode_table_csv(&t).unwrap_or_else(|e| panic!("CSV: a decoded table fails to encode: {e}"));
            let back = Table::decode(TableFormat::Csv, &headers, Bytes::from(text.clone()))
                .unwrap_or_else(|e| panic!("CSV: our encoding fails to decode: {e}\n{text:?}"));
            // The decoder reads every NaN as the canonical one: even CSV's own round trip is exact.
            same_table("CSV re-encoded", &back, &t, false);
            table_round_trips(&t, TableFormat::Csv);
        }
        Err(e) => check_table_error(&e, body.len()),
    }
}

/// Columnar MessagePack.
pub fn table_msgpack(data: &[u8]) {
    #[cfg(feature = "msgpack")]
    match crate::decode_table_msgpack(Bytes::copy_from_slice(data)) {
        Ok(t) => {
            let back = crate::decode_table_msgpack(crate::encode_table_msgpack(&t).into())
                .unwrap_or_else(|e| panic!("MessagePack: our encoding fails to decode: {e}"));
            same_table("MessagePack re-encoded", &back, &t, false);
            table_round_trips(&t, TableFormat::Msgpack);
        }
        Err(e) => check_table_error(&e, data.len()),
    }
    #[cfg(not(feature = "msgpack"))]
    let _ = data;
}

/// Columnar Protobuf, also compared with prost's decoding of the same `Table` message (as Go's
/// fuzzer compares with `proto.Unmarshal`): a body prost rejects must fail as `malformed` or
/// `truncated`, and a body we accept must be one prost reads with the same name, rows and columns.
pub fn table_protobuf(data: &[u8]) {
    #[cfg(feature = "protobuf")]
    {
        use prost::Message;
        let official = crate::pb::Table::decode(data);
        match crate::decode_table_protobuf(Bytes::copy_from_slice(data)) {
            Ok(t) => {
                let msg = official.unwrap_or_else(|e| panic!("accepted a body prost rejects: {e}"));
                assert_eq!((&msg.name, msg.rows, msg.columns.len()), (&t.name, t.rows as u64, t.columns.len()));
                for (m, c) in msg.columns.iter().zip(&t.columns) {
                    assert_eq!((&m.name, m.r#type), (&c.name, c.ty.proto_value()), "prost reads another column");
                }
                for split in [false, true] {
                    let back = crate::decode_table_protobuf(crate::encode_table_protobuf(&t, split).into())
                        .unwrap_or_else(|e| panic!("Protobuf (split {split}): our encoding fails to decode: {e}"));
                    same_table("Protobuf re-encoded", &back, &t, false);
                }
                table_round_trips(&t, TableFormat::Protobuf);
            }
            Err(e) => {
                check_table_error(&e, data.len());
                if let Err(pe) = official {
                    assert!(
                        matches!(e.kind(), ErrorKind::Malformed | ErrorKind::Truncated),
                        "prost rejects the body ({pe}) but our error is {:?}: {e}",
                        e.kind()
                    );
                }
            }
        }
    }
    #[cfg(not(feature = "protobuf"))]
    let _ = data;
}

/// Arrow IPC stream tables. This crate has no table Arrow encoder: a decoded table must be valid
/// (every column `rows` values of its type, names unique) and survive every other encoder.
pub fn table_arrow(data: &[u8]) {
    #[cfg(feature = "arrow")]
    match crate::decode_table_arrow(Bytes::copy_from_slice(data)) {
        Ok(t) => table_round_trips(&t, TableFormat::Arrow),
        Err(e) => check_table_error(&e, data.len()),
    }
    #[cfg(not(feature = "arrow"))]
    let _ = data;
}

/// A fuzz target: its name (as in `fuzz/Cargo.toml`) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// PostgreSQL binary COPY (SPEC.md section 16): the first byte chooses the columns (vector type
/// `b % 4` of vector, halfvec, bit, sparsevec; id type `b / 4 % 5` of none, int8, int4, text, uuid),
/// the rest is the stream. Whatever decodes must encode (unless it holds what a writer refuses, as
/// NaN) to a stream that decodes to the same tensor and ids, and
/// every strict prefix of that stream is `truncated` at its length.
pub fn pgcopy(data: &[u8]) {
    use crate::{CopyColumns, PgIdType, PgVectorType, decode_pgcopy, encode_pgcopy};
    let Some((&b, stream)) = data.split_first() else { return };
    let mut cols = CopyColumns::new(PgVectorType::ALL[b as usize % 4], "embedding");
    if let Some(id) = [None, Some(PgIdType::Int8), Some(PgIdType::Int4), Some(PgIdType::Text), Some(PgIdType::Uuid)]
        [b as usize / 4 % 5]
    {
        cols = cols.with_id(id, "id");
    }
    let Ok(got) = decode_pgcopy(stream, &cols) else { return };
    cols.empty_dims = got.tensor.dims();
    let enc = match encode_pgcopy(&got.tensor, &cols, got.ids.as_ref()) {
        Ok(enc) => enc,
        // A reader carries what a writer refuses: NaN and infinities, more dimensions or non-zero
        // values than pgvector stores, an empty stream's d = 0.
        Err(e) if matches!(e.kind(), ErrorKind::NonFinite | ErrorKind::InvalidField) => return,
        Err(e) => panic!("a decoded COPY stream failed to encode: {e}"),
    };
    let back = decode_pgcopy(&enc, &cols).expect("our own COPY stream decodes");
    assert_eq!(back, got, "the COPY round trip changed the data");
    for cut in [0, 5, 19, enc.len() / 2, enc.len() - 1] {
        if cut < enc.len() {
            let e = decode_pgcopy(&enc[..cut], &cols).expect_err("a strict prefix of a stream");
            assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, Some(cut as u64)));
        }
    }
}

/// KServe v2 responses (SPEC.md section 19.3): the input is `VALUE\nBODY`, VALUE the
/// `Inference-Header-Content-Length` (absent when empty). A body that reads must have its binary
/// tensors and BYTES elements inside the body, tensors of the size their shape gives, and read the
/// same again; an error's offset is within the body.
pub fn kserve(data: &[u8]) {
    use crate::{HEADER_INFERENCE_HEADER_CONTENT_LENGTH, KserveData, decode_kserve};
    let Some(nl) = data.iter().position(|&b| b == b'\n') else { return };
    let Ok(value) = std::str::from_utf8(&data[..nl]) else { return };
    let body = Bytes::copy_from_slice(&data[nl + 1..]);
    let headers: Vec<(&str, &str)> =
        if value.is_empty() { vec![] } else { vec![(HEADER_INFERENCE_HEADER_CONTENT_LENGTH, value)] };
    match decode_kserve(&headers[..], body.clone()) {
        Ok(r) => {
            let inside = |p: *const u8| body.as_ptr_range().contains(&p) || p == body.as_ptr_range().end;
            for o in &r.outputs {
                match &o.data {
                    KserveData::Tensor(t) => {
                        let want = crate::tensor::expected_len(t.dtype(), t.rows(), t.dims()).unwrap();
                        assert_eq!(t.as_bytes().len(), want, "{}: tensor size", o.name);
                        if o.binary && want > 0 {
                            assert!(inside(t.as_bytes().as_ptr()), "{}: a binary tensor outside the body", o.name);
                        }
                    }
                    KserveData::Bytes(e) => {
                        if o.binary {
                            assert!(e.iter().all(|x| x.is_empty() || inside(x.as_ptr())), "{}: elements", o.name);
                        }
                    }
                }
            }
            assert_eq!(decode_kserve(&headers[..], body.clone()).unwrap(), r, "a second read differs");
        }
        Err(e) => {
            if let Some(at) = e.offset() {
                assert!(at <= body.len() as u64, "error offset {at} past the {}-byte body: {e}", body.len());
            }
        }
    }
}

/// A ragged or sparse body (SPEC.md section 20): the first byte chooses the format (`b % 5` of
/// JSON, raw, MessagePack, Protobuf, Arrow; Protobuf reads the response message when `b / 5` is
/// odd); a raw body's headers come from the next 6 bytes (dtype `% 7`, `n`, `d` or `V` as a
/// little-endian u32). Whatever decodes must encode in the same format to a body that decodes to
/// the same tensor.
fn kind_target<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    kind: &str,
    decode: fn(Format, &[(&str, &str)], Bytes, bool) -> Result<crate::Batch<T>, Error>,
    encode: fn(&crate::Batch<T>, Format, JsonOptions) -> Result<crate::Encoded, Error>,
) {
    let Some((&b, rest)) = data.split_first() else { return };
    let format = [Format::Json, Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow][b as usize % 5];
    let response = (b / 5) % 2 == 1;
    let (headers, body): (Vec<(String, String)>, &[u8]) = if format == Format::Raw {
        if rest.len() < 6 {
            return;
        }
        let d = u32::from_le_bytes(rest[2..6].try_into().unwrap());
        let h = vec![
            ("Densewire-Kind".to_string(), kind.to_string()),
            ("Densewire-Dtype".to_string(), DType::ALL[rest[0] as usize % 7].name().to_string()),
            ("Densewire-Shape".to_string(), format!("{},{d}", rest[1])),
        ];
        (h, &rest[6..])
    } else {
        (Vec::new(), rest)
    };
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let Ok(got) = decode(format, &pairs, Bytes::copy_from_slice(body), response) else { return };
    let opts = JsonOptions { encoding_format: EncodingFormat::Base64, byteorder: ByteOrder::Little };
    let enc =
        encode(&got, format, opts).unwrap_or_else(|e| panic!("{format}: a decoded {kind} body failed to encode: {e}"));
    let pairs: Vec<(&str, &str)> = enc.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // The encoder writes the response message only when a model or usage is set (`has_envelope`, as
    // for tensors): a response read without either comes back as a bare tensor message.
    let back = decode(format, &pairs, enc.body, got.has_envelope() || format != Format::Protobuf)
        .unwrap_or_else(|e| panic!("{format}: our own {kind} encoding failed to decode: {e}"));
    assert_eq!(back.tensor, got.tensor, "{format}: the {kind} round trip changed the tensor");
}

/// Ragged bodies (SPEC.md 20.1), by [`kind_target`].
pub fn ragged(data: &[u8]) {
    kind_target(data, "ragged", |f, h, b, r| crate::RaggedEmbeddings::decode(f, h, b, r), |e, f, o| e.encode(f, o));
}

/// Sparse bodies (SPEC.md 20.2), by [`kind_target`].
pub fn sparse(data: &[u8]) {
    kind_target(data, "sparse", |f, h, b, r| crate::SparseEmbeddings::decode(f, h, b, r), |e, f, o| e.encode(f, o));
}

/// Every target by name, for the corpus runner.
pub const TARGETS: [Target; 17] = [
    ("base64", base64),
    ("raw", raw),
    ("json", json),
    ("request", request),
    ("negotiate", negotiate),
    ("msgpack", msgpack),
    ("protobuf", protobuf),
    ("arrow", arrow),
    ("table_json", table_json),
    ("table_csv", table_csv),
    ("table_msgpack", table_msgpack),
    ("table_protobuf", table_protobuf),
    ("table_arrow", table_arrow),
    ("pgcopy", pgcopy),
    ("kserve", kserve),
    ("ragged", ragged),
    ("sparse", sparse),
];

#[allow(dead_code)]
fn _assert_tensor_is_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Tensor>();
}
