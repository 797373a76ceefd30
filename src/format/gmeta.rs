//! gulpio's `.gmeta` meta file: `{id: {"frame_info": [[loc, pad, length], ...],
//! "meta_data": [...]}, ...}` as written by Python's `json.dump` with default settings.
//! We read any such file (keeping each `meta_data` list as its verbatim text) and write files
//! that are byte-identical to what gulpio2 writes for the same content.

use super::json::{write_str, Scanner};
use crate::error::{At, Problem};

/// One video's entry, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    /// `(loc, pad, length)`; `length` includes the padding.
    pub frame_info: Vec<(u64, u64, u64)>,
    /// The JSON text of the `meta_data` list, verbatim (`[]` when the key is absent).
    pub meta_data: Vec<u8>,
    /// The JSON text of the `segments` object of a video stored as segments
    /// (docs/FORMAT.md §6.2), verbatim.
    pub segments: Option<Vec<u8>>,
}

/// Parses a whole `.gmeta`. Duplicate ids are refused: Python's loader would silently keep the
/// last one, which means a damaged or hand-edited file.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, Problem> {
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
                return Err(Problem::at(
                    At::video(entry.id),
                    "the id appears twice in the file",
                ));
            }
            entries.push(entry);
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    if !s.at_end() {
        return Err(s.err("trailing data after the top-level object").into());
    }
    Ok(entries)
}

fn parse_entry(s: &mut Scanner, id: String) -> Result<Entry, Problem> {
    let mut frame_info = None;
    let mut meta_data = None;
    let mut segments = None;
    s.for_each_key(|s, key| -> Result<(), Problem> {
        match key.as_str() {
            "frame_info" => frame_info = Some(parse_frame_info(s)?),
            "meta_data" => {
                if s.peek() != Some(b'[') {
                    return Err(Problem::at(
                        At::video(&id),
                        s.err("meta_data is not a list"),
                    ));
                }
                meta_data = Some(s.skip_value(0)?.to_vec());
            }
            "segments" => segments = Some(s.skip_value(0)?.to_vec()),
            // Unknown keys are tolerated (ignored) so that files extended by other tools
            // still read; gulpio itself never writes any.
            _ => {
                s.skip_value(0)?;
            }
        }
        Ok(())
    })?;
    let Some(frame_info) = frame_info else {
        return Err(Problem::at(At::video(id), "no frame_info"));
    };
    Ok(Entry {
        frame_info,
        meta_data: meta_data.unwrap_or_else(|| b"[]".to_vec()),
        segments,
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
    segments: Option<&[u8]>,
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
    if let Some(segments) = segments {
        out.extend_from_slice(b", \"segments\": ");
        out.extend_from_slice(segments);
    }
    out.push(b'}');
}

/// The `segments` object of a video stored as segments (docs/FORMAT.md §6.2), as Python's
/// `json.dump` writes it: `{"codec": "av1", "width": W, "height": H, "frames": [n0, ...]}`.
pub fn segments_json(
    codec: &str,
    width: u16,
    height: u16,
    frames: impl IntoIterator<Item = usize>,
) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"codec\": ");
    write_str(codec, &mut out);
    let _ = write!(
        out,
        ", \"width\": {width}, \"height\": {height}, \"frames\": ["
    );
    for (k, n) in frames.into_iter().enumerate() {
        if k > 0 {
            out.extend_from_slice(b", ");
        }
        let _ = write!(out, "{n}");
    }
    out.extend_from_slice(b"]}");
    out
}

/// The `segments` object of a `.gmeta` entry (docs/FORMAT.md §6.2), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentsMeta {
    pub codec: String,
    pub width: u64,
    pub height: u64,
    /// Frames in each segment, in order.
    pub frames: Vec<u64>,
}

