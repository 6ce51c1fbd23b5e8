//! Media types and content negotiation (SPEC.md section 12): the five body formats of an
//! embeddings response and the choice among them from `Accept` or a `format` query parameter.

use crate::error::{ErrorKind, Result, err};
use std::fmt;

/// The five body formats of SPEC.md section 12, in the server's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `application/json`: the OpenAI-compatible envelope (section 6).
    Json,
    /// `application/octet-stream`: the tensor's bytes, described by headers (section 7).
    Raw,
    /// `application/vnd.msgpack` (section 8).
    Msgpack,
    /// `application/protobuf` (section 9).
    Protobuf,
    /// `application/vnd.apache.arrow.stream` (section 10).
    Arrow,
}

impl Format {
    /// Every format, JSON first (the order that breaks ties in negotiation).
    pub const ALL: [Format; 5] = [Format::Json, Format::Raw, Format::Msgpack, Format::Protobuf, Format::Arrow];

    /// The canonical media type.
    pub fn media_type(self) -> &'static str {
        self.media_types()[0]
    }

    /// The canonical media type and its aliases.
    pub fn media_types(self) -> &'static [&'static str] {
        match self {
            Format::Json => &["application/json"],
            Format::Raw => &["application/octet-stream"],
            Format::Msgpack => &["application/vnd.msgpack", "application/msgpack", "application/x-msgpack"],
            Format::Protobuf => &["application/protobuf", "application/x-protobuf"],
            Format::Arrow => &["application/vnd.apache.arrow.stream"],
        }
    }

    /// The name used by the `format` query parameter (`json`, `raw`, `msgpack`, `protobuf`, `arrow`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Raw => "raw",
            Format::Msgpack => "msgpack",
            Format::Protobuf => "protobuf",
            Format::Arrow => "arrow",
        }
    }

    /// The format of a `format` query parameter value.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format of a `Content-Type` value (aliases and parameters accepted, case-insensitive).
    ///
    /// ```
    /// use densewire::Format;
    /// assert_eq!(Format::from_content_type("application/x-msgpack"), Some(Format::Msgpack));
    /// assert_eq!(Format::from_content_type("Application/JSON; charset=utf-8"), Some(Format::Json));
    /// assert_eq!(Format::from_content_type("text/plain"), None);
    /// ```
    pub fn from_content_type(value: &str) -> Option<Format> {
        let essence = value.split(';').next().unwrap_or("").trim();
        Format::ALL.into_iter().find(|f| f.media_types().iter().any(|m| m.eq_ignore_ascii_case(essence)))
    }

    /// Whether this build of the crate can encode and decode the format (MessagePack, Protobuf and
    /// Arrow are cargo features).
    pub fn is_supported(self) -> bool {
        match self {
            Format::Json | Format::Raw => true,
            Format::Msgpack => cfg!(feature = "msgpack"),
            Format::Protobuf => cfg!(feature = "protobuf"),
            Format::Arrow => cfg!(feature = "arrow"),
        }
    }

    /// The formats this build supports, in preference order.
    pub fn supported() -> Vec<Format> {
        SUPPORTED.to_vec()
    }
}

/// [`Format::supported`] without an allocation.
pub(crate) const SUPPORTED: &[Format] = &[
    Format::Json,
    Format::Raw,
    #[cfg(feature = "msgpack")]
    Format::Msgpack,
    #[cfg(feature = "protobuf")]
    Format::Protobuf,
    #[cfg(feature = "arrow")]
    Format::Arrow,
];

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.media_type())
    }
}

