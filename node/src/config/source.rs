//! Readers that turn config text into `(key, value, line)` entries, before any key is
//! interpreted.
//!
//! - Properties: Java `Properties.load` rules (`key=value`, `key: value` or `key value`;
//!   `#`/`!` comments; a trailing `\` continues the line; `\t \n \r \f \uXXXX` escapes),
//!   except that values are trimmed at both ends.
//!   Read here: Java's rules fit in a hundred lines, and the values' trimming and the
//!   escape errors are ringmq's own (tests pin them).
//! - TOML: parsed by the `toml` crate (full TOML syntax, its messages for syntax errors).
//!   A config is flat: top-level `key = value` with strings, integers (any TOML notation,
//!   handed on in decimal), booleans, or arrays of those. Tables, dotted keys, inline
//!   tables, floats and dates are refused with a clear error rather than misread.
//! - `--set KEY=VALUE` overrides: taken as a properties line's key and value would be, so a
//!   key is judged the same from the flag as from a file.
//!
//! Invariant: every entry keeps the 1-based line its key starts on, for error messages.

use std::collections::BTreeMap;

use toml::Spanned;

use super::{ConfigError, Format};

/// One `key = value` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub key: String,
    pub value: Value,
    pub line: usize,
}

/// A raw value: text, or (TOML only) a list of texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Value {
    Text(String),
    List(Vec<String>),
}

/// Splits `text` into entries in file order.
pub(super) fn read(text: &str, format: Format, origin: &str) -> Result<Vec<Entry>, ConfigError> {
    match format {
        Format::Properties => read_properties(text, origin),
        Format::Toml => read_toml(text, origin),
    }
}

/// Command-line overrides (`--set KEY=VALUE`, one per item) as entries, in order. They carry
/// no line (0): errors and reports name `origin` (the flag) alone. Key and value are trimmed,
/// as a properties line's are; the value is taken as written (no escapes: the shell already
/// had its turn).
pub(super) fn overrides(sets: &[String], origin: &str) -> Result<Vec<Entry>, ConfigError> {
    sets.iter()
        .map(|s| match s.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => Ok(Entry {
                key: key.trim().to_owned(),
                value: Value::Text(value.trim().to_owned()),
                line: 0,
            }),
            _ => Err(syntax(origin, 0, format!("expected KEY=VALUE, got {s:?}"))),
        })
        .collect()
}

fn syntax(origin: &str, line: usize, detail: impl Into<String>) -> ConfigError {
    ConfigError::Syntax {
        origin: origin.to_owned(),
        line,
        detail: detail.into(),
    }
}

// ----------------------------------------------------------------------------------------
// Properties
// ----------------------------------------------------------------------------------------

fn read_properties(text: &str, origin: &str) -> Result<Vec<Entry>, ConfigError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut entries = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i + 1;
        let first = lines[i].trim_start_matches([' ', '\t', '\x0c']);
        i += 1;
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = first.to_owned();
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.get(i) {
                Some(next) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
            i += 1;
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|d| syntax(origin, line_no, d))?;
        let value = unescape(value).map_err(|d| syntax(origin, line_no, d))?;
        entries.push(Entry {
            key,
            value: Value::Text(value.trim().to_owned()),
            line: line_no,
        });
    }
    Ok(entries)
}

/// A line continues when it ends in an odd number of backslashes.
fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace (Java's rule), eating the
/// separator and the whitespace around it.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut end = bytes.len();
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if matches!(b, b'=' | b':' | b' ' | b'\t' | b'\x0c') {
            end = i;
            break;
        }
    }
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                out.push(hex_to_char(&hex)?);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

fn hex_to_char(hex: &str) -> Result<char, String> {
    if hex.chars().count() != 4 {
        return Err(format!("escape needs 4 hex digits, got {hex:?}"));
    }
    u32::from_str_radix(hex, 16)
        .ok()
        .and_then(char::from_u32)
        .ok_or_else(|| format!("bad unicode escape {hex:?}"))
}

// ----------------------------------------------------------------------------------------
// TOML (the `toml` crate, flat documents)
// ----------------------------------------------------------------------------------------

const TOML_SUBSET: &str =
    "ringmq reads flat TOML: top-level `key = value` with strings, integers, booleans or arrays of those";

/// The document's top-level keys with their values, each with its byte range in the text.
type Document = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