/// Parses a `segments` object (the verbatim text [`Entry::segments`] keeps). Its four keys
/// may come in any order (another tool may have rewritten the file); other keys are ignored,
/// as in the entry itself.
pub fn parse_segments_json(text: &[u8]) -> Result<SegmentsMeta, String> {
    let mut s = Scanner::new(text);
    let (mut codec, mut width, mut height, mut frames) = (None, None, None, None);
    s.for_each_key(|s, key| -> Result<(), String> {
        match key.as_str() {
            "codec" => codec = Some(s.string()?),
            "width" => width = Some(s.uint()?),
            "height" => height = Some(s.uint()?),
            "frames" => {
                let mut list = Vec::new();
                s.eat(b'[')?;
                if !s.empty_container(b']') {
                    loop {
                        list.push(s.uint()?);
                        if !s.next_or_close(b']')? {
                            break;
                        }
                    }
                }
                frames = Some(list);
            }
            _ => {
                s.skip_value(0)?;
            }
        }
        Ok(())
    })?;
    if !s.at_end() {
        return Err(s.err("trailing data after the segments object"));
    }
    let missing = |k: &str| format!("the segments object has no {k:?}");
    Ok(SegmentsMeta {
        codec: codec.ok_or_else(|| missing("codec"))?,
        width: width.ok_or_else(|| missing("width"))?,
        height: height.ok_or_else(|| missing("height"))?,
        frames: frames.ok_or_else(|| missing("frames"))?,
    })
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
            None,
        );
        let segments = segments_json("av1", 64, 48, [16, 8]);
        write_entry(&mut out, false, "é", [], b"[{}]", Some(&segments));
        finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"v1\": {\"frame_info\": [[0, 3, 632], [632, 1, 12]], \"meta_data\": [{\"l\": 1}]}, \
             \"\\u00e9\": {\"frame_info\": [], \"meta_data\": [{}], \"segments\": {\"codec\": \
             \"av1\", \"width\": 64, \"height\": 48, \"frames\": [16, 8]}}}"
        );
        let back = parse(text.as_bytes()).unwrap();
        assert_eq!(back[0].segments, None);
        assert_eq!(back[1].segments.as_deref(), Some(segments.as_slice()));
        let parsed = parse_segments_json(&segments).unwrap();
        assert_eq!(
            parsed,
            SegmentsMeta {
                codec: "av1".into(),
                width: 64,
                height: 48,
                frames: vec![16, 8]
            }
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

    mod generated {
        //! Generated `.gmeta` documents (not random text): each parses back to what was
        //! generated, whatever the escaping of ids, the whitespace, the key order and the
        //! metadata values (NaN, Infinity, floats, nested lists and objects, strings).
        use super::super::*;
        use crate::format::json::write_str;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Value {
            Null,
            Bool(bool),
            Int(i64),
            Float(f64),
            Str(String),
            List(Vec<Value>),
            Object(Vec<(String, Value)>),
        }

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::Int),
                prop_oneof![
                    any::<f64>(),
                    Just(f64::NAN),
                    Just(f64::INFINITY),
                    Just(f64::NEG_INFINITY),
                    Just(-0.0),
                    Just(1e-7),
                ]
                .prop_map(Value::Float),
                any::<String>().prop_map(Value::Str),
            ];
            leaf.prop_recursive(4, 32, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::List),
                    prop::collection::vec((any::<String>(), inner), 0..5).prop_map(Value::Object),
                ]
            })
        }

        /// Whitespace JSON allows between tokens: usually json.dump's, sometimes more.
        fn ws() -> impl Strategy<Value = &'static str> {
            prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n  "), 1 => Just("\t\r\n")]
        }

        /// A string as `json.dumps` writes it (ASCII, `\uXXXX` escapes) or with
        /// `ensure_ascii=False` (UTF-8, only quotes, backslashes and controls escaped; `/`
        /// sometimes escaped, as other writers do).
        fn render_str(s: &str, ascii: bool, out: &mut Vec<u8>) {
            if ascii {
                return write_str(s, out);
            }
            out.push(b'"');
            for c in s.chars() {
                match c {
                    '"' => out.extend_from_slice(b"\\\""),
                    '\\' => out.extend_from_slice(b"\\\\"),
                    '/' => out.extend_from_slice(b"\\/"),
                    c if (c as u32) < 0x20 => {
                        out.extend_from_slice(format!("\\u{:04X}", c as u32).as_bytes())
                    }
                    c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            out.push(b'"');
        }

        fn render(v: &Value, ws: &str, ascii: bool, out: &mut Vec<u8>) {
            match v {
                Value::Null => out.extend_from_slice(b"null"),
                Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
                Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
                // Python's spellings of the non-finite floats.
                Value::Float(f) if f.is_nan() => out.extend_from_slice(b"NaN"),
                Value::Float(f) if f.is_infinite() => {
                    out.extend_from_slice(if *f > 0.0 { b"Infinity" } else { b"-Infinity" })
                }
                Value::Float(f) => out.extend_from_slice(format!("{f:?}").as_bytes()),
                Value::Str(s) => render_str(s, ascii, out),
                Value::List(items) => {
                    out.push(b'[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(b",");
                            out.extend_from_slice(ws.as_bytes());
                        }
                        render(item, ws, ascii, out);
                    }
                    out.push(b']');
                }
                Value::Object(fields) => {
                    out.push(b'{');
                    for (i, (k, item)) in fields.iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        render_str(k, ascii, out);
                        out.extend_from_slice(b":");
                        out.extend_from_slice(ws.as_bytes());
                        render(item, ws, ascii, out);
                    }
                    out.push(b'}');
                }
            }
        }

        #[derive(Debug, Clone)]
        struct Video {
            id: String,
            frame_info: Vec<(u64, u64, u64)>,
            /// `None`: no `meta_data` key (reads as `[]`).
            meta: Option<Vec<Value>>,
            meta_first: bool,
            extra_key: bool,
        }

        fn frame() -> impl Strategy<Value = (u64, u64, u64)> {
            (any::<u64>(), 0u64..=3, any::<u64>())
                .prop_map(|(loc, pad, len)| (loc, pad, len.max(pad)))
        }

        fn video() -> impl Strategy<Value = Video> {
            (
                any::<String>(),
                prop::collection::vec(frame(), 0..6),
                prop::option::weighted(0.9, prop::collection::vec(value(), 0..4)),
                any::<bool>(),
                prop::bool::weighted(0.1),
            )
                .prop_map(|(id, frame_info, meta, meta_first, extra_key)| Video {
                    id,
                    frame_info,
                    meta,
                    meta_first,
                    extra_key,
                })
        }

        /// The document and, per video, the exact text its `meta_data` must read back as.
        fn document(videos: &[Video], ws: &str, ascii: bool) -> (Vec<u8>, Vec<Vec<u8>>) {
            let mut out = b"{".to_vec();
            let mut metas = Vec::new();
            for (i, v) in videos.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b",");
                    out.extend_from_slice(ws.as_bytes());
                }
                render_str(&v.id, ascii, &mut out);
                out.extend_from_slice(b": {");
                let mut fi = b"\"frame_info\": [".to_vec();
                for (k, (loc, pad, len)) in v.frame_info.iter().enumerate() {
                    if k > 0 {
                        fi.extend_from_slice(b", ");
                    }
                    fi.extend_from_slice(format!("[{loc},{ws}{pad}, {len}{ws}]").as_bytes());
                }
                fi.extend_from_slice(b"]");
                let mut meta_text = Vec::new();
                render(
                    &Value::List(v.meta.clone().unwrap_or_default()),
                    ws,
                    ascii,
                    &mut meta_text,
                );
                let mut md = b"\"meta_data\":".to_vec();
                md.extend_from_slice(ws.as_bytes());
                md.extend_from_slice(&meta_text);
                let mut fields = vec![fi];
                if v.meta.is_some() {
                    fields.insert(if v.meta_first { 0 } else { 1 }, md);
                }
                if v.extra_key {
                    // Keys other tools may add are skipped, whatever their value.
                    fields.push(b"\"note\": {\"a\": [NaN, -Infinity, \"}\"]}".to_vec());
                }
                out.extend_from_slice(&fields.join(&b", "[..]));
                out.extend_from_slice(ws.as_bytes());
                out.extend_from_slice(b"}");
                metas.push(if v.meta.is_some() {
                    meta_text
                } else {
                    b"[]".to_vec()
                });
            }
            out.extend_from_slice(ws.as_bytes());
            out.extend_from_slice(b"}\n");
            (out, metas)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn parses_back_what_was_generated(
                videos in prop::collection::vec(video(), 0..6),
                ws in ws(),
                ascii in any::<bool>(),
            ) {
                // Ids are unique in a valid file (duplicates are refused; tested elsewhere).
                let mut seen = std::collections::HashSet::new();
                let videos: Vec<Video> =
                    videos.into_iter().filter(|v| seen.insert(v.id.clone())).collect();
                let (text, metas) = document(&videos, ws, ascii);
                let parsed = parse(&text).map_err(|e| {
                    TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&text)))
                })?;
                prop_assert_eq!(parsed.len(), videos.len());
                for ((entry, video), meta) in parsed.iter().zip(&videos).zip(&metas) {
                    prop_assert_eq!(&entry.id, &video.id);
                    prop_assert_eq!(&entry.frame_info, &video.frame_info);
                    prop_assert_eq!(&entry.meta_data, meta);
                }
            }

            #[test]
            fn what_we_write_parses_back(videos in prop::collection::vec(video(), 0..6)) {
                let mut seen = std::collections::HashSet::new();
                let videos: Vec<Video> =
                    videos.into_iter().filter(|v| seen.insert(v.id.clone())).collect();
                let mut out = Vec::new();
                begin(&mut out);
                let mut metas = Vec::new();
                for (i, v) in videos.iter().enumerate() {
                    let mut meta = Vec::new();
                    render(&Value::List(v.meta.clone().unwrap_or_default()), " ", true, &mut meta);
                    write_entry(
                        &mut out,
                        i == 0,
                        &v.id,
                        v.frame_info.iter().copied(),
                        &meta,
                        None,
                    );
                    metas.push(meta);
                }
                finish(&mut out);
                let parsed = parse(&out).map_err(|p| TestCaseError::fail(p.to_string()))?;
                prop_assert_eq!(parsed.len(), videos.len());
                for ((entry, video), meta) in parsed.iter().zip(&videos).zip(&metas) {
                    prop_assert_eq!(&entry.id, &video.id);
                    prop_assert_eq!(&entry.frame_info, &video.frame_info);
                    prop_assert_eq!(&entry.meta_data, meta);
                }
            }
        }
    }

    #[test]
    fn segments_objects_parse_in_any_key_order_and_need_every_key() {
        let got = parse_segments_json(
            br#"{"frames": [], "x": {"y": [1]}, "height": 2, "codec": "av1", "width": 3}"#,
        )
        .unwrap();
        assert_eq!((got.width, got.height, got.frames.len()), (3, 2, 0));
        for bad in [
            &br#"{"codec": "av1", "width": 3, "height": 2}"#[..],
            br#"{"codec": 1, "width": 3, "height": 2, "frames": []}"#,
            br#"{"codec": "av1", "width": -3, "height": 2, "frames": []}"#,
            br#"{"codec": "av1", "width": 3, "height": 2, "frames": [1.5]}"#,
            br#"{"codec": "av1", "width": 3, "height": 2, "frames": []} x"#,
            br#"[]"#,
        ] {
            assert!(
                parse_segments_json(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
