//! A minimal JSON pull scanner over one input line: walks objects key by key,
//! hands out raw spans of values, and unescapes strings into a reused buffer.
//! It never builds a tree, so decoding a record allocates nothing once the
//! scratch buffers have grown.

/// Deepest nesting skipped over; protects the recursive skipper's stack from
/// hostile input.
pub const JSON_DEPTH_MAX: usize = 64;

/// A JSON syntax problem at a byte offset of the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {message}")]
pub struct ScanError {
    /// Byte offset in the line.
    pub offset: usize,
    /// What was expected.
    pub message: &'static str,
}

/// Cursor over the bytes of one JSON text.
pub struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// The kind of the next value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `{`.
    Object,
    /// `[`.
    Array,
    /// `"`.
    String,
    /// A number.
    Number,
    /// `true` / `false`.
    Bool,
    /// `null`.
    Null,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Scanner<'a> {
        Scanner { bytes, pos: 0 }
    }

    /// Current byte offset.
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn err<T>(&self, message: &'static str) -> Result<T, ScanError> {
        Err(ScanError {
            offset: self.pos,
            message,
        })
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The unread bytes after whitespace.
    pub fn rest(&mut self) -> &'a [u8] {
        self.skip_ws();
        &self.bytes[self.pos..]
    }

    /// Skips `n` bytes that the caller knows form one complete JSON value
    /// (a byte-identical copy of a value parsed before). JSON values are
    /// self-delimiting, so whatever follows is still checked by the next read.
    pub fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.bytes.len());
    }

    /// Whether only whitespace remains.
    pub fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.bytes.len()
    }

    /// The kind of the next value (after whitespace).
    pub fn peek_kind(&mut self) -> Result<Kind, ScanError> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f') => Ok(Kind::Bool),
            Some(b'n') => Ok(Kind::Null),
            _ => self.err("expected a value"),
        }
    }

    fn literal(&mut self, text: &'static [u8]) -> Result<(), ScanError> {
        if self.bytes[self.pos..].starts_with(text) {
            self.pos += text.len();
            Ok(())
        } else {
            self.err("bad literal")
        }
    }

    /// Consumes `null` if it is next.
    pub fn null(&mut self) -> Result<bool, ScanError> {
        if self.peek_kind()? == Kind::Null {
            self.literal(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Reads a boolean.
    pub fn boolean(&mut self) -> Result<bool, ScanError> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b't') => self.literal(b"true").map(|_| true),
            Some(b'f') => self.literal(b"false").map(|_| false),
            _ => self.err("expected true or false"),
        }
    }

    /// Reads a number's text (validated as JSON number syntax).
    pub fn number(&mut self) -> Result<&'a [u8], ScanError> {
        self.skip_ws();
        let start = self.pos;
        let b = self.bytes;
        if b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        if self.pos == int_start {
            return self.err("expected digits");
        }
        if b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            let frac = self.pos;
            while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
            if self.pos == frac {
                return self.err("expected fraction digits");
            }
        }
        if matches!(b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(b.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let exp = self.pos;
            while matches!(b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
            if self.pos == exp {
                return self.err("expected exponent digits");
            }
        }
        Ok(&b[start..self.pos])
    }

    /// Reads an integer that fits an `i64`.
    pub fn integer(&mut self) -> Result<i64, ScanError> {
        let text = self.number()?;
        parse_i64(text).ok_or(ScanError {
            offset: self.pos,
            message: "expected an integer within 64 bits",
        })
    }

    /// Reads a string without escapes as a borrowed slice, or unescapes into
    /// `scratch` and returns that. The result is UTF-8 if the input line is.
    pub fn string<'s>(&mut self, scratch: &'s mut Vec<u8>) -> Result<&'s [u8], ScanError>
    where
        'a: 's,
    {
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b'"') {
            return self.err("expected a string");
        }
        self.pos += 1;
        let start = self.pos;
        let b = self.bytes;
        // Fast path: find the closing quote or the first escape with memchr,
        // then check the run for raw control characters (both vectorised).
        if let Some(found) = memchr::memchr2(b'"', b'\\', &b[self.pos..]) {
            let end = self.pos + found;
            if let Some(bad) = b[self.pos..end].iter().position(|&c| c < 0x20) {
                self.pos += bad;
                return self.err("control character in string");
            }
            self.pos = end;
            if b[end] == b'"' {
                self.pos += 1;
                return Ok(&b[start..end]);
            }
        } else {
            self.pos = b.len();
        }
        scratch.clear();
        scratch.extend_from_slice(&b[start..self.pos]);
        loop {
            let Some(&c) = b.get(self.pos) else {
                return self.err("unterminated string");
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(scratch),
                b'\\' => {
                    let Some(&e) = b.get(self.pos) else {
                        return self.err("unterminated escape");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => scratch.push(b'"'),
                        b'\\' => scratch.push(b'\\'),
                        b'/' => scratch.push(b'/'),
                        b'b' => scratch.push(8),
                        b'f' => scratch.push(12),
                        b'n' => scratch.push(b'\n'),
                        b'r' => scratch.push(b'\r'),
                        b't' => scratch.push(b'\t'),
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xd800..0xdc00).contains(&code) {
                                if !b[self.pos..].starts_with(b"\\u") {
                                    return self.err("unpaired surrogate");
                                }
                                self.pos += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return self.err("unpaired surrogate");
                                }
                                code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                            } else if (0xdc00..0xe000).contains(&code) {
                                return self.err("unpaired surrogate");
                            }
                            let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                            let mut utf8 = [0u8; 4];
                            scratch.extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
                        }
                        _ => return self.err("bad escape"),
                    }
                }
                0..=0x1f => return self.err("control character in string"),
                _ => scratch.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ScanError> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            return self.err("short \\u escape");
        };
        let mut code = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return self.err("bad \\u escape"),
            };
            code = code * 16 + u32::from(v);
        }
        self.pos += 4;
        Ok(code)
    }

    /// Enters an object (`{`).
    pub fn begin_object(&mut self) -> Result<(), ScanError> {
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b'{') {
            return self.err("expected an object");
        }
        self.pos += 1;
        Ok(())
    }

    /// The next key of the current object, or `None` at its `}`. `first` tells
    /// whether this is the first call for the object (no comma expected).
    pub fn next_key<'s>(
        &mut self,
        first: bool,
        scratch: &'s mut Vec<u8>,
    ) -> Result<Option<&'s [u8]>, ScanError>
    where
        'a: 's,
    {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            Some(b',') if !first => {
                self.pos += 1;
            }
            _ if first => {}
            _ => return self.err("expected , or }"),
        }
        let key = self.string(scratch)?;
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b':') {
            return self.err("expected :");
        }
        self.pos += 1;
        Ok(Some(key))
    }

    /// Skips one value and returns its raw bytes.
    pub fn skip_value(&mut self) -> Result<&'a [u8], ScanError> {
        self.skip_ws();
        let start = self.pos;
        self.skip(0)?;
        Ok(&self.bytes[start..self.pos])
    }

    fn skip(&mut self, depth: usize) -> Result<(), ScanError> {
        if depth > JSON_DEPTH_MAX {
            return self.err("nesting too deep");
        }
        let mut scratch = Vec::new();
        match self.peek_kind()? {
            Kind::Object => {
                self.begin_object()?;
                let mut first = true;
                while self.next_key(first, &mut scratch)?.is_some() {
                    first = false;
                    self.skip(depth + 1)?;
                }
            }
            Kind::Array => {
                self.pos += 1;
                self.skip_ws();
                if self.bytes.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    self.skip_ws();
                    match self.bytes.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return self.err("expected , or ]"),
                    }
                }
            }
            Kind::String => {
                self.string(&mut scratch)?;
            }
            Kind::Number => {
                self.number()?;
            }
            Kind::Bool => {
                self.boolean()?;
            }
            Kind::Null => self.literal(b"null")?,
        }
        Ok(())
    }
}

