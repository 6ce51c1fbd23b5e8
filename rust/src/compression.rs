//! HTTP compression (SPEC.md section 12): `Accept-Encoding` negotiation for responses (zstd, br,
//! gzip, q-values honoured, that preference at equal q), and bounded decompression of request
//! bodies (gzip or its alias x-gzip, deflate, br, zstd), checked while inflating, a block at a
//! time, so that no bomb is ever inflated in full.
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
    /// gzip (`x-gzip` is read as an alias).
    Gzip,
    /// deflate: the zlib format (RFC 1950), or a bare RFC 1951 stream when decompressing. Accepted
    /// in request bodies, never chosen for responses.
    Deflate,
}

impl ContentEncoding {
    /// The token used in `Accept-Encoding` and `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            ContentEncoding::Identity => "identity",
            ContentEncoding::Zstd => "zstd",
            ContentEncoding::Br => "br",
            ContentEncoding::Gzip => "gzip",
            ContentEncoding::Deflate => "deflate",
        }
    }

    /// The encoding of a `Content-Encoding` value (`x-gzip` is gzip); `None` for anything unknown,
    /// and for a list of more than one coding.
    ///
    /// ```
    /// use densewire::ContentEncoding;
    /// assert_eq!(ContentEncoding::from_name(" X-Gzip "), Some(ContentEncoding::Gzip));
    /// assert_eq!(ContentEncoding::from_name("deflate"), Some(ContentEncoding::Deflate));
    /// assert_eq!(ContentEncoding::from_name("gzip, br"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ContentEncoding> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("x-gzip") {
            return Some(ContentEncoding::Gzip);
        }
        [
            ContentEncoding::Identity,
            ContentEncoding::Zstd,
            ContentEncoding::Br,
            ContentEncoding::Gzip,
            ContentEncoding::Deflate,
        ]
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

/// Compresses a body (fast settings: float data barely compresses, so speed matters); `Deflate` gives
/// the zlib format, for clients that send request bodies in it.
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
        ContentEncoding::Deflate => {
            let mut e =
                flate2::write::ZlibEncoder::new(Vec::with_capacity(data.len() / 2), flate2::Compression::fast());
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
    err(ErrorKind::PayloadTooLarge, format!("the decompressed body is over the limit of {limit} bytes"))
}

/// Decompressed output is produced (and counted) at most this many bytes at a time.
#[cfg(feature = "compression")]
const OUT_BLOCK: usize = 64 << 10;

/// The decompressed body, refused as soon as it would pass the limit.
#[cfg(feature = "compression")]
struct Sink {
    out: Vec<u8>,
    limit: usize,
}

#[cfg(feature = "compression")]
impl Sink {
    fn push(&mut self, block: &[u8]) -> Result<()> {
        if block.len() > self.limit - self.out.len() {
            return Err(too_large(self.limit));
        }
        self.out.extend_from_slice(block);
        Ok(())
    }
}

/// A corrupt, cut or overlong stream: 400 `malformed` on `Content-Encoding`.
#[cfg(feature = "compression")]
fn corrupt(encoding: ContentEncoding, e: impl std::fmt::Display) -> Error {
    err(ErrorKind::Malformed, format!("the body is not a valid {} stream: {e}", encoding.name()))
        .field("Content-Encoding")
}

/// Decompresses a body of `Content-Encoding` `encoding` (SPEC.md section 12): gzip (several members
/// allowed), deflate (the zlib format of RFC 1950, or a bare RFC 1951 stream, told apart by the zlib
/// header's two bytes), br and zstd (several frames allowed). Output is produced a block of 64 KiB
/// at a time and counted as it comes, so that a body over `limit` bytes fails with
/// `payload_too_large` having inflated at most `limit` bytes, whatever its compression ratio; a
/// corrupt or cut stream, or bytes after its end, is `malformed` on the field `Content-Encoding`.
///
/// ```
/// use densewire::{ContentEncoding, ErrorKind, compress, decompress_bounded};
/// let body = compress(ContentEncoding::Gzip, &[7u8; 10_000]);
/// assert_eq!(decompress_bounded(ContentEncoding::Gzip, &body, 10_000).unwrap(), vec![7u8; 10_000]);
/// let e = decompress_bounded(ContentEncoding::Gzip, &body, 9_999).unwrap_err();
/// assert_eq!(e.kind(), ErrorKind::PayloadTooLarge);
/// let e = decompress_bounded(ContentEncoding::Deflate, b"not deflate", 100).unwrap_err();
/// assert_eq!((e.kind(), e.field_name()), (ErrorKind::Malformed, Some("Content-Encoding")));
/// ```
#[cfg(feature = "compression")]
pub fn decompress_bounded(encoding: ContentEncoding, data: &[u8], limit: usize) -> Result<Vec<u8>> {
    if encoding == ContentEncoding::Identity {
        if data.len() > limit {
            return Err(too_large(limit));
        }
        return Ok(data.to_vec());
    }
    let mut sink = Sink { out: Vec::with_capacity(data.len().saturating_mul(4).min(limit)), limit };
    match encoding {
        ContentEncoding::Identity => unreachable!("returned above"),
        ContentEncoding::Gzip => gunzip(data, &mut sink)?,
        ContentEncoding::Deflate => {
            let zlib = data.len() >= 2 && is_zlib_header(data[0], data[1]);
            let used = inflate(data, zlib, &mut sink)?;
            if used != data.len() {
                return Err(corrupt(encoding, format!("{} bytes after the end of the stream", data.len() - used)));
            }
        }
        ContentEncoding::Br => unbrotli(data, &mut sink)?,
        ContentEncoding::Zstd => unzstd(data, &mut sink)?,
    }
    Ok(sink.out)
}