/// Chooses the response format (SPEC.md section 12): a `format` query parameter overrides
/// `Accept`; otherwise the highest q-value wins, a more specific range overrides a less specific
/// one for the same type, `q=0` excludes, and ties go to the order of `offered` (JSON first).
/// No `Accept` (or `*/*`) means JSON. Nothing acceptable is `not_acceptable`.
///
/// ```
/// use densewire::{negotiate, Format};
/// let all = Format::ALL;
/// assert_eq!(negotiate(None, None, &all).unwrap(), Format::Json);
/// assert_eq!(negotiate(Some("application/octet-stream"), None, &all).unwrap(), Format::Raw);
/// assert_eq!(negotiate(Some("*/*;q=0.5, application/json;q=0"), None, &all).unwrap(), Format::Raw);
/// assert_eq!(negotiate(Some("application/json"), Some("msgpack"), &all).unwrap(), Format::Msgpack);
/// assert!(negotiate(Some("text/html"), None, &all).is_err());
/// ```
pub fn negotiate(accept: Option<&str>, format_param: Option<&str>, offered: &[Format]) -> Result<Format> {
    let not_acceptable = |what: String| {
        let list: Vec<&str> = offered.iter().map(|f| f.media_type()).collect();
        err(ErrorKind::NotAcceptable, format!("{what}; supported types: {}", list.join(", ")))
    };
    if let Some(name) = format_param {
        return match Format::from_name(name) {
            Some(f) if offered.contains(&f) => Ok(f),
            _ => Err(not_acceptable(format!("format={name} cannot be served")).field("format")),
        };
    }
    let accept = match accept.map(str::trim) {
        None | Some("") => return offered.first().copied().ok_or_else(|| not_acceptable("no format offered".into())),
        Some(a) => a,
    };
    let ranges = Ranges::parse(accept);
    let mut best: Option<(Format, u16)> = None;
    for &f in offered {
        let q = f.media_types().iter().filter_map(|m| ranges.quality(m)).max().unwrap_or(0);
        if q > 0 && best.is_none_or(|(_, bq)| q > bq) {
            best = Some((f, q));
        }
    }
    best.map(|(f, _)| f).ok_or_else(|| not_acceptable(format!("nothing in Accept: {accept} can be served")))
}

#[derive(Clone, Copy)]
struct Range<'a> {
    typ: &'a str,
    sub: &'a str,
    /// `typ` is `application` (any case): the type of every body format, compared once here.
    application: bool,
    params: usize,
    q: u16, // thousandths
}

/// The ranges of an `Accept` value: the first 16 on the stack (negotiation runs for every request,
/// and real `Accept` values have a handful), any more in a `Vec`.
struct Ranges<'a> {
    head: [Range<'a>; 16],
    len: usize,
    rest: Vec<Range<'a>>,
}

impl<'a> Ranges<'a> {
    fn parse(accept: &'a str) -> Ranges<'a> {
        const NONE: Range<'static> = Range { typ: "", sub: "", application: false, params: 0, q: 0 };
        let mut out = Ranges { head: [NONE; 16], len: 0, rest: Vec::new() };
        for part in accept.split(',') {
            let mut pieces = part.split(';');
            let mr = pieces.next().unwrap_or("").trim();
            let Some((typ, sub)) = mr.split_once('/') else { continue };
            let (typ, sub) = (typ.trim(), sub.trim());
            if typ.is_empty() || sub.is_empty() {
                continue;
            }
            let mut q = Some(1000u16);
            let mut params = 0;
            for p in pieces {
                let Some((k, v)) = p.split_once('=') else { continue };
                if k.trim().eq_ignore_ascii_case("q") {
                    q = parse_qvalue(v.trim().trim_matches('"'));
                    break; // parameters after q are accept-extensions
                }
                params += 1;
            }
            if let Some(q) = q {
                let r = Range { typ, sub, application: typ.eq_ignore_ascii_case("application"), params, q };
                if out.len < out.head.len() {
                    out.head[out.len] = r;
                    out.len += 1;
                } else {
                    out.rest.push(r);
                }
            }
        }
        out
    }

    fn iter(&self) -> impl Iterator<Item = &Range<'a>> {
        self.head[..self.len].iter().chain(self.rest.iter())
    }