/// Parses an optionally negative decimal integer that fits an `i64`.
pub fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut value: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i128::from(d - b'0');
    }
    let value = if negative { -value } else { value };
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_objects_and_unescapes_strings() {
        let text =
            br#" {"a": "x\"y\u00e9\ud83d\ude00", "b": [1, {"c": null}], "n": -12.5e3, "t": true} "#;
        let mut s = Scanner::new(text);
        let mut key = Vec::new();
        let mut val = Vec::new();
        s.begin_object().unwrap();
        assert_eq!(s.next_key(true, &mut key).unwrap(), Some(&b"a"[..]));
        assert_eq!(s.string(&mut val).unwrap(), "x\"yé😀".as_bytes());
        assert_eq!(s.next_key(false, &mut key).unwrap(), Some(&b"b"[..]));
        assert_eq!(s.skip_value().unwrap(), br#"[1, {"c": null}]"#);
        assert_eq!(s.next_key(false, &mut key).unwrap(), Some(&b"n"[..]));
        assert_eq!(s.number().unwrap(), b"-12.5e3");
        s.next_key(false, &mut key).unwrap();
        assert!(s.boolean().unwrap());
        assert_eq!(s.next_key(false, &mut key).unwrap(), None);
        assert!(s.at_end());
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for text in [
            &br#"{"a" 1}"#[..],
            br#"{"a": "unterminated"#,
            br#"{"a": [1 2]}"#,
            br#"{"a": -}"#,
            br#"{"a": "\ud800"}"#,
            br#"{"a": tru}"#,
            b"{\"a\": \"raw\x01control\"}",
            b"{\"a\": \"esc\\n then raw\x1f\"}",
            b"",
        ] {
            let mut s = Scanner::new(text);
            assert!(s.skip_value().is_err(), "{}", String::from_utf8_lossy(text));
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(Scanner::new(deep.as_bytes()).skip_value().is_err());
    }

    #[test]
    fn integers_outside_64_bits_are_refused() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"1.5"), None);
    }
}
