//! Finding a value in a text whatever way it travelled there, to blank it
//! out: what Toolshed keeps of a call (`$env` secrets, the values of arguments
//! marked sensitive) and what `$fetch` hands back of an outbound-only secret.
//!
//! A copy is found as it is, percent-encoded (any of its characters, hex in
//! either case, `+` for a space as forms write it), JSON-escaped (`\"`, `\/`,
//! `\u00e9`, surrogate pairs), in base64 (standard or URL-safe, padded or
//! not, alone or inside a longer base64 text such as `user:password`), and in
//! these within one another (base64 in a query, JSON in a form field). The
//! text is decoded into views whose bytes remember where they came from, so
//! what is replaced is the copy as the text holds it; each is searched with
//! `memchr`'s substring search, so the cost stays linear in the text.

use std::borrow::Cow;
use std::ops::Range;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use memchr::memmem;

/// Values shorter than this (in characters) are not looked for: they would
/// blank out ordinary text, and are not secrets worth the name.
const SHORTEST: usize = 4;

/// Replaces every copy of each of `values` in `text` with `marker` (a text
/// holding none is left as it is, not copied).
pub fn blank_out(text: &mut String, values: &[&str], marker: &str) {
    let copies = copies(text, values);
    if copies.is_empty() {
        return;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for copy in copies {
        out.push_str(&text[at..copy.start]);
        out.push_str(marker);
        at = copy.end;
    }
    out.push_str(&text[at..]);
    *text = out;
}

/// Where `text` holds a copy of one of `values`: in order, disjoint, on
/// character boundaries.
fn copies(text: &str, values: &[&str]) -> Vec<Range<usize>> {
    let forms: Vec<Vec<u8>> = values.iter().filter(|v| v.chars().count() >= SHORTEST).flat_map(|v| forms(v)).collect();
    if forms.is_empty() {
        return Vec::new();
    }
    // Views index the text with `u32`s; a longer text (none a run makes) is searched as it is.
    let decodable = u32::try_from(text.len()).is_ok();
    let mut found = Vec::new();
    let mut search = |view: &View<'_>| {
        find_in(view, &forms, &mut found);
        // JSON strings within the view (a query's JSON, once percent-decoded).
        if decodable && memchr::memchr(b'\\', &view.bytes).is_some() {
            find_in(&view.decoded(json), &forms, &mut found);
        }
    };
    let raw = View::of(text);
    search(&raw);
    // One decoding at a time: a view costs five bytes a byte of text.
    for (decode, sign) in [(percent as fn(&[u8]) -> Option<Step>, '%'), (form, '+')] {
        if decodable && text.contains(sign) {
            search(&raw.decoded(decode));
        }
    }
    merged(text, found)
}

/// Adds where `view` holds one of `forms`, as ranges of the text, to `found`.
fn find_in(view: &View<'_>, forms: &[Vec<u8>], found: &mut Vec<Range<usize>>) {
    for form in forms {
        found.extend(memmem::find_iter(&view.bytes, form).map(|at| view.origin(at..at + form.len())));
    }
}

/// What a value is looked for as in every view: its bytes, and its base64
/// encodings. Inside a longer base64 text the value starts at one of three
/// offsets of a 3-byte group; at each, the characters that encode its bits
/// alone are the same whatever surrounds it (the one or two characters
/// shared with a neighbour's bits are left, each telling at most 4 bits).
fn forms(value: &str) -> Vec<Vec<u8>> {
    let bytes = value.as_bytes();
    let mut forms = vec![bytes.to_vec()];
    for (padded, unpadded) in [(STANDARD, STANDARD_NO_PAD), (URL_SAFE, URL_SAFE_NO_PAD)] {
        forms.push(padded.encode(bytes).into_bytes());
        forms.push(unpadded.encode(bytes).into_bytes());
        for offset in 0..3 {
            let shifted: Vec<u8> = std::iter::repeat_n(0, offset).chain(bytes.iter().copied()).collect();
            let encoded = unpadded.encode(&shifted).into_bytes();
            // Character i holds bits 6i..6i+6; the value's are 8·offset..8·(offset+len).
            let (first, end) = ((8 * offset).div_ceil(6), 8 * (offset + bytes.len()) / 6);
            forms.push(encoded[first..end].to_vec());
        }
    }
    forms.retain(|f| !f.is_empty());
    forms.sort_unstable();
    forms.dedup();
    forms
}