    /// The q-value the most specific matching range gives to `media` (type/subtype), if any matches.
    fn quality(&self, media: &str) -> Option<u16> {
        let (typ, sub) = media.split_once('/').expect("media types have a slash");
        let mut best: Option<(u8, usize, u16)> = None; // (specificity, params, q)
        let application = typ == "application";
        for r in self.iter() {
            let same_type = if application { r.application } else { r.typ.eq_ignore_ascii_case(typ) };
            let spec = if same_type && r.sub.eq_ignore_ascii_case(sub) {
                2
            } else if same_type && r.sub == "*" {
                1
            } else if r.typ == "*" && r.sub == "*" {
                0
            } else {
                continue;
            };
            let key = (spec, r.params, r.q);
            if best.is_none_or(|b| (key.0, key.1) > (b.0, b.1) || ((key.0, key.1) == (b.0, b.1) && key.2 > b.2)) {
                best = Some(key);
            }
        }
        best.map(|b| b.2)
    }
}

/// A q-value (RFC 9110 section 12.4.2: `0`, `1`, or up to three decimals) in thousandths; `None`
/// when it is not one. Shared by `Accept` and `Accept-Encoding`.
pub(crate) fn parse_qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The decimals padded to three: "5" is 500, "05" is 50.
    let thousandths =
        frac.bytes().chain(std::iter::repeat(b'0')).take(3).fold(0, |acc, b| acc * 10 + u16::from(b - b'0'));
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Format; 5] = Format::ALL;

    fn pick(accept: &str) -> Option<Format> {
        negotiate(Some(accept), None, &ALL).ok()
    }

    #[test]
    fn rfc9110_negotiation() {
        assert_eq!(pick("*/*"), Some(Format::Json));
        assert_eq!(pick("application/*"), Some(Format::Json));
        assert_eq!(pick("application/*;q=0.2, application/protobuf;q=0.1"), Some(Format::Json));
        // More specific ranges override less specific ones for the same type.
        assert_eq!(pick("application/*, application/json;q=0"), Some(Format::Raw));
        assert_eq!(pick("application/json;q=0, */*"), Some(Format::Raw));
        // Aliases count as the format.
        assert_eq!(pick("application/msgpack"), Some(Format::Msgpack));
        assert_eq!(pick("application/x-protobuf"), Some(Format::Protobuf));
        // Equal q-values: the server's order decides.
        assert_eq!(pick("application/vnd.apache.arrow.stream, application/octet-stream"), Some(Format::Raw));
        // q-values, case and spaces.
        assert_eq!(pick("Application/Octet-Stream ; Q=0.5 , application/json;q=0.4"), Some(Format::Raw));
        assert_eq!(pick("application/json;q=0.001"), Some(Format::Json));
        assert_eq!(pick("application/json;q=1.5"), None);
        assert_eq!(pick("application/json;q=0"), None);
        assert_eq!(pick("text/*"), None);
        assert_eq!(pick("garbage"), None);
    }

    #[test]
    fn format_parameter_overrides_accept() {
        assert_eq!(negotiate(Some("text/html"), Some("arrow"), &ALL).unwrap(), Format::Arrow);
        let e = negotiate(None, Some("xml"), &ALL).unwrap_err();
        assert_eq!((e.kind(), e.field_name()), (ErrorKind::NotAcceptable, Some("format")));
        let e = negotiate(None, Some("arrow"), &[Format::Json]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotAcceptable);
    }

    #[test]
    fn not_acceptable_lists_supported_types() {
        let e = negotiate(Some("text/html"), None, &[Format::Json, Format::Raw]).unwrap_err();
        assert_eq!(e.http_status(), 406);
        assert!(e.message().contains("application/json, application/octet-stream"), "{}", e.message());
    }

    /// The implementation before the allocation-free one, kept as the reference it must agree with.
    mod reference {
        use super::super::Format;

        pub fn negotiate(accept: Option<&str>, offered: &[Format]) -> Option<Format> {
            let accept = match accept.map(str::trim) {
                None | Some("") => return offered.first().copied(),
                Some(a) => a,
            };
            let ranges = parse_accept(accept);
            let mut best: Option<(Format, u16)> = None;
            for &f in offered {
                let q = f.media_types().iter().filter_map(|m| quality(&ranges, m)).max().unwrap_or(0);
                if q > 0 && best.is_none_or(|(_, bq)| q > bq) {
                    best = Some((f, q));
                }
            }
            best.map(|(f, _)| f)
        }

        struct Range<'a> {
            typ: &'a str,
            sub: &'a str,
            params: usize,
            q: u16, // thousandths
        }

        fn parse_accept(accept: &str) -> Vec<Range<'_>> {
            let mut out = Vec::new();
            for part in accept.split(',') {
                let mut pieces = part.split(';');
                let mr = pieces.next().unwrap_or("").trim();
                let Some((typ, sub)) = mr.split_once('/') else { continue };
                let (typ, sub) = (typ.trim(), sub.trim());
                if typ.is_empty() || sub.is_empty() {
                    continue;
                }
                let mut q = Some(1000u16);
                let mut params = 0;
                for p in pieces {
                    let Some((k, v)) = p.split_once('=') else { continue };
                    if k.trim().eq_ignore_ascii_case("q") {
                        q = parse_q(v.trim());
                        break; // parameters after q are accept-extensions
                    }
                    params += 1;
                }
                if let Some(q) = q {
                    out.push(Range { typ, sub, params, q });
                }
            }
            out
        }

        fn parse_q(v: &str) -> Option<u16> {
            let v = v.trim_matches('"');
            let (int, frac) = v.split_once('.').unwrap_or((v, ""));
            if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let frac_val = format!("{frac:0<3}").parse::<u16>().ok()?;
            match int {
                "0" => Some(frac_val),
                "1" if frac_val == 0 => Some(1000),
                _ => None,
            }
        }

        /// The q-value the most specific matching range gives to `media` (type/subtype), if any matches.
        fn quality(ranges: &[Range<'_>], media: &str) -> Option<u16> {
            let (typ, sub) = media.split_once('/').expect("media types have a slash");
            let mut best: Option<(u8, usize, u16)> = None; // (specificity, params, q)
            for r in ranges {
                let spec = if r.typ.eq_ignore_ascii_case(typ) && r.sub.eq_ignore_ascii_case(sub) {
                    2
                } else if r.typ.eq_ignore_ascii_case(typ) && r.sub == "*" {
                    1
                } else if r.typ == "*" && r.sub == "*" {
                    0
                } else {
                    continue;
                };
                let key = (spec, r.params, r.q);
                if best.is_none_or(|b| (key.0, key.1) > (b.0, b.1) || ((key.0, key.1) == (b.0, b.1) && key.2 > b.2)) {
                    best = Some(key);
                }
            }
            best.map(|b| b.2)
        }
    }

    /// Accept values made of pieces that exercise every rule (types, wildcards, aliases, case,
    /// spaces, parameters, q-values valid and not, quotes, empty parts), checked against the
    /// reference implementation.
    #[test]
    fn agrees_with_the_reference_implementation() {
        let pieces = [
            "application/json",
            "application/octet-stream",
            "APPLICATION/Octet-Stream",
            "application/*",
            "*/*",
            "text/*",
            "application/x-msgpack",
            "application/msgpack",
            "application/vnd.msgpack",
            "application/x-protobuf",
            "application/protobuf",
            "application/vnd.apache.arrow.stream",
            "garbage",
            "/json",
            "application/",
            " application / json ",
            "*/json",
            "",
        ];
        let params = [
            "",
            ";q=0",
            ";q=0.5",
            ";q=1",
            ";q=1.0",
            ";q=1.5",
            ";Q=0.001",
            ";q=\"0.3\"",
            ";q=.5",
            ";q=0.1234",
            ";level=1",
            ";level=1;q=0.2",
            ";q=0.2;level=1",
            ";charset=utf-8;q=0.9",
            ";q",
            ";q=",
        ];
        let offered: [&[Format]; 3] = [&Format::ALL, &[Format::Json, Format::Raw], &[Format::Arrow, Format::Json]];
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..20_000 {
            let parts: Vec<String> = (0..1 + next(20))
                .map(|_| format!("{}{}", pieces[next(pieces.len())], params[next(params.len())]))
                .collect();
            let accept = parts.join(if next(2) == 0 { "," } else { ", " });
            for offered in offered {
                assert_eq!(
                    negotiate(Some(&accept), None, offered).ok(),
                    reference::negotiate(Some(&accept), offered),
                    "{accept:?} {offered:?}"
                );
            }
        }
    }
}
