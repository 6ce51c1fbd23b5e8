//! Case-insensitive access to HTTP headers, whatever holds them (a slice or map of pairs, an
//! `http::HeaderMap`), for the raw format's and the tables' `Densewire-*` headers.

/// `Densewire-Version`: the major version of the wire spec (`1`), sent with raw bodies and tables.
pub const HEADER_VERSION: &str = "Densewire-Version";

/// Case-insensitive access to HTTP headers, for the raw format's `Densewire-*` headers.
pub trait Headers {
    /// The value of header `name` (case-insensitive), if present and valid text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for [(K, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Headers for [(K, V); N] {
    fn header(&self, name: &str) -> Option<&str> {
        self[..].header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for Vec<(K, V)> {
    fn header(&self, name: &str) -> Option<&str> {
        self[..].header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, S> Headers for std::collections::HashMap<K, V, S> {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

#[cfg(any(feature = "axum", feature = "reqwest"))]
impl Headers for http::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}
