//! Readers that turn config text into `(key, value, line)` entries, before any key is
//! interpreted.
//!
//! - Properties: Java `Properties.load` rules (`key=value`, `key: value` or `key value`;
//!   `#`/`!` comments; a trailing `\` continues the line; `\t \n \r \f \uXXXX` escapes),
//!   except that values are trimmed at both ends.
//! - TOML: the flat subset a config needs: `key = value` at top level, with basic or literal
//!   strings, integers, booleans and one-line arrays of those. Tables, dotted keys,
//!   multi-line strings, floats and dates are refused with a clear error rather than
//!   misread.
//!
//! Invariant: every entry keeps the 1-based line its key starts on, for error messages.

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
                out.push(hex_to_char(&hex, 4)?);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

fn hex_to_char(hex: &str, digits: usize) -> Result<char, String> {
    if hex.chars().count() != digits {
        return Err(format!("escape needs {digits} hex digits, got {hex:?}"));
    }
    u32::from_str_radix(hex, 16)
        .ok()
        .and_then(char::from_u32)
        .ok_or_else(|| format!("bad unicode escape {hex:?}"))
}

// ----------------------------------------------------------------------------------------
// TOML (flat subset)
// ----------------------------------------------------------------------------------------

const TOML_SUBSET: &str =
    "ringmq reads flat TOML: top-level `key = value` with strings, integers, booleans or one-line arrays";

fn read_toml(text: &str, origin: &str) -> Result<Vec<Entry>, ConfigError> {
    let mut entries: Vec<Entry> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let s = raw.trim();
        if s.is_empty() || s.starts_with('#') {
            continue;
        }
        if s.starts_with('[') {
            return Err(syntax(
                origin,
                line,
                format!("tables are not supported; {TOML_SUBSET}"),
            ));
        }
        let mut cur = Cursor { rest: s };
        let key = cur.key().map_err(|d| syntax(origin, line, d))?;
        cur.skip_ws();
        if !cur.eat('=') {
            return Err(syntax(
                origin,
                line,
                format!("expected `=` after key {key:?}"),
            ));
        }
        cur.skip_ws();
        let value = cur.value().map_err(|d| syntax(origin, line, d))?;
        cur.skip_ws();
        if !(cur.rest.is_empty() || cur.rest.starts_with('#')) {
            return Err(syntax(
                origin,
                line,
                format!("unexpected {:?} after the value", cur.rest),
            ));
        }
        if let Some(first) = entries.iter().find(|e| e.key == key) {
            return Err(syntax(
                origin,
                line,
                format!("key {key:?} defined twice (first on line {})", first.line),
            ));
        }
        entries.push(Entry { key, value, line });
    }
    Ok(entries)
}

struct Cursor<'a> {
    rest: &'a str,
}

impl Cursor<'_> {
    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn key(&mut self) -> Result<String, String> {
        let key = if self.rest.starts_with('"') {
            self.basic_string()?
        } else if self.rest.starts_with('\'') {
            self.literal_string()?
        } else {
            let end = self
                .rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(self.rest.len());
            let (key, rest) = self.rest.split_at(end);
            self.rest = rest;
            key.to_owned()
        };
        if key.is_empty() {
            return Err(format!("expected a key; {TOML_SUBSET}"));
        }
        if self.rest.trim_start().starts_with('.') {
            return Err(format!("dotted keys are not supported; {TOML_SUBSET}"));
        }
        Ok(key)
    }

    fn value(&mut self) -> Result<Value, String> {
        if self.eat('[') {
            let mut items = Vec::new();
            loop {
                self.skip_ws();
                if self.eat(']') {
                    return Ok(Value::List(items));
                }
                if self.rest.is_empty() {
                    return Err(format!(
                        "unclosed array (arrays must be on one line); {TOML_SUBSET}"
                    ));
                }
                items.push(self.scalar()?);
                self.skip_ws();
                if !self.eat(',') && !self.rest.starts_with(']') {
                    return Err(format!("expected `,` or `]` in array, got {:?}", self.rest));
                }
            }
        }
        self.scalar().map(Value::Text)
    }

    fn scalar(&mut self) -> Result<String, String> {
        if self.rest.starts_with("\"\"\"") || self.rest.starts_with("'''") {
            return Err(format!(
                "multi-line strings are not supported; {TOML_SUBSET}"
            ));
        }
        if self.rest.starts_with('"') {
            return self.basic_string();
        }
        if self.rest.starts_with('\'') {
            return self.literal_string();
        }
        let end = self
            .rest
            .find([' ', '\t', ',', ']', '#'])
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        match word {
            "true" | "false" => Ok(word.to_owned()),
            "" => Err(format!("expected a value; {TOML_SUBSET}")),
            _ => toml_integer(word),
        }
    }

    fn basic_string(&mut self) -> Result<String, String> {
        let mut chars = self.rest[1..].char_indices();
        let mut out = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &self.rest[1 + i + 1..];
                    return Ok(out);
                }
                '\\' => {
                    let (_, e) = chars.next().ok_or("unterminated string")?;
                    let decoded = match e {
                        'b' => '\u{8}',
                        't' => '\t',
                        'n' => '\n',
                        'f' => '\x0c',
                        'r' => '\r',
                        '"' => '"',
                        '\\' => '\\',
                        'u' | 'U' => {
                            let digits = if e == 'u' { 4 } else { 8 };
                            let hex: String = chars.by_ref().take(digits).map(|(_, c)| c).collect();
                            hex_to_char(&hex, digits)?
                        }
                        other => return Err(format!("unknown escape \\{other} in string")),
                    };
                    out.push(decoded);
                }
                c => out.push(c),
            }
        }
        Err("unterminated string".to_owned())
    }

    fn literal_string(&mut self) -> Result<String, String> {
        let body = &self.rest[1..];
        let end = body.find('\'').ok_or("unterminated string")?;
        let s = body[..end].to_owned();
        self.rest = &body[end + 1..];
        Ok(s)
    }
}

