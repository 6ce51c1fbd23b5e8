//! HTTP compression (SPEC.md section 12): `Accept-Encoding` negotiation for responses (zstd, br,
//! gzip, q-values honoured, that preference at equal q), and bounded decompression of request
//! bodies (gzip, zstd), checked while inflating so that no bomb is ever inflated in full.
//! Compressing and decompressing need the `compression` feature; negotiation does not.

#[cfg(feature = "compression")]
use crate::error::{Error, ErrorKind, Result, err};

/// Responses smaller than this (bytes) are sent uncompressed.
pub const COMPRESSION_THRESHOLD: usize = 1024;

/// A `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ContentEncoding {
    /// No compression.
    #[default]
    Identity,
    /// Zstandard.
    Zstd,
    /// Brotli.
    Br,
    /// gzip.
    Gzip,
}

impl ContentEncoding {
    /// The token used in `Accept-Encoding` and `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            ContentEncoding::Identity => "identity",
            ContentEncoding::Zstd => "zstd",
            ContentEncoding::Br => "br",
            ContentEncoding::Gzip => "gzip",
        }
    }

    /// The encoding of a `Content-Encoding` value; `None` for anything unknown.
    pub fn from_name(name: &str) -> Option<ContentEncoding> {
        let name = name.trim();
        [ContentEncoding::Identity, ContentEncoding::Zstd, ContentEncoding::Br, ContentEncoding::Gzip]
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
    }

    /// The response encodings this build can produce, in the server's order of preference.
    pub fn offered() -> &'static [ContentEncoding] {
        if cfg!(feature = "compression") {
            &[ContentEncoding::Zstd, ContentEncoding::Br, ContentEncoding::Gzip]
        } else {
            &[]
        }
    }
}

/// Chooses the response encoding from `Accept-Encoding`: the highest q-value among `offered`, ties
/// in the order of `offered`; `*` covers the encodings not named; `identity` when nothing else is
/// acceptable (or no header).
///
/// ```
/// use densewire::{negotiate_encoding, ContentEncoding::*};
/// let offered = [Zstd, Br, Gzip];
/// assert_eq!(negotiate_encoding(Some("gzip, br"), &offered), Br);
/// assert_eq!(negotiate_encoding(Some("gzip;q=1, zstd;q=0.5"), &offered), Gzip);
/// assert_eq!(negotiate_encoding(Some("*;q=0.1, zstd;q=0"), &offered), Br);
/// assert_eq!(negotiate_encoding(None, &offered), Identity);
/// ```
pub fn negotiate_encoding(accept_encoding: Option<&str>, offered: &[ContentEncoding]) -> ContentEncoding {
    let Some(header) = accept_encoding else { return ContentEncoding::Identity };
    let mut named: Vec<(&str, u16)> = Vec::new();
    for part in header.split(',') {
        let mut it = part.split(';');
        let token = it.next().unwrap_or("").trim();
        if token.is_empty() {
            continue;
        }
        let mut q = 1000u16;
        for p in it {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q = crate::media::parse_qvalue(v.trim()).unwrap_or(0);
                }
            }
        }
        named.push((token, q));
    }
    let star = named.iter().find(|(t, _)| *t == "*").map(|(_, q)| *q);
    let mut best = (ContentEncoding::Identity, 0u16);
    for &enc in offered {
        let q = named.iter().find(|(t, _)| t.eq_ignore_ascii_case(enc.name())).map(|(_, q)| *q).or(star).unwrap_or(0);
        if q > best.1 {
            best = (enc, q);
        }
    }
    best.0
}

/// Compresses a response body (fast settings: float data barely compresses, so speed matters).
#[cfg(feature = "compression")]
pub fn compress(encoding: ContentEncoding, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match encoding {
        ContentEncoding::Identity => data.to_vec(),
        ContentEncoding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 2), flate2::Compression::fast());
            e.write_all(data).expect("writing to a Vec");
            e.finish().expect("writing to a Vec")
        }
        ContentEncoding::Zstd => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
        ContentEncoding::Br => {
            let mut out = Vec::with_capacity(data.len() / 2);
            {
                let mut w = brotli::CompressorWriter::new(&mut out, 64 << 10, 1, 22);
                w.write_all(data).expect("writing to a Vec");
            }
            out
        }
    }
}

#[cfg(feature = "compression")]
fn too_large(limit: usize) -> Error {
    err(ErrorKind::PayloadTooLarge, format!("the decompressed request body is over the limit of {limit} bytes"))
}

/// Decompresses a request body of `Content-Encoding` `encoding` (gzip or zstd), failing with
/// `payload_too_large` as soon as the output passes `limit` bytes, `malformed` on a corrupt
/// stream, and `unsupported_media_type` for any other encoding.
#[cfg(feature = "compression")]
pub fn decompress_bounded(encoding: ContentEncoding, data: &[u8], limit: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let corrupt =
        |e: &dyn std::fmt::Display| err(ErrorKind::Malformed, format!("the {} body is corrupt: {e}", encoding.name()));
    let mut out = Vec::with_capacity((data.len() * 4).min(limit));
    let read = match encoding {
        ContentEncoding::Identity => return Ok(data.to_vec()),
        ContentEncoding::Gzip => flate2::read::MultiGzDecoder::new(data).take(limit as u64 + 1).read_to_end(&mut out),
        ContentEncoding::Zstd => {
            let dec = ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| corrupt(&e))?;
            dec.take(limit as u64 + 1).read_to_end(&mut out)
        }
        ContentEncoding::Br => {
            return Err(err(ErrorKind::UnsupportedMediaType, "request bodies may be gzip or zstd, not br")
                .field("Content-Encoding"));
        }
    };
    read.map_err(|e| corrupt(&e))?;
    if out.len() > limit {
        return Err(too_large(limit));
    }
    Ok(out)
}

#[cfg(all(test, feature = "compression"))]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bombs() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        for enc in [ContentEncoding::Gzip, ContentEncoding::Zstd] {
            let c = compress(enc, &data);
            assert!(c.len() < data.len(), "{enc:?}");
            assert_eq!(decompress_bounded(enc, &c, data.len()).unwrap(), data, "{enc:?}");
            let e = decompress_bounded(enc, &c, data.len() - 1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::PayloadTooLarge, "{enc:?}");
            assert_eq!(decompress_bounded(enc, b"not compressed", 100).unwrap_err().kind(), ErrorKind::Malformed);
        }
        // A 64 MiB bomb is refused after inflating at most limit + 1 bytes.
        let bomb = compress(ContentEncoding::Gzip, &vec![0u8; 64 << 20]);
        assert_eq!(
            decompress_bounded(ContentEncoding::Gzip, &bomb, 1 << 20).unwrap_err().kind(),
            ErrorKind::PayloadTooLarge
        );
        let br = compress(ContentEncoding::Br, &data);
        let mut out = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut out).unwrap();
        assert_eq!(out, data);
    }
}
