//! The little JSON that gulpio's `.gmeta` needs, written by hand rather than with serde_json
//! because gulpio wrote its meta files with Python's `json.dump`, which (a) emits `NaN`,
//! `Infinity` and `-Infinity` for floats that serde_json refuses, and (b) must be reproduced
//! byte for byte when we rewrite a meta file, including each `meta_data` value verbatim.
//! The scanner keeps those values as raw text spans and bounds nesting depth.

/// Maximum nesting of arrays/objects inside a metadata value (a JSON "nesting bomb" guard).
pub const MAX_DEPTH: usize = 128;

/// Appends `s` as a JSON string exactly as Python's `json.dumps(s)` (ensure_ascii=True) does.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\u{0c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.extend_from_slice(format!("\\u{:04x}", u).as_bytes());
                }
            }
        }
    }
    out.push(b'"');
}

/// A cursor over JSON text. Errors are messages with the byte offset; callers add the path.
pub struct Scanner<'a> {
    pub text: &'a [u8],
    pub pos: usize,
}

impl<'a> Scanner<'a> {
    pub fn new(text: &'a [u8]) -> Self {
        Scanner { text, pos: 0 }
    }

    pub fn err(&self, msg: &str) -> String {
        format!("invalid JSON at byte {}: {msg}", self.pos)
    }