/// A text, or a decoding of it whose bytes each remember where in the text
/// the step that made them starts. A step's bytes share their start, and a
/// step ends where the next one starts, so that is all there is to keep.
struct View<'t> {
    bytes: Cow<'t, [u8]>,
    /// Per byte, its step's start in the text; `None`: this is the text.
    starts: Option<Vec<u32>>,
    text_len: usize,
}

impl<'t> View<'t> {
    fn of(text: &'t str) -> Self {
        Self { bytes: Cow::Borrowed(text.as_bytes()), starts: None, text_len: text.len() }
    }

    fn start(&self, at: usize) -> usize {
        match &self.starts {
            None => at,
            Some(starts) => starts[at] as usize,
        }
    }

    /// The range of the text that bytes `range` of this view stand for.
    fn origin(&self, range: Range<usize>) -> Range<usize> {
        let last = self.start(range.end - 1);
        let end = (range.end..self.bytes.len()).map(|at| self.start(at)).find(|&s| s != last).unwrap_or(self.text_len);
        self.start(range.start)..end
    }

    /// This view with each sequence `decode` recognises replaced by what it
    /// stands for; for a text whose length fits in a `u32`.
    fn decoded(&self, decode: fn(&[u8]) -> Option<Step>) -> View<'static> {
        let (mut bytes, mut starts) = (Vec::with_capacity(self.bytes.len()), Vec::with_capacity(self.bytes.len()));
        let mut at = 0;
        while at < self.bytes.len() {
            let step = decode(&self.bytes[at..]).unwrap_or(Step::byte(self.bytes[at], 1));
            let start = self.start(at) as u32;
            for &b in &step.out[..step.len] {
                bytes.push(b);
                starts.push(start);
            }
            at += step.used;
        }
        View { bytes: Cow::Owned(bytes), starts: Some(starts), text_len: self.text_len }
    }
}

/// What a decoder makes of the start of a text: up to four bytes, standing
/// for its first `used` bytes.
struct Step {
    out: [u8; 4],
    len: usize,
    used: usize,
}

impl Step {
    fn byte(b: u8, used: usize) -> Self {
        Self { out: [b, 0, 0, 0], len: 1, used }
    }
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

/// `%XX`, either case.
fn percent(text: &[u8]) -> Option<Step> {
    match text {
        [b'%', high, low, ..] => Some(Step::byte(hex(*high)? << 4 | hex(*low)?, 3)),
        _ => None,
    }
}

/// `%XX`, and `+` for a space.
fn form(text: &[u8]) -> Option<Step> {
    match text {
        [b'+', ..] => Some(Step::byte(b' ', 1)),
        _ => percent(text),
    }
}

/// A JSON string's escapes: `\"`, `\\`, `\/`, the control letters, `\uXXXX`
/// (a surrogate pair as one character).
fn json(text: &[u8]) -> Option<Step> {
    let [b'\\', escape, ..] = text else { return None };
    let byte = match escape {
        b'"' | b'\\' | b'/' => *escape,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => return unicode_escape(text),
        _ => return None,
    };
    Some(Step::byte(byte, 2))
}

fn unicode_escape(text: &[u8]) -> Option<Step> {
    let unit = |at: usize| text.get(at..at + 4)?.iter().try_fold(0u32, |n, d| Some(n << 4 | u32::from(hex(*d)?)));
    let first = unit(2)?;
    let (c, used) = match first {
        0xd800..=0xdbff if text.get(6..8) == Some(&b"\\u"[..]) => {
            let second = unit(8).filter(|u| (0xdc00..=0xdfff).contains(u))?;
            (char::from_u32(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00))?, 12)
        }
        // A lone surrogate is no character: left as it is.
        _ => (char::from_u32(first)?, 6),
    };
    let mut out = [0; 4];
    let len = c.encode_utf8(&mut out).len();
    Some(Step { out, len, used })
}