/// A TOML integer (decimal with `_` separators, or `0x`/`0o`/`0b`) as canonical decimal text.
fn toml_integer(word: &str) -> Result<String, String> {
    let unsupported = || format!("unsupported value {word:?}; {TOML_SUBSET}");
    let (negative, digits) = match word.as_bytes().first() {
        Some(b'-') => (true, &word[1..]),
        Some(b'+') => (false, &word[1..]),
        _ => (false, word),
    };
    let (radix, body) = match digits.get(..2) {
        Some("0x") => (16, &digits[2..]),
        Some("0o") => (8, &digits[2..]),
        Some("0b") => (2, &digits[2..]),
        _ => (10, digits),
    };
    if radix == 10 && body.len() > 1 && body.starts_with('0') {
        return Err(format!(
            "leading zeros are not allowed in TOML integers; quote it: \"{word}\""
        ));
    }
    if body.is_empty() || body.starts_with('_') || body.ends_with('_') || body.contains("__") {
        return Err(unsupported());
    }
    let clean: String = body.chars().filter(|&c| c != '_').collect();
    let magnitude = i128::from_str_radix(&clean, radix).map_err(|_| unsupported())?;
    Ok(if negative { -magnitude } else { magnitude }.to_string())
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
"#;
        let entries = read(text, Format::Toml, "t").unwrap();
        let got: Vec<_> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.clone(), e.line))
            .collect();
        let text_value = |s: &str| Value::Text(s.to_owned());
        assert_eq!(
            got,
            vec![
                ("brokerName", text_value("broker-a"), 3),
                ("brokerId", text_value("0"), 4),
                ("listenPort", text_value("10911"), 5),
                ("pinCores", text_value("false"), 6),
                ("deleteWhen", text_value("04"), 7),
                ("quoted-key", text_value("a\"bA"), 8),
                (
                    "namesrvAddr",
                    Value::List(vec!["h1:9876".to_owned(), "h2:9876".to_owned()]),
                    9
                ),
                ("hex", text_value("31"), 10),
            ]
        );
    }

    #[test]
    fn toml_refuses_what_it_does_not_support() {
        for (text, needle) in [
            ("[broker]\na = 1", "tables are not supported"),
            ("a.b = 1", "dotted keys"),
            ("a = \"\"\"x\"\"\"", "multi-line strings"),
            ("a = 1.5", "unsupported value"),
            ("a = 04", "leading zeros"),
            ("a = [1,\n2]", "unclosed array"),
            ("a = \"x", "unterminated string"),
            ("a 1", "expected `=`"),
            ("a = 1 2", "after the value"),
            ("a = 1\na = 2", "defined twice (first on line 1)"),
            ("= 1", "expected a key"),
        ] {
            let err = read(text, Format::Toml, "t.toml").unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