    pub fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    pub fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.get(self.pos).copied()
    }

    pub fn eat(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected '{}'", c as char)))
        }
    }

    /// After an element of an array/object: true if another follows (a comma was eaten),
    /// false if the closing bracket `close` was eaten.
    pub fn next_or_close(&mut self, close: u8) -> Result<bool, String> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.err(&format!("expected ',' or '{}'", close as char))),
        }
    }

    /// Walks an object (its `{` is next): `each` gets every key with the scanner at its value,
    /// which it must consume.
    pub fn for_each_key<E: From<String>>(
        &mut self,
        mut each: impl FnMut(&mut Self, String) -> Result<(), E>,
    ) -> Result<(), E> {
        self.eat(b'{')?;
        if self.empty_container(b'}') {
            return Ok(());
        }
        loop {
            self.skip_ws();
            let key = self.string()?;
            self.eat(b':')?;
            each(self, key)?;
            if !self.next_or_close(b'}')? {
                return Ok(());
            }
        }
    }

    /// True (and the bracket eaten) if the container opened just before is empty.
    pub fn empty_container(&mut self, close: u8) -> bool {
        if self.peek() == Some(close) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn hex4(&mut self) -> Result<u16, String> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        // Exactly four hex digits, as Python's json requires (from_str_radix alone also takes
        // a sign: "\u+041").
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(self.err("bad \\u escape"));
        }
        let s = std::str::from_utf8(digits).map_err(|_| self.err("bad \\u escape"))?;
        let v = u16::from_str_radix(s, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    /// Parses a string (the opening quote is next) into a Rust `String`.
    pub fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&c) = self.text.get(self.pos) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            let run = std::str::from_utf8(&self.text[start..self.pos])
                .map_err(|_| self.err("string is not valid UTF-8"))?;
            out.push_str(run);
            match self.text.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let e = *self
                        .text
                        .get(self.pos)
                        .ok_or_else(|| self.err("truncated escape"))?;
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.text.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(self.err("unpaired surrogate in string"));
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("unpaired surrogate in string"));
                                }
                                let v =
                                    0x10000 + (((hi as u32) - 0xD800) << 10) + (lo as u32 - 0xDC00);
                                char::from_u32(v)
                            } else {
                                char::from_u32(hi as u32)
                            };
                            out.push(c.ok_or_else(|| self.err("unpaired surrogate in string"))?);
                        }
                        _ => return Err(self.err("unknown escape")),
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    /// Parses a non-negative integer that fits in u64 (frame_info fields).
    pub fn uint(&mut self) -> Result<u64, String> {
        self.skip_ws();
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.text.get(self.pos) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("expected a non-negative integer"));
        }
        if self.pos - start > 1 && self.text[start] == b'0' {
            return Err(self.err("number with a leading zero (not JSON)"));
        }
        if let Some(b'.' | b'e' | b'E') = self.text.get(self.pos) {
            return Err(self.err("expected an integer, found a fraction or exponent"));
        }
        std::str::from_utf8(&self.text[start..self.pos])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| self.err("integer out of range"))
    }

    /// Skips one value of any type and returns its raw text span. Accepts Python's `NaN`,
    /// `Infinity` and `-Infinity`.
    pub fn skip_value(&mut self, depth: usize) -> Result<&'a [u8], String> {
        if depth > MAX_DEPTH {
            return Err(self.err(&format!("nesting deeper than {MAX_DEPTH}")));
        }
        self.skip_ws();
        let start = self.pos;
        match self.text.get(self.pos) {
            Some(b'"') => {
                self.string()?;
            }
            Some(b'{') => {
                self.pos += 1;
                if !self.empty_container(b'}') {
                    loop {
                        self.skip_ws();
                        self.string()?;
                        self.eat(b':')?;
                        self.skip_value(depth + 1)?;
                        if !self.next_or_close(b'}')? {
                            break;
                        }
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                if !self.empty_container(b']') {
                    loop {
                        self.skip_value(depth + 1)?;
                        if !self.next_or_close(b']')? {
                            break;
                        }
                    }
                }
            }
            Some(_) => self.literal_or_number()?,
            None => return Err(self.err("unexpected end of input")),
        }
        Ok(&self.text[start..self.pos])
    }

    fn literal_or_number(&mut self) -> Result<(), String> {
        for lit in [
            &b"true"[..],
            b"false",
            b"null",
            b"NaN",
            b"Infinity",
            b"-Infinity",
        ] {
            if self.text[self.pos..].starts_with(lit) {
                self.pos += lit.len();
                return Ok(());
            }
        }
        let start = self.pos;
        let digits = |s: &mut Self| {
            let b = s.pos;
            while let Some(b'0'..=b'9') = s.text.get(s.pos) {
                s.pos += 1;
            }
            s.pos > b
        };
        if self.text.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        if !digits(self) {
            self.pos = start;
            return Err(self.err("expected a value"));
        }
        if self.pos - int_start > 1 && self.text[int_start] == b'0' {
            return Err(self.err("number with a leading zero (not JSON)"));
        }
        if self.text.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.err("bad number"));
            }
        }
        if let Some(b'e' | b'E') = self.text.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.text.get(self.pos) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.err("bad number"));
            }
        }
        Ok(())
    }

    pub fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_python_json_refuses() {
        for bad in [&br#""\u+041""#[..], br#""\u 041""#] {
            assert!(Scanner::new(bad).string().is_err(), "{:?}", bad);
        }
        assert!(Scanner::new(b"01").uint().is_err());
        assert!(Scanner::new(b"0").uint().is_ok());
        for bad in [&b"00"[..], b"-01", b"012.5"] {
            assert!(Scanner::new(bad).skip_value(0).is_err(), "{:?}", bad);
        }
        for good in [&b"0"[..], b"-0", b"0.5", b"10", b"0e3"] {
            assert!(Scanner::new(good).skip_value(0).is_ok(), "{:?}", good);
        }
    }

    #[test]
    fn python_style_escaping() {
        let mut out = Vec::new();
        write_str("a\"b\\c\n\u{1}é😀\u{7f}/", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\n\u0001\u00e9\ud83d\ude00\u007f/""#
        );
    }

    #[test]
    fn strings_round_trip_through_escaping() {
        for s in [
            "",
            "plain",
            "tab\there",
            "ü/../x",
            "😀 smile",
            "\u{0}\u{1f}",
        ] {
            let mut out = Vec::new();
            write_str(s, &mut out);
            assert_eq!(Scanner::new(&out).string().unwrap(), s);
        }
    }

    #[test]
    fn skips_python_values_and_bounds_depth() {
        let text = br#"[{"a": NaN, "b": -Infinity, "c": [1, 2.5e-3, true, null]}]"#;
        let mut s = Scanner::new(text);
        assert_eq!(s.skip_value(0).unwrap(), &text[..]);
        let bomb = "[".repeat(MAX_DEPTH + 5) + &"]".repeat(MAX_DEPTH + 5);
        assert!(Scanner::new(bomb.as_bytes()).skip_value(0).is_err());
        assert!(Scanner::new(b"[1, 2").skip_value(0).is_err());
        assert!(Scanner::new(b"\"\\ud800\"").string().is_err());
    }
}
