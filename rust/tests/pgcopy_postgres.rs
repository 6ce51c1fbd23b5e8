//! The binary COPY codecs against a real PostgreSQL with pgvector, through tokio-postgres (the driver
//! Rust users have): 1,000 x 384 vectors written with `copy_in` from `pgcopy_chunks` into `vector(384)`
//! and `halfvec(384)` columns, read back with `COPY ... TO STDOUT (FORMAT BINARY)` through
//! `decode_pgcopy`, equal bit for bit (halfvec: after float16 rounding), and checked value by value
//! through PostgreSQL's own text of the vectors; `bit` and `sparsevec` columns with text, uuid and
//! NULL ids; a chunk that fails its checks aborts the COPY and leaves no row.
//!
//! The server is named by `DENSEWIRE_PG_URL` (scripts/test.sh starts one with scripts/postgres.sh).
//! Without it these tests fail when `CI=true` and otherwise print why they check nothing.

use densewire::{
    CopyColumns, DType, ErrorKind, PgIdType, PgIds, PgVectorType, Tensor, decode_pgcopy, encode_pgcopy, pgcopy_chunks,
};
use futures_util::{SinkExt, StreamExt};
use std::pin::pin;
use tokio_postgres::{Client, NoTls};

const N: usize = 1000;
const D: usize = 384;

/// A client on `DENSEWIRE_PG_URL`, or `None` (with the reason printed) when it is not set outside CI.
async fn connect(test: &str) -> Option<Client> {
    let url = match std::env::var("DENSEWIRE_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "{test}: DENSEWIRE_PG_URL is not set and CI=true: scripts/test.sh starts PostgreSQL with pgvector"
                );
            }
            eprintln!(
                "{test}: SKIPPED, DENSEWIRE_PG_URL is not set (start one: url=$(bash scripts/postgres.sh start /tmp/pg))"
            );
            return None;
        }
    };
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("connection: {e}");
        }
    });
    client.batch_execute("CREATE EXTENSION IF NOT EXISTS vector").await.unwrap();
    Some(client)
}

/// Deterministic float32 values in (-1, 1), with the bit patterns that a careless codec loses:
/// signed zeros, subnormals, the smallest normal, values that round in float16.
fn vectors() -> Tensor {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut v: Vec<f32> = (0..N * D)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let specials =
        [-0.0f32, 0.0, f32::from_bits(1), -f32::from_bits(0x007F_FFFF), f32::MIN_POSITIVE, 1.0004883, 65504.0];
    for (i, x) in specials.iter().enumerate() {
        v[i * (D + 1)] = *x;
    }
    Tensor::from_vec(N, D, v).unwrap()
}

/// Writes `tensor` (and ids) into `table` by binary COPY in chunks of 128 rows; the row count.
async fn copy_in(client: &Client, table: &str, cols: &CopyColumns, t: &Tensor, ids: Option<&PgIds>) -> u64 {
    let sql = format!("COPY {table} ({}) FROM STDIN (FORMAT BINARY)", cols.column_list());
    let mut sink = pin!(client.copy_in::<_, densewire::Bytes>(sql.as_str()).await.unwrap());
    for chunk in pgcopy_chunks(t, cols, ids, 128) {
        sink.send(chunk.unwrap()).await.unwrap();
    }
    sink.as_mut().finish().await.unwrap()
}

/// The whole stream of `COPY (query) TO STDOUT (FORMAT BINARY)`.
async fn copy_out(client: &Client, query: &str) -> Vec<u8> {
    let sql = format!("COPY ({query}) TO STDOUT (FORMAT BINARY)");
    let mut stream = pin!(client.copy_out(sql.as_str()).await.unwrap());
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

#[tokio::test]
async fn vector_and_halfvec_columns_round_trip_bit_for_bit() {
    let Some(client) = connect("vector_and_halfvec_columns_round_trip_bit_for_bit").await else { return };
    let t = vectors();
    let ids = PgIds::from((0..N as i64).map(|i| i * 7 - 3000).collect::<Vec<i64>>());
    for (pg_type, table) in [(PgVectorType::Vector, "dw_rust_vec"), (PgVectorType::Halfvec, "dw_rust_half")] {
        client
            .batch_execute(&format!("CREATE TEMP TABLE {table} (id int8 PRIMARY KEY, embedding {pg_type}({D}))"))
            .await
            .unwrap();
        let cols = CopyColumns::new(pg_type, "embedding").with_id(PgIdType::Int8, "id").with_empty_dims(D);
        assert_eq!(copy_in(&client, table, &cols, &t, Some(&ids)).await, N as u64, "{pg_type}");

        let stream = copy_out(&client, &format!("SELECT id, embedding FROM {table} ORDER BY id")).await;
        let back = decode_pgcopy(&stream, &cols).unwrap();
        let want = if pg_type == PgVectorType::Vector { t.clone() } else { t.convert(DType::Float16).unwrap() };
        assert_eq!(back.tensor.dtype(), want.dtype(), "{pg_type}");
        assert_eq!(back.tensor.shape(), (N, D), "{pg_type}");
        assert!(back.tensor.as_bytes() == want.as_bytes(), "{pg_type}: the vectors read back differ");
        assert_eq!(back.ids.as_ref(), Some(&ids), "{pg_type}");
        // What we wrote is also what we mean in one whole stream, and what PostgreSQL sends is what
        // we write: the same bytes both ways.
        assert_eq!(stream, encode_pgcopy(&want, &cols, Some(&ids)).unwrap(), "{pg_type}");

        // PostgreSQL's own reading of the values: its float4 array of row 0, which holds the specials.
        let row = client
            .query_one(format!("SELECT embedding::vector::real[] FROM {table} WHERE id = $1").as_str(), &[&-3000i64])
            .await
            .unwrap();
        let pg: Vec<f32> = row.get(0);
        let ours = want.to_f32_vec().unwrap();
        assert_eq!(pg.len(), D);
        for (j, (a, b)) in pg.iter().zip(&ours[..D]).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{pg_type}[0][{j}]: PostgreSQL has {a}, we wrote {b}");
        }
    }
}

