//! gulpio's `.gmeta` meta file: `{id: {"frame_info": [[loc, pad, length], ...],
//! "meta_data": [...]}, ...}` as written by Python's `json.dump` with default settings.
//! We read any such file (keeping each `meta_data` list as its verbatim text) and write files
//! that are byte-identical to what gulpio2 writes for the same content.

use super::json::{write_str, Scanner};

/// One video's entry, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    /// `(loc, pad, length)`; `length` includes the padding.
    pub frame_info: Vec<(u64, u64, u64)>,
    /// The JSON text of the `meta_data` list, verbatim (`[]` when the key is absent).
    pub meta_data: Vec<u8>,
}

/// Parses a whole `.gmeta`. Duplicate ids are refused: Python's loader would silently keep the
/// last one, which means a damaged or hand-edited file.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, String> {
    let mut s = Scanner::new(text);
    let mut entries = Vec::new();
    let mut seen = std::collections::HashSet::new();
    s.eat(b'{')?;
    if !s.empty_container(b'}') {
        loop {
            s.skip_ws();
            let id = s.string()?;
            s.eat(b':')?;
            let entry = parse_entry(&mut s, id)?;
            if !seen.insert(entry.id.clone()) {
                return Err(format!("duplicate video id {:?}", entry.id));
            }
            entries.push(entry);
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    if !s.at_end() {
        return Err(s.err("trailing data after the top-level object"));
    }
    Ok(entries)
}

fn parse_entry(s: &mut Scanner, id: String) -> Result<Entry, String> {
    let mut frame_info = None;
    let mut meta_data = None;
    s.eat(b'{')?;
    if !s.empty_container(b'}') {
        loop {
            s.skip_ws();
            let key = s.string()?;
            s.eat(b':')?;
            match key.as_str() {
                "frame_info" => frame_info = Some(parse_frame_info(s)?),
                "meta_data" => {
                    if s.peek() != Some(b'[') {
                        return Err(s.err(&format!("meta_data of {id:?} is not a list")));
                    }
                    meta_data = Some(s.skip_value(0)?.to_vec());
                }
                // Unknown keys are tolerated (ignored) so that files extended by other tools
                // still read; gulpio itself never writes any.
                _ => {
                    s.skip_value(0)?;
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    Ok(Entry {
        frame_info: frame_info.ok_or_else(|| format!("video {id:?} has no frame_info"))?,
        meta_data: meta_data.unwrap_or_else(|| b"[]".to_vec()),
        id,
    })
}

fn parse_frame_info(s: &mut Scanner) -> Result<Vec<(u64, u64, u64)>, String> {
    let mut out = Vec::new();
    s.eat(b'[')?;
    if s.empty_container(b']') {
        return Ok(out);
    }
    loop {
        s.eat(b'[')?;
        let loc = s.uint()?;
        s.eat(b',')?;
        let pad = s.uint()?;
        s.eat(b',')?;
        let length = s.uint()?;
        s.eat(b']')?;
        if pad > 3 || pad > length {
            return Err(s.err(&format!(
                "frame_info [{loc}, {pad}, {length}]: pad must be at most 3 and at most length"
            )));
        }
        out.push((loc, pad, length));
        if !s.next_or_close(b']')? {
            return Ok(out);
        }
    }
}

/// Starts a meta file; call [`write_entry`] per video, then [`finish`].
pub fn begin(out: &mut Vec<u8>) {
    out.push(b'{');
}

/// Appends one entry exactly as `json.dump` lays it out (`", "` and `": "` separators).
pub fn write_entry(
    out: &mut Vec<u8>,
    first: bool,
    id: &str,
    frame_info: impl IntoIterator<Item = (u64, u64, u64)>,
    meta_data: &[u8],
) {
    use std::io::Write;
    if !first {
        out.extend_from_slice(b", ");
    }
    write_str(id, out);
    out.extend_from_slice(b": {\"frame_info\": [");
    for (k, (loc, pad, length)) in frame_info.into_iter().enumerate() {
        if k > 0 {
            out.extend_from_slice(b", ");
        }
        // Writing into a Vec cannot fail.
        let _ = write!(out, "[{loc}, {pad}, {length}]");
    }
    out.extend_from_slice(b"], \"meta_data\": ");
    out.extend_from_slice(meta_data);
    out.push(b'}');
}

pub fn finish(out: &mut Vec<u8>) {
    out.push(b'}');
}

/// Appends one more element to a `meta_data` list text (gulpio's behaviour when an id is
/// appended to twice): `[a]` + `b` gives `[a, b]`.
pub fn push_meta_element(list: &[u8], element: &[u8]) -> Vec<u8> {
    let trimmed = list.trim_ascii_end();
    let body = trimmed.strip_suffix(b"]").unwrap_or(trimmed);
    let mut out = body.to_vec();
    if body.trim_ascii() != b"[" {
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(element);
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_like_python_json_dump() {
        let mut out = Vec::new();
        begin(&mut out);
        write_entry(
            &mut out,
            true,
            "v1",
            [(0, 3, 632), (632, 1, 12)],
            b"[{\"l\": 1}]",
        );
        write_entry(&mut out, false, "é", [], b"[{}]");
        finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"v1\": {\"frame_info\": [[0, 3, 632], [632, 1, 12]], \"meta_data\": [{\"l\": 1}]}, \
             \"\\u00e9\": {\"frame_info\": [], \"meta_data\": [{}]}}"
        );
    }

    #[test]
    fn parses_what_it_writes_and_python_extensions() {
        let text = br#"{"a": {"frame_info": [[0, 0, 8], [8, 2, 12]], "meta_data": [{"x": NaN}]},
                        "b": {"meta_data": [], "frame_info": []}}"#;
        let e = parse(text).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].frame_info, vec![(0, 0, 8), (8, 2, 12)]);
        assert_eq!(e[0].meta_data, br#"[{"x": NaN}]"#.to_vec());
        assert_eq!(e[1].id, "b");
        assert_eq!(parse(b"{}").unwrap(), vec![]);
    }

    #[test]
    fn rejects_damage() {
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\": {\"frame_info\": [[0, 0]]}}",
            b"{\"a\": {\"frame_info\": [[0, 9, 12]]}}",
            b"{\"a\": {\"frame_info\": [[-1, 0, 4]]}}",
            b"{\"a\": {\"frame_info\": []}, \"a\": {\"frame_info\": []}}",
            b"{\"a\": {\"meta_data\": []}}",
            b"{} x",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn meta_elements_append() {
        assert_eq!(push_meta_element(b"[]", b"{}"), b"[{}]".to_vec());
        assert_eq!(
            push_meta_element(b"[{\"a\": 1}]", b"{}"),
            b"[{\"a\": 1}, {}]".to_vec()
        );
    }
}
