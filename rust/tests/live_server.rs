//! The client against a real `densewire serve` (the Python server), when `DENSEWIRE_SERVER_URL`
//! names one (scripts/test.sh starts one for every language's client tests). Without it this test
//! says so on stderr and checks nothing; rust/ci.sh prints whether it was set.

use densewire::{
    Client, DType, EmbeddingsRequest, EncodingFormat, ErrorKind, Format, SparseOptions, TruncationDirection,
};

#[tokio::test]
async fn client_against_densewire_serve() {
    let Ok(url) = std::env::var("DENSEWIRE_SERVER_URL") else {
        eprintln!("DENSEWIRE_SERVER_URL is not set: no live server to test against");
        return;
    };
    let texts = ["hello world", "a second, longer text about moving embeddings"];
    let mut reference = None;
    for format in Format::ALL {
        for encoding_format in [EncodingFormat::Float, EncodingFormat::Base64] {
            let client = Client::builder(&url).format(format).build().unwrap();
            let req = EmbeddingsRequest::new(texts).encoding_format(encoding_format);
            let e = client.embed(&req).await.unwrap_or_else(|e| panic!("{format}: {e}"));
            assert_eq!(e.tensor.dtype(), DType::Float32, "{format}");
            assert_eq!(e.tensor.rows(), 2, "{format}");
            assert!(e.model.is_some(), "{format}: the model id travels with every format");
            let v = e.tensor.to_f32_vec().unwrap();
            let d = e.tensor.dims();
            let norm: f32 = v[..d].iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "{format}: rows are L2-normalised, got {norm}");
            // Every format and encoding carries the same bits.
            match &reference {
                None => reference = Some(e.tensor.clone()),
                Some(r) => assert_eq!(&e.tensor, r, "{format} {encoding_format:?} differs from JSON"),
            }
        }
    }
    let reference = reference.unwrap();
    let client = Client::builder(&url).format(Format::Raw).batch_size(3).concurrency(2).build().unwrap();
    // dtype conversions happen on the server, per SPEC.md section 3.
    for dtype in [DType::Float16, DType::BFloat16, DType::Binary] {
        let e = client.embed(&EmbeddingsRequest::new(texts).dtype(dtype)).await.unwrap();
        assert_eq!(e.tensor, reference.convert(dtype).unwrap(), "{dtype}");
    }
    // Batches over the stream, reassembled in order.
    let many: Vec<String> = (0..10).map(|i| if i % 2 == 0 { texts[0].into() } else { texts[1].into() }).collect();
    let all = client.embed_all(many, &EmbeddingsRequest::new(Vec::<String>::new())).await.unwrap();
    assert_eq!(all.tensor.shape(), (10, reference.dims()));
    for i in 0..10 {
        assert_eq!(all.tensor.row(i), reference.row(i % 2));
    }
    // Errors come back typed, with the field.
    let e = client.embed(&EmbeddingsRequest::new([""])).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("input[0]")));
    let e = client.embed(&EmbeddingsRequest::new(texts).dimensions(0)).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("dimensions")));
    let e = client.embed(&EmbeddingsRequest::new(texts).model("no-such-model")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    eprintln!("live server {url}: every format agreed on {} x {}", reference.rows(), reference.dims());
}