fn read_toml(text: &str, origin: &str) -> Result<Vec<Entry>, ConfigError> {
    let doc: Document = match toml::from_str(text) {
        Ok(doc) => doc,
        Err(e) => return Err(toml_error(text, origin, &e)),
    };
    // The map is ordered by key; entries go in file order.
    let mut pairs: Vec<_> = doc.into_iter().collect();
    pairs.sort_by_key(|(k, _)| k.span().start);
    pairs
        .into_iter()
        .map(|(key, value)| {
            let line = line_of(text, key.span().start);
            let value = flat_value(text, line, &value).map_err(|d| syntax(origin, line, d))?;
            Ok(Entry {
                key: key.into_inner(),
                value,
                line,
            })
        })
        .collect()
}

/// The parser's message at its line. A document that is valid TOML but could not be read
/// with spans has a dotted key (the parser keeps no span for those): said so, with the
/// whole key to quote, at the first line that names it.
fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    if let Ok(table) = toml::from_str::<toml::Table>(text) {
        if let Some((key, value)) = table.iter().find(|(_, v)| v.is_table()) {
            let mut path = key.clone();
            let mut v = value;
            while let Some((k, inner)) = v.as_table().and_then(|t| t.iter().next()) {
                path = format!("{path}.{k}");
                v = inner;
            }
            let starts = |l: &str| {
                let l: String = l.split_whitespace().collect();
                [
                    format!("{key}."),
                    format!("\"{key}\"."),
                    format!("'{key}'."),
                ]
                .iter()
                .any(|p| l.starts_with(p.as_str()) || l.starts_with(&format!("[{p}")))
            };
            let line = text.lines().position(starts).map_or(0, |i| i + 1);
            return syntax(
                origin,
                line,
                format!(
                    "dotted keys and tables are not supported: quote the whole key, \"{path}\" = ...; {TOML_SUBSET}"
                ),
            );
        }
    }
    let line = e.span().map_or(0, |s| line_of(text, s.start));
    let mut detail = e.message().trim_end().replace('\n', "; ");
    // RocketMQ's `deleteWhen=04` written as TOML: say what to do.
    let value = text
        .lines()
        .nth(line.saturating_sub(1))
        .and_then(|l| l.split_once('='))
        .map(|(_, v)| {
            v.trim()
                .split([' ', '\t', ',', '#'])
                .next()
                .unwrap_or_default()
        });
    if let Some(v) = value.filter(|v| {
        let digits = v.trim_start_matches(['+', '-']);
        digits.len() > 1
            && digits.starts_with('0')
            && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    }) {
        detail = format!("leading zeros are not allowed in TOML integers; quote it: \"{v}\"");
    }
    syntax(origin, line, detail)
}