#[tokio::test]
async fn bit_and_sparsevec_columns_with_text_uuid_and_null_ids() {
    let Some(client) = connect("bit_and_sparsevec_columns_with_text_uuid_and_null_ids").await else { return };
    client
        .batch_execute(
            "CREATE TEMP TABLE dw_rust_bits (id uuid, b bit(12)); CREATE TEMP TABLE dw_rust_sparse (doc text, s sparsevec(5))",
        )
        .await
        .unwrap();
    // Two rows of the same 12 values: one with a uuid id, one with a NULL id.
    let v = [1.0f32, -1.0, 0.0, -0.0, 0.5, 2.0, 0.0, 0.0, 1e-45, 0.0, 3.0, -2.0];
    let bits = Tensor::from_slice(1, 12, &v).unwrap();
    let cols = CopyColumns::new(PgVectorType::Bit, "b").with_id(PgIdType::Uuid, "id");
    let uuid = *b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff";
    assert_eq!(copy_in(&client, "dw_rust_bits", &cols, &bits, Some(&PgIds::Uuid(vec![Some(uuid)]))).await, 1);
    assert_eq!(copy_in(&client, "dw_rust_bits", &cols, &bits, Some(&PgIds::Uuid(vec![None]))).await, 1);
    let row = client.query_one("SELECT b::text, (SELECT id::text FROM dw_rust_bits WHERE id IS NOT NULL) FROM dw_rust_bits WHERE id IS NULL", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "100011001010");
    assert_eq!(row.get::<_, String>(1), "00112233-4455-6677-8899-aabbccddeeff");
    let back = decode_pgcopy(&copy_out(&client, "SELECT id, b FROM dw_rust_bits ORDER BY id NULLS LAST").await, &cols)
        .unwrap();
    let packed = bits.convert(DType::Binary).unwrap();
    assert_eq!(
        back.tensor,
        Tensor::new(DType::Binary, 2, 12, [packed.as_bytes(), packed.as_bytes()].concat()).unwrap()
    );
    assert_eq!(packed.as_bytes(), &[0x8c, 0xa0]);
    assert_eq!(back.ids, Some(PgIds::Uuid(vec![Some(uuid), None])));

    let sparse =
        Tensor::from_slice(3, 5, &[0.0f32, 1.5, 0.0, -0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e-45, 0.0, 0.0, 0.0, 7.0])
            .unwrap();
    let cols = CopyColumns::new(PgVectorType::Sparsevec, "s").with_id(PgIdType::Text, "doc");
    let docs = PgIds::Text(vec![Some("a".into()), None, Some("ünïcödé ✓".into())]);
    assert_eq!(copy_in(&client, "dw_rust_sparse", &cols, &sparse, Some(&docs)).await, 3);
    let text: Vec<String> = client
        .query("SELECT s::text FROM dw_rust_sparse ORDER BY doc NULLS FIRST", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(text, ["{}/5", "{2:1.5,5:-2}/5", "{1:1e-45,5:7}/5"]);
    let back =
        decode_pgcopy(&copy_out(&client, "SELECT doc, s FROM dw_rust_sparse ORDER BY doc NULLS FIRST").await, &cols)
            .unwrap();
    let want =
        Tensor::from_slice(3, 5, &[0.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 0.0, 0.0, -2.0, 1e-45, 0.0, 0.0, 0.0, 7.0])
            .unwrap();
    assert_eq!(back.tensor, want);
    assert_eq!(back.ids, Some(PgIds::Text(vec![None, Some("a".into()), Some("ünïcödé ✓".into())])));
}

#[tokio::test]
async fn a_chunk_that_fails_its_checks_aborts_the_copy() {
    let Some(client) = connect("a_chunk_that_fails_its_checks_aborts_the_copy").await else { return };
    client.batch_execute(&format!("CREATE TEMP TABLE dw_rust_abort (id int8, embedding vector({D}))")).await.unwrap();
    let mut v = vectors().to_f32_vec().unwrap();
    v[700 * D + 5] = f32::NAN; // in the sixth chunk of 128 rows: five chunks were sent before it
    let t = Tensor::from_vec(N, D, v).unwrap();
    let ids = PgIds::from((0..N as i64).collect::<Vec<_>>());
    let cols = CopyColumns::new(PgVectorType::Vector, "embedding").with_id(PgIdType::Int8, "id");
    {
        let sql = format!("COPY dw_rust_abort ({}) FROM STDIN (FORMAT BINARY)", cols.column_list());
        let mut sink = pin!(client.copy_in::<_, densewire::Bytes>(sql.as_str()).await.unwrap());
        let mut sent = 0;
        let mut failure = None;
        for chunk in pgcopy_chunks(&t, &cols, Some(&ids), 128) {
            match chunk {
                Ok(b) => {
                    sink.send(b).await.unwrap();
                    sent += 1;
                }
                Err(e) => failure = Some(e),
            }
        }
        let e = failure.expect("the NaN fails its chunk");
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::NonFinite, Some("embedding[700][5]")));
        assert_eq!(sent, 1 + 5, "the header and the five chunks before the bad one");
        // the sink is dropped without finish: tokio-postgres aborts the COPY
    }
    let count: i64 = client.query_one("SELECT count(*) FROM dw_rust_abort", &[]).await.unwrap().get(0);
    assert_eq!(count, 0, "an aborted COPY keeps no row");
}