/// The tables client against `densewire serve`'s demo tables (SPEC.md section 15.9): every format
/// decodes to the same columns, bit for bit; ETag revalidation answers 304; an unknown table is
/// `not_found`.
#[tokio::test]
async fn tables_against_densewire_serve() {
    use densewire::{ColumnData, ColumnType, TableFetch, TableFormat, TableOptions, TablesClient};
    let Ok(url) = std::env::var("DENSEWIRE_SERVER_URL") else {
        eprintln!("DENSEWIRE_SERVER_URL is not set: no live server to test the tables client against");
        return;
    };
    let client = TablesClient::new(&url).unwrap();
    let list = client.list_tables().await.unwrap();
    let info = list.iter().find(|t| t.name == "points").expect("the demo table points is listed");
    assert_eq!(
        info.columns.iter().map(|c| (c.name.as_str(), c.ty)).collect::<Vec<_>>(),
        [
            ("uuid", ColumnType::Uuid),
            ("status", ColumnType::Int32),
            ("longitude", ColumnType::Float64),
            ("latitude", ColumnType::Float64)
        ]
    );
    for name in ["points", "points_f32"] {
        let rows = list.iter().find(|t| t.name == name).unwrap().rows;
        // Default negotiation: Protobuf (byte-stream-split, compressed when the build can inflate it).
        let TableFetch::Table { table: reference, format, etag, .. } =
            client.table(name, &TableOptions::default()).await.unwrap()
        else {
            panic!("{name}: a 304 without If-None-Match")
        };
        assert_eq!(format, TableFormat::Protobuf, "{name}");
        assert_eq!((reference.name.as_str(), reference.rows), (name, rows));
        for format in TableFormat::ALL {
            let opts = TableOptions { format: Some(format), ..Default::default() };
            let got = client.table(name, &opts).await.unwrap_or_else(|e| panic!("{name} {format}: {e}"));
            let TableFetch::Table { table, format: chosen, .. } = got else { panic!("{name} {format}: a 304") };
            assert_eq!(chosen, format);
            assert_eq!(table, reference, "{name}: {format} differs from Protobuf");
        }
        let lon = &reference.column("longitude").unwrap().data;
        match (name, lon) {
            ("points", ColumnData::Float64(v)) => {
                assert!(v.as_slice().iter().all(|x| (-180.0..=180.0).contains(x)), "longitudes are in range")
            }
            ("points_f32", ColumnData::Float32(v)) => {
                assert!(v.as_slice().iter().all(|x| (-180.0..=180.0).contains(x)), "longitudes are in range")
            }
            _ => panic!("{name}: longitude is {lon:?}"),
        }
        let revalidate = TableOptions { if_none_match: etag.clone(), ..Default::default() };
        assert!(
            matches!(client.table(name, &revalidate).await.unwrap(), TableFetch::NotModified { .. }),
            "{name}: If-None-Match {etag:?} should answer 304"
        );
    }
    let e = client.table("no_such_table", &TableOptions::default()).await.unwrap_err();
    assert_eq!(e.kind(), densewire::ErrorKind::NotFound);
    eprintln!(
        "live server {url}: tables {:?} agreed in every format",
        list.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
}

/// Quantized answers of `densewire serve` (SPEC.md section 17): int8 and uint8 in every format carry
/// the quantization id of the model's published ranges; the client fetches them from
/// `GET /v1/quantization/{id}` and dequantizes to within a step of the float32 answer; quantizing the
/// float32 answer here gives the server's codes exactly.
#[tokio::test]
async fn quantized_answers_of_densewire_serve() {
    let Ok(url) = std::env::var("DENSEWIRE_SERVER_URL") else {
        eprintln!("DENSEWIRE_SERVER_URL is not set: no live server to test quantized answers against");
        return;
    };
    let texts = ["hello world", "a second, longer text about moving embeddings"];
    let float = Client::builder(&url).build().unwrap().embed(&EmbeddingsRequest::new(texts)).await.unwrap();
    assert_eq!(float.quantization, None, "float32 answers name no quantization");
    let mut id = None;
    for format in Format::ALL {
        let client = Client::builder(&url).format(format).build().unwrap();
        for dtype in [DType::Int8, DType::Uint8] {
            let req = EmbeddingsRequest::new(texts).dtype(dtype).encoding_format(EncodingFormat::Base64);
            let codes = client.embed(&req).await.unwrap_or_else(|e| panic!("{format} {dtype}: {e}"));
            assert_eq!(codes.tensor.dtype(), dtype, "{format}");
            let qid = codes.quantization.clone().unwrap_or_else(|| panic!("{format} {dtype}: no quantization id"));
            assert_eq!(id.get_or_insert_with(|| qid.clone()), &qid, "{format} {dtype}: one id for the model");
            let q = client.quantization(&qid).await.unwrap();
            assert_eq!(q.ranges.quantize(&float.tensor, dtype).unwrap(), codes.tensor, "{format} {dtype}: the rule");
            let e = client.embed_dequantized(&req).await.unwrap();
            assert_eq!(e.tensor, q.ranges.dequantize(&codes.tensor).unwrap());
            let (x, y) = (float.tensor.to_f32_vec().unwrap(), e.tensor.to_f32_vec().unwrap());
            let d = float.tensor.dims();
            for (k, (a, b)) in x.iter().zip(&y).enumerate() {
                let j = k % d;
                let step = (q.ranges.upper()[j] - q.ranges.lower()[j]) / 255.0;
                let inside = a >= &q.ranges.lower()[j] && a <= &q.ranges.upper()[j];
                assert!(!inside || (a - b).abs() <= step * 0.5 + 1e-6, "{format} {dtype}[{k}]: {a} -> {b}");
            }
        }
    }
    eprintln!("live server {url}: int8/uint8 answers in every format named quantization {}", id.unwrap());
}

/// Per-token embeddings (TEI's `POST /embed_all`, SPEC.md 6.4) from the server that runs the built-in
/// model, `DENSEWIRE_OVERLOAD_URL` (scripts/test.sh starts it; the hash server has no token states):
/// every binary format gives the same ragged tensor bit for bit, TEI's JSON the same numbers, one
/// matrix per text over one buffer; without the variable this test says so and checks nothing.
#[tokio::test]
async fn embed_tokens_against_densewire_serve() {
    let Ok(url) = std::env::var("DENSEWIRE_OVERLOAD_URL") else {
        eprintln!("DENSEWIRE_OVERLOAD_URL is not set: no live model server to ask for token embeddings");
        return;
    };
    let texts = ["hello world", "a second, longer text about token states"];
    let mut reference: Option<densewire::RaggedTensor> = None;
    for format in [Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow, Format::Json] {
        let client = Client::builder(&url).format(format).build().unwrap();
        let got = client.embed_tokens(&texts, None).await.unwrap_or_else(|e| panic!("{format}: {e}"));
        let t = got.tensor;
        assert_eq!((t.len(), t.dtype()), (2, DType::Float32), "{format}");
        assert!(t.matrix(0).rows() >= 4, "{format}: [CLS] hello world [SEP] is at least 4 tokens");
        assert!(t.matrix(1).rows() > t.matrix(0).rows(), "{format}: the longer text has more tokens");
        match &reference {
            None => reference = Some(t),
            Some(r) if format == Format::Json => {
                assert_eq!(t.offsets(), r.offsets(), "TEI's JSON: the same token counts");
                let (a, b) = (t.rows().to_f32_vec().unwrap(), r.rows().to_f32_vec().unwrap());
                let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
                assert!(worst <= 1e-6, "TEI's JSON differs from the binary formats by {worst}");
            }
            Some(r) => assert_eq!(&t, r, "{format} differs from raw"),
        }
    }
    let r = reference.unwrap();
    eprintln!("live model server {url}: token embeddings {:?} x {} agreed in every format", r.offsets(), r.dims());
}

/// Sparse vectors (TEI's `POST /embed_sparse`, SPEC.md 20) from the hash-model server of
/// `DENSEWIRE_SERVER_URL`: every binary format gives the same sparse tensor bit for bit, TEI's JSON
/// the same indices and values (its vocabulary one past the largest index, or `vocab_size`); a text
/// over the model's limit with `truncate: false` is the server's 413; `max_active_dims` keeps the full
/// vector's k largest weights; `truncation_direction` keeps the first or last words; `prompt_name` on
/// a model without prompts is the server's 422 naming the field. Without the variable this test says
/// so (and fails when CI=true).
#[tokio::test]
async fn embed_sparse_against_densewire_serve() {
    let Ok(url) = std::env::var("DENSEWIRE_SERVER_URL") else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "DENSEWIRE_SERVER_URL is not set, and CI=true");
        eprintln!("DENSEWIRE_SERVER_URL is not set: no live server to ask for sparse vectors");
        return;
    };
    let texts = ["a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"];
    let client = |format| Client::builder(&url).format(format).build().unwrap();
    let none = SparseOptions::default();
    let tei = client(Format::Json).embed_sparse(&texts, &none).await.unwrap().tensor;
    assert_eq!((tei.len(), tei.dtype()), (3, DType::Float32));
    assert!((0..3).all(|i| !tei.range(i).is_empty()), "every text has non-zero weights");
    let mut reference: Option<densewire::SparseTensor> = None;
    for format in [Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow] {
        let t = client(format).embed_sparse(&texts, &none).await.unwrap_or_else(|e| panic!("{format}: {e}")).tensor;
        assert_eq!(t.offsets(), tei.offsets(), "{format}: TEI's JSON offsets");
        assert_eq!(t.indices(), tei.indices(), "{format}: TEI's JSON indices");
        assert_eq!(
            t.values().to_f32_vec().unwrap(),
            tei.values().to_f32_vec().unwrap(),
            "{format}: TEI's JSON values, exactly"
        );
        assert!(t.vocabulary_size() >= tei.vocabulary_size(), "{format}: the vocabulary holds TEI's largest index");
        match &reference {
            None => reference = Some(t),
            Some(r) => assert_eq!(&t, r, "{format} differs from raw"),
        }
    }
    // the hash:D rule (python/src/densewire/_backends/hash.py): blake2b of each word, index x % 30522,
    // weight ((x >> 40) + 1) / 2^24, the largest per index
    let hello = client(Format::Raw).embed_sparse(&["hello world hello"], &none).await.unwrap().tensor;
    assert_eq!((hello.vocabulary_size(), &*hello.indices()), (30522, &[26240u32, 26746][..]));
    assert_eq!(hello.values().to_f32_vec().unwrap(), vec![0.827504f32, 0.3063963]);
    let long = "word ".repeat(9000);
    let refuse = SparseOptions { truncate: Some(false), ..Default::default() };
    let e = client(Format::Raw).embed_sparse(&[long.as_str()], &refuse).await.unwrap_err();
    assert_eq!(e.http_status(), 413, "{e}");
    assert!(e.message().contains("tokens"), "{e}");
    let cut = SparseOptions { truncate: Some(true), ..Default::default() };
    assert_eq!(client(Format::Raw).embed_sparse(&[long.as_str(), "short"], &cut).await.unwrap().tensor.len(), 2);

    // max_active_dims: the server's top-k, each vector's k largest weights (ascending indices)
    for format in [Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow, Format::Json] {
        let all = client(format).embed_sparse(&texts, &none).await.unwrap().tensor;
        for k in [1u32, 3] {
            let options = SparseOptions { max_active_dims: Some(k), ..Default::default() };
            let top = client(format).embed_sparse(&texts, &options).await.unwrap().tensor;
            let values = top.values().to_f32_vec().unwrap();
            let all_values = all.values().to_f32_vec().unwrap();
            for i in 0..texts.len() {
                let r = all.range(i);
                let mut entries: Vec<(u32, f32)> = r.clone().map(|j| (all.indices()[j], all_values[j])).collect();
                entries.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                entries.truncate(k as usize);
                entries.sort_by_key(|e| e.0);
                let got: Vec<(u32, f32)> = top.range(i).map(|j| (top.indices()[j], values[j])).collect();
                assert_eq!(got, entries, "{format}: max_active_dims {k}, text {i}: the {k} largest of the full vector");
            }
        }
    }

    // truncation_direction: a text over the limit (8192 words) keeps its first words (Right, the
    // default) or its last (Left): the vector of its first or last words alone
    let framed = format!("first {}last", "word ".repeat(9000));
    let cut_at = |d| SparseOptions { truncate: Some(true), truncation_direction: d, ..Default::default() };
    let embed = |texts: Vec<String>, options: SparseOptions| {
        let c = client(Format::Raw);
        async move { c.embed_sparse(&texts, &options).await.unwrap().tensor }
    };
    let right = embed(vec![framed.clone()], cut_at(Some(TruncationDirection::Right))).await;
    let default = embed(vec![framed.clone()], cut_at(None)).await;
    let left = embed(vec![framed.clone()], cut_at(Some(TruncationDirection::Left))).await;
    let head = embed(vec!["first word".into()], none.clone()).await;
    let tail = embed(vec!["word last".into()], none.clone()).await;
    assert_eq!(right, head, "Right keeps the first words");
    assert_eq!(default, head, "no truncation_direction: Right");
    assert_eq!(left, tail, "Left keeps the last words");
    assert_ne!(left, right);

    // prompt_name: the hash model defines no prompts, so the server refuses it: its 422 as the
    // library's error, naming the field
    let prompt = SparseOptions { prompt_name: Some("query".into()), ..Default::default() };
    let e = client(Format::Raw).embed_sparse(&["hi"], &prompt).await.unwrap_err();
    assert_eq!((e.http_status(), e.kind(), e.field_name()), (422, ErrorKind::InvalidField, Some("prompt_name")), "{e}");
    assert!(e.message().contains("query"), "{e}");

    // vocab_size: given to TEI's JSON answer (which states none), the binary answers' own size
    let vocab = reference.as_ref().unwrap().vocabulary_size();
    let sized = SparseOptions { vocab_size: Some(vocab), ..Default::default() };
    let json = client(Format::Json).embed_sparse(&texts, &sized).await.unwrap().tensor;
    assert_eq!(&json, reference.as_ref().unwrap(), "TEI's JSON with vocab_size {vocab}: the raw answer exactly");
    let small = SparseOptions { vocab_size: Some(2), ..Default::default() };
    let e = client(Format::Json).embed_sparse(&texts, &small).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("vocab_size")), "{e}");
    // a zero is refused before any request
    let zero = SparseOptions { max_active_dims: Some(0), ..Default::default() };
    let e = client(Format::Raw).embed_sparse(&["hi"], &zero).await.unwrap_err();
    assert_eq!((e.kind(), e.field_name()), (ErrorKind::InvalidField, Some("max_active_dims")), "{e}");
}