/// The 1-based line holding byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// A value as the key tables take it: text (integers in decimal, booleans as `true`/`false`)
/// or a list of those. Floats, dates and tables are refused rather than misread.
fn flat_value(text: &str, line: usize, v: &Spanned<toml::Value>) -> Result<Value, String> {
    let written = || text.get(v.span()).unwrap_or_default();
    let unsupported = || format!("unsupported value {:?}; {TOML_SUBSET}", written());
    match v.get_ref() {
        toml::Value::Array(items) => items
            .iter()
            .map(|i| scalar(i).ok_or_else(unsupported))
            .collect::<Result<_, _>>()
            .map(Value::List),
        toml::Value::Table(_) => {
            let key_line = text.lines().nth(line - 1).unwrap_or_default();
            Err(if key_line.trim_start().starts_with('[') {
                format!("tables are not supported; {TOML_SUBSET}")
            } else {
                format!("inline tables are not supported; {TOML_SUBSET}")
            })
        }
        other => scalar(other).map(Value::Text).ok_or_else(unsupported),
    }
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Vec<(String, String)> {
        read(text, Format::Properties, "t")
            .unwrap()
            .into_iter()
            .map(|e| match e.value {
                Value::Text(v) => (e.key, v),
                Value::List(_) => panic!("list from properties"),
            })
            .collect()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn properties_separators_comments_and_trimming() {
        let text = "# comment\n! also\n\n  a=1\nb = 2  \nc:3\nd 4\ne\nf=\n\tg\t=\t x y \n";
        assert_eq!(
            props(text),
            vec![
                kv("a", "1"),
                kv("b", "2"),
                kv("c", "3"),
                kv("d", "4"),
                kv("e", ""),
                kv("f", ""),
                kv("g", "x y")
            ]
        );
    }

    #[test]
    fn properties_continuation_and_escapes() {
        let text = "namesrvAddr=h1:9876;\\\n    h2:9876\nk\\=x=v\\u0041\\t.\npath=C:\\\\dir\\\\\n";
        assert_eq!(
            props(text),
            vec![
                kv("namesrvAddr", "h1:9876;h2:9876"),
                kv("k=x", "vA\t."),
                kv("path", "C:\\dir\\")
            ]
        );
    }

    #[test]
    fn properties_line_numbers_and_crlf() {
        let entries = read(
            "a=1\r\n\r\n# x\r\nb=2\\\r\n  3\r\nc=4",
            Format::Properties,
            "t",
        )
        .unwrap();
        let lines: Vec<_> = entries.iter().map(|e| (e.key.as_str(), e.line)).collect();
        assert_eq!(lines, vec![("a", 1), ("b", 4), ("c", 6)]);
        assert_eq!(entries[1].value, Value::Text("23".to_owned()));
    }

    #[test]
    fn properties_bad_unicode_escape_is_an_error() {
        let err = read("a=\\u12", Format::Properties, "f.properties").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f.properties:1: escape needs 4 hex digits, got \"12\""
        );
    }

    #[test]
    fn toml_scalars_arrays_and_comments() {
        let text = r#"
# broker
brokerName = "broker-a"   # trailing comment
brokerId = 0
listenPort = 10_911
pinCores = false
deleteWhen = '04'
"quoted-key" = "a\"b\u0041"
namesrvAddr = ["h1:9876", "h2:9876",]
hex = 0x1F
messageDelayLevel = [
    "1s",
    "5s",
]
long = """
x"""
"#;
        let entries = read(text, Format::Toml, "t").unwrap();
        let got: Vec<_> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.clone(), e.line))
            .collect();
        let text_value = |s: &str| Value::Text(s.to_owned());
        let list = |items: &[&str]| Value::List(items.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            got,
            vec![
                ("brokerName", text_value("broker-a"), 3),
                ("brokerId", text_value("0"), 4),
                ("listenPort", text_value("10911"), 5),
                ("pinCores", text_value("false"), 6),
                ("deleteWhen", text_value("04"), 7),
                ("quoted-key", text_value("a\"bA"), 8),
                ("namesrvAddr", list(&["h1:9876", "h2:9876"]), 9),
                ("hex", text_value("31"), 10),
                ("messageDelayLevel", list(&["1s", "5s"]), 11),
                ("long", text_value("x"), 15),
            ]
        );
    }

    #[test]
    fn toml_refuses_what_it_does_not_support() {
        for (text, needle) in [
            ("[broker]\na = 1", "t.toml:1: tables are not supported"),
            (
                "x = 1\ntls.server.mode = \"x\"",
                "t.toml:2: dotted keys and tables are not supported: quote the whole key, \"tls.server.mode\" = ...",
            ),
            ("a = { b = 1 }", "t.toml:1: inline tables are not supported"),
            ("a = 1.5", "t.toml:1: unsupported value \"1.5\""),
            (
                "a = 1979-05-27",
                "t.toml:1: unsupported value \"1979-05-27\"",
            ),
            ("a = [1, 1.5]", "t.toml:1: unsupported value \"[1, 1.5]\""),
            (
                "\ndeleteWhen = 04",
                "t.toml:2: leading zeros are not allowed in TOML integers; quote it: \"04\"",
            ),
            ("a = [1,\n2", "t.toml:2:"),
            ("a = \"x", "t.toml:1: invalid basic string"),
            ("a 1", "t.toml:1: expected `.`, `=`"),
            ("a = 1 2", "t.toml:1: expected newline, `#`"),
            ("a = 1\na = 2", "t.toml:2: duplicate key `a`"),
            ("= 1", "t.toml:1: invalid key"),
            ("brokerName=broker-a", "t.toml:1: invalid string; expected"),
        ] {
            let err = read(text, Format::Toml, "t.toml").unwrap_err().to_string();
            assert!(err.starts_with(needle), "{text:?}: {err}");
        }
    }
}