/// RFC 1950's two header bytes: the deflate method (8), a window of at most 32 KiB, and the check
/// bits (the pair, big-endian, a multiple of 31). A bare deflate stream's first block header does not
/// pass all three but in rare cases, which is how clients that send one are told apart.
#[cfg(feature = "compression")]
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0F == 8 && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

/// Inflates the deflate stream (zlib-wrapped or bare) at the start of `data` into `sink` a block at a
/// time; returns the bytes of `data` the stream took.
#[cfg(feature = "compression")]
fn inflate(data: &[u8], zlib: bool, sink: &mut Sink) -> Result<usize> {
    const DEFLATE: ContentEncoding = ContentEncoding::Deflate;
    let mut d = flate2::Decompress::new(zlib);
    let mut block = vec![0u8; OUT_BLOCK];
    loop {
        let (in_before, out_before) = (d.total_in(), d.total_out());
        let status = d
            .decompress(&data[in_before as usize..], &mut block, flate2::FlushDecompress::None)
            .map_err(|e| corrupt(DEFLATE, e))?;
        sink.push(&block[..(d.total_out() - out_before) as usize])?;
        if status == flate2::Status::StreamEnd {
            return Ok(d.total_in() as usize);
        }
        if d.total_out() == out_before && d.total_in() == in_before {
            // All the input was given: no progress means the stream stops before its end.
            return Err(corrupt(DEFLATE, "the stream ends early"));
        }
    }
}

/// gzip (RFC 1952): one member or several, each checked against its CRC-32 and size by flate2's
/// `MultiGzDecoder`, read out a block at a time.
#[cfg(feature = "compression")]
fn gunzip(data: &[u8], sink: &mut Sink) -> Result<()> {
    use std::io::Read;
    let mut members = flate2::read::MultiGzDecoder::new(data);
    let mut block = vec![0u8; OUT_BLOCK];
    loop {
        let n = members.read(&mut block).map_err(|e| corrupt(ContentEncoding::Gzip, e))?;
        if n == 0 {
            return Ok(());
        }
        sink.push(&block[..n])?;
    }
}

/// brotli (RFC 7932), asked for one output block at a time.
#[cfg(feature = "compression")]
fn unbrotli(data: &[u8], sink: &mut Sink) -> Result<()> {
    use brotli::{BrotliResult, HeapAlloc, HuffmanCode};
    const BR: ContentEncoding = ContentEncoding::Br;
    let mut state = brotli::BrotliState::new(
        HeapAlloc::<u8>::new(0),
        HeapAlloc::<u32>::new(0),
        HeapAlloc::<HuffmanCode>::new(HuffmanCode { bits: 2, value: 1 }),
    );
    let mut block = vec![0u8; OUT_BLOCK];
    let (mut avail_in, mut in_at, mut total_out) = (data.len(), 0usize, 0usize);
    loop {
        let (mut avail_out, mut out_at) = (block.len(), 0usize);
        let result = brotli::BrotliDecompressStream(
            &mut avail_in,
            &mut in_at,
            data,
            &mut avail_out,
            &mut out_at,
            &mut block,
            &mut total_out,
            &mut state,
        );
        sink.push(&block[..out_at])?;
        match result {
            BrotliResult::NeedsMoreOutput => {}
            BrotliResult::ResultSuccess if in_at == data.len() => return Ok(()),
            BrotliResult::ResultSuccess => {
                return Err(corrupt(BR, format!("{} bytes after the end of the stream", data.len() - in_at)));
            }
            BrotliResult::NeedsMoreInput => return Err(corrupt(BR, "the stream ends early")),
            BrotliResult::ResultFailure => return Err(corrupt(BR, "invalid data")),
        }
    }
}