/// `found` in order, overlapping ranges joined. Views never split a
/// character, but a range is widened to character boundaries all the same:
/// slicing the text inside one would panic.
fn merged(text: &str, mut found: Vec<Range<usize>>) -> Vec<Range<usize>> {
    found.sort_unstable_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<usize>> = Vec::with_capacity(found.len());
    for mut r in found {
        while !text.is_char_boundary(r.start) {
            r.start -= 1;
        }
        while !text.is_char_boundary(r.end) {
            r.end += 1;
        }
        match out.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changes under every encoding: a space, `&`, `/`, `"`, `+`, non-ASCII.
    const VALUE: &str = "k-1 2&3/4\"ö+é";

    /// As `encodeURIComponent` writes it: all but `A-Z a-z 0-9 - _ . ! ~ * ' ( )`.
    fn uri_component(value: &str, lower: bool) -> String {
        value
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')' => {
                    char::from(b).to_string()
                }
                _ if lower => format!("%{b:02x}"),
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    fn blanked(text: &str) -> String {
        let mut text = text.to_owned();
        blank_out(&mut text, &[VALUE], "[redacted]");
        text
    }

    #[test]
    fn a_value_is_found_in_every_encoding_it_travels_in() {
        let json = serde_json::to_string(VALUE).unwrap();
        let json = json.trim_matches('"');
        let ascii_json: String =
            VALUE.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_string() } else { format!("\\u{:04X}", c as u32) }).collect();
        let query = url::Url::parse(&format!("http://h/?k={VALUE}")).unwrap();
        let copies = [
            VALUE.to_owned(),
            uri_component(VALUE, false),
            uri_component(VALUE, true),
            url::form_urlencoded::byte_serialize(VALUE.as_bytes()).collect(),
            query.query().unwrap().strip_prefix("k=").unwrap().to_owned(),
            json.to_owned(),
            json.replace('/', "\\/"),
            ascii_json,
            STANDARD.encode(VALUE),
            STANDARD_NO_PAD.encode(VALUE),
            URL_SAFE.encode(VALUE),
            URL_SAFE_NO_PAD.encode(VALUE),
            uri_component(&STANDARD.encode(VALUE), false),
            uri_component(&serde_json::json!({ "key": VALUE }).to_string(), false),
        ];
        for copy in copies {
            let text = format!("<{copy}>");
            let expected = match copy.starts_with("%7B") {
                // A JSON document in a query: the value inside it goes, the rest stays.
                true => format!("<{}[redacted]{}>", uri_component("{\"key\":\"", false), uri_component("\"}", false)),
                false => "<[redacted]>".to_owned(),
            };
            assert_eq!(blanked(&text), expected, "{copy}");
        }
    }

    #[test]
    fn a_value_inside_a_longer_base64_text_is_found_at_any_offset() {
        for prefix in ["", "u", "us", "user:"] {
            for engine in [STANDARD, URL_SAFE] {
                let encoded = engine.encode(format!("{prefix}{VALUE}"));
                let kept = blanked(&encoded);
                assert!(kept.contains("[redacted]"), "{prefix}: {kept}");
                // What is left is the prefix's own characters, plus at most one shared with the value at each end.
                let left = kept.replace("[redacted]", "");
                assert!(left.len() <= prefix.len().div_ceil(3) * 4 + 4, "{prefix}: {kept}");
                assert!(kept.starts_with(&encoded[..prefix.len() * 8 / 6]), "{prefix}: {kept}");
            }
        }
    }

    #[test]
    fn text_without_a_copy_is_left_as_it_is_and_short_values_are_not_looked_for() {
        for text in ["k-1 2&3/4", "%6b-1%202", "a \\u00f6 b", "ordinary text"] {
            assert_eq!(blanked(text), text);
        }
        let mut text = "a pin 123 in text".to_owned();
        blank_out(&mut text, &["123"], "[redacted]");
        assert_eq!(text, "a pin 123 in text");
        blank_out(&mut text, &["pin 12", "n 123"], "[redacted]");
        assert_eq!(text, "a [redacted] in text", "overlapping copies become one");
    }

    #[test]
    fn json_escapes_stand_for_their_characters_surrogate_pairs_included() {
        let mut text = "é\\u00e9x\\ud83d\\ude00 done".to_owned();
        blank_out(&mut text, &["ééx😀"], "#");
        assert_eq!(text, "# done");
    }
}