/// zstd (RFC 8878): one frame or several, skippable frames skipped; each frame is decoded a block
/// (at most 128 KiB) at a time and read out in blocks.
#[cfg(feature = "compression")]
fn unzstd(data: &[u8], sink: &mut Sink) -> Result<()> {
    use ruzstd::decoding::StreamingDecoder;
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use std::io::Read;
    const ZSTD: ContentEncoding = ContentEncoding::Zstd;
    let mut rest = data;
    let mut block = vec![0u8; OUT_BLOCK];
    loop {
        match StreamingDecoder::new(&mut rest) {
            Ok(mut frame) => {
                loop {
                    let n = frame.read(&mut block).map_err(|e| corrupt(ZSTD, e))?;
                    if n == 0 {
                        break;
                    }
                    sink.push(&block[..n])?;
                }
                // the frame's content checksum (the low 32 bits of its XXH64), when it has one
                let decoder = &frame.decoder;
                if let (Some(sent), Some(seen)) = (decoder.get_checksum_from_data(), decoder.get_calculated_checksum())
                {
                    if sent != seen {
                        return Err(corrupt(
                            ZSTD,
                            format!("content checksum {sent:08x} does not match the content's {seen:08x}"),
                        ));
                    }
                }
            }
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame { length, .. })) => {
                rest = rest.get(length as usize..).ok_or_else(|| corrupt(ZSTD, "the stream ends early"))?;
            }
            Err(e) => return Err(corrupt(ZSTD, e)),
        }
        if rest.is_empty() {
            return Ok(());
        }
    }
}

#[cfg(all(test, feature = "compression"))]
mod tests {
    use super::*;
    use ContentEncoding::*;
    use std::io::Write;

    /// Noise, a long run and noise again: every coding must cope with both.
    fn payload() -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut noise = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        let mut p = noise(3000);
        p.extend(std::iter::repeat_n(b'x', 200_000));
        p.extend(noise(3000));
        p
    }

    fn raw_deflate(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn gzip_named(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::GzBuilder::new()
            .filename("body.bin")
            .comment("a comment")
            .extra(vec![1, 2, 3])
            .write(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn names_and_aliases() {
        for (name, want) in [
            ("gzip", Some(Gzip)),
            ("GZIP", Some(Gzip)),
            ("x-gzip", Some(Gzip)),
            (" deflate ", Some(Deflate)),
            ("br", Some(Br)),
            ("zstd", Some(Zstd)),
            ("identity", Some(Identity)),
            ("gzip, br", None),
            ("compress", None),
            ("x-deflate", None),
            ("", None),
        ] {
            assert_eq!(ContentEncoding::from_name(name), want, "{name:?}");
        }
        assert!(!ContentEncoding::offered().contains(&Deflate), "responses are never deflate");
    }

    #[test]
    fn every_coding_round_trips_up_to_an_exact_limit() {
        let data = payload();
        let cases: Vec<(&str, ContentEncoding, Vec<u8>)> = vec![
            ("gzip", Gzip, compress(Gzip, &data)),
            ("gzip with name, comment, extra", Gzip, gzip_named(&data)),
            ("gzip, two members", Gzip, cat(&[&compress(Gzip, &data[..1000]), &compress(Gzip, &data[1000..])])),
            ("deflate (zlib)", Deflate, compress(Deflate, &data)),
            ("deflate (bare)", Deflate, raw_deflate(&data)),
            ("br", Br, compress(Br, &data)),
            ("zstd", Zstd, compress(Zstd, &data)),
            ("zstd, two frames", Zstd, cat(&[&compress(Zstd, &data[..1000]), &compress(Zstd, &data[1000..])])),
            (
                "zstd after a skippable frame",
                Zstd,
                cat(&[&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9], &compress(Zstd, &data)]),
            ),
            ("identity", Identity, data.clone()),
        ];
        for (what, enc, body) in cases {
            assert_eq!(decompress_bounded(enc, &body, data.len()).unwrap(), data, "{what}");
            let e = decompress_bounded(enc, &body, data.len() - 1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::PayloadTooLarge, "{what}");
        }
        // An empty body is a valid stream in every coding.
        for enc in [Gzip, Deflate, Br, Zstd] {
            assert_eq!(decompress_bounded(enc, &compress(enc, b""), 0).unwrap(), b"", "{enc:?}");
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit_without_inflating_in_full() {
        const LIMIT: usize = 1 << 20;
        let zeros = vec![0u8; 16 << 20];
        for (enc, bomb) in [
            (Gzip, compress(Gzip, &zeros)),
            (Deflate, compress(Deflate, &zeros)),
            (Deflate, raw_deflate(&zeros)),
            (Br, compress(Br, &zeros)),
            (Zstd, compress(Zstd, &zeros)),
        ] {
            assert!(bomb.len() < LIMIT / 8, "{enc:?}: {} bytes", bomb.len());
            let mut sink = Sink { out: Vec::new(), limit: LIMIT };
            let e = match enc {
                Gzip => gunzip(&bomb, &mut sink),
                Deflate => inflate(&bomb, bomb[0] == 0x78, &mut sink).map(|_| ()),
                Br => unbrotli(&bomb, &mut sink),
                Zstd => unzstd(&bomb, &mut sink),
                Identity => unreachable!(),
            }
            .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::PayloadTooLarge, "{enc:?}");
            // What was inflated before the refusal: at most the limit, and grown a block at a time.
            assert!(sink.out.len() <= LIMIT && sink.out.len() > LIMIT - OUT_BLOCK, "{enc:?}: {}", sink.out.len());
            assert!(sink.out.capacity() <= 2 * LIMIT, "{enc:?}: capacity {}", sink.out.capacity());
            assert_eq!(decompress_bounded(enc, &bomb, LIMIT).unwrap_err().kind(), ErrorKind::PayloadTooLarge);
        }
    }

    #[test]
    fn corrupt_cut_and_overlong_streams_are_malformed_on_content_encoding() {
        let text = vec![b'x'; 1000];
        let gz = compress(Gzip, &text);
        let zl = compress(Deflate, &text);
        let br = compress(Br, &text);
        let zs = compress(Zstd, &text);
        let flip = |mut v: Vec<u8>, at: isize| {
            let i = at.rem_euclid(v.len() as isize) as usize;
            v[i] ^= 0x55;
            v
        };
        let cases: Vec<(&str, ContentEncoding, Vec<u8>)> = vec![
            ("gzip: not gzip", Gzip, b"not gzip at all".to_vec()),
            ("gzip: empty", Gzip, vec![]),
            ("gzip: header only", Gzip, gz[..10].to_vec()),
            ("gzip: cut in the data", Gzip, gz[..gz.len() - 12].to_vec()),
            ("gzip: cut in the trailer", Gzip, gz[..gz.len() - 3].to_vec()),
            ("gzip: CRC wrong", Gzip, flip(gz.clone(), -8)),
            ("gzip: size wrong", Gzip, flip(gz.clone(), -1)),
            ("gzip: bytes after the member", Gzip, cat(&[&gz, b"trailing"])),
            ("gzip: a second member cut", Gzip, cat(&[&gz, &gz[..20]])),
            ("deflate: not deflate", Deflate, b"not deflate at all".to_vec()),
            ("deflate: empty", Deflate, vec![]),
            ("deflate: one byte", Deflate, vec![0x78]),
            ("deflate: zlib cut", Deflate, zl[..zl.len() - 5].to_vec()),
            ("deflate: zlib Adler-32 wrong", Deflate, flip(zl.clone(), -1)),
            ("deflate: bytes after the zlib stream", Deflate, cat(&[&zl, b"trailing"])),
            ("deflate: bare stream cut", Deflate, raw_deflate(&text)[..3].to_vec()),
            ("deflate: bytes after the bare stream", Deflate, cat(&[&raw_deflate(&text), b"x"])),
            ("br: not brotli", Br, b"not brotli at all".to_vec()),
            ("br: empty", Br, vec![]),
            ("br: cut", Br, br[..br.len() - 3].to_vec()),
            ("br: bytes after the stream", Br, cat(&[&compress(Br, b"x"), b"trailing"])),
            ("zstd: not zstd", Zstd, b"not zstd at all".to_vec()),
            ("zstd: empty", Zstd, vec![]),
            ("zstd: cut", Zstd, zs[..zs.len() - 3].to_vec()),
            ("zstd: content checksum wrong", Zstd, flip(zs.clone(), -1)),
            ("zstd: bytes after the frame", Zstd, cat(&[&zs, b"trailing"])),
            ("zstd: a skippable frame cut", Zstd, cat(&[&zs, &[0x50, 0x2a, 0x4d, 0x18, 9, 0, 0, 0, 1]])),
        ];
        for (what, enc, body) in cases {
            let e = decompress_bounded(enc, &body, 1 << 20).unwrap_err();
            assert_eq!((e.kind(), e.field_name()), (ErrorKind::Malformed, Some("Content-Encoding")), "{what}: {e}");
        }
    }

    #[test]
    fn zlib_header_test_tells_zlib_from_a_bare_stream() {
        for level in 0..=9 {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(b"abc").unwrap();
            let z = e.finish().unwrap();
            assert!(is_zlib_header(z[0], z[1]), "level {level}");
        }
        let raw = raw_deflate(&payload());
        assert!(!is_zlib_header(raw[0], raw[1]));
        assert!(!is_zlib_header(0x78, 0x9a), "check bits wrong");
        assert!(is_zlib_header(0x78, 0x9c) && !is_zlib_header(0x88, 0x1c), "window over 32 KiB");
        assert!(!is_zlib_header(0x79, 0x18), "not the deflate method");
    }
}
