//! Tokens of a SQL92 expression, each with its byte offset. Keywords are matched
//! case-insensitively; everything else that starts a name is a property.

use super::ParseError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    /// Integer digits, sign not included.
    Integer(String),
    /// Floating-point text, sign not included.
    Float(String),
    Kw(Kw),
    Sym(&'static str),
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kw {
    And,
    Or,
    Not,
    Between,
    In,
    Is,
    Null,
    True,
    False,
}

impl Kw {
    fn from_word(w: &str) -> Option<Kw> {
        const WORDS: [(&str, Kw); 9] = [
            ("AND", Kw::And),
            ("OR", Kw::Or),
            ("NOT", Kw::Not),
            ("BETWEEN", Kw::Between),
            ("IN", Kw::In),
            ("IS", Kw::Is),
            ("NULL", Kw::Null),
            ("TRUE", Kw::True),
            ("FALSE", Kw::False),
        ];
        WORDS
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(w))
            .map(|&(_, kw)| kw)
    }

    pub(super) fn word(self) -> &'static str {
        match self {
            Kw::And => "AND",
            Kw::Or => "OR",
            Kw::Not => "NOT",
            Kw::Between => "BETWEEN",
            Kw::In => "IN",
            Kw::Is => "IS",
            Kw::Null => "NULL",
            Kw::True => "TRUE",
            Kw::False => "FALSE",
        }
    }
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("property '{s}'"),
            Tok::Str(s) => format!("string '{}'", s.replace('\'', "''")),
            Tok::Integer(s) | Tok::Float(s) => format!("number {s}"),
            Tok::Kw(k) => k.word().to_string(),
            Tok::Sym(s) => format!("'{s}'"),
            Tok::End => "the end".to_string(),
        }
    }
}

/// Splits `text` into tokens ending with [`Tok::End`].
pub(super) fn tokens(text: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let tok = if is_name_start(c) {
            while i < bytes.len() && is_name_part(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            Kw::from_word(word).map_or_else(|| Tok::Ident(word.to_string()), Tok::Kw)
        } else if c.is_ascii_digit() || (c == b'.' && next_is_digit(bytes, i + 1)) {
            let (tok, end) = number(text, start)?;
            i = end;
            tok
        } else if c == b'\'' {
            let (s, end) = string(text, start)?;
            i = end;
            Tok::Str(s)
        } else {
            let (sym, len) = symbol(bytes, i).ok_or_else(|| {
                let ch = text[i..].chars().next().expect("i is below the length");
                ParseError {
                    position: i,
                    message: format!("unexpected character {ch:?}"),
                }
            })?;
            i += len;
            Tok::Sym(sym)
        };
        out.push((start, tok));
    }
    out.push((text.len(), Tok::End));
    Ok(out)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$'
}

fn is_name_part(c: u8) -> bool {
    is_name_start(c) || c.is_ascii_digit() || c == b'.'
}

fn next_is_digit(bytes: &[u8], i: usize) -> bool {
    bytes.get(i).is_some_and(u8::is_ascii_digit)
}

fn symbol(bytes: &[u8], i: usize) -> Option<(&'static str, usize)> {
    let two = bytes.get(i..i + 2);
    for sym in ["<>", ">=", "<="] {
        if two == Some(sym.as_bytes()) {
            return Some((sym, 2));
        }
    }
    let one = match bytes[i] {
        b'=' => "=",
        b'>' => ">",
        b'<' => "<",
        b'(' => "(",
        b')' => ")",
        b',' => ",",
        b'+' => "+",
        b'-' => "-",
        _ => return None,
    };
    Some((one, 1))
}

/// `digits`, `digits.digits?exp?`, `.digits exp?` or `digits exp`.
fn number(text: &str, start: usize) -> Result<(Tok, usize), ParseError> {
    let bytes = text.as_bytes();
    let digits = |mut i: usize| {
        while next_is_digit(bytes, i) {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut float = false;
    if bytes.get(i) == Some(&b'.') {
        float = true;
        i = digits(i + 1);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if !next_is_digit(bytes, j) {
            return Err(ParseError {
                position: j,
                message: "expected the digits of an exponent".to_string(),
            });
        }
        float = true;
        i = digits(j);
    }
    if bytes.get(i).is_some_and(|&c| is_name_part(c)) {
        return Err(ParseError {
            position: i,
            message: "expected an operator or the end after a number".to_string(),
        });
    }
    let s = text[start..i].to_string();
    Ok((
        if float {
            Tok::Float(s)
        } else {
            Tok::Integer(s)
        },
        i,
    ))
}

/// A single-quoted string from `start` (the quote); `''` is one quote.
fn string(text: &str, start: usize) -> Result<(String, usize), ParseError> {
    let mut out = String::new();
    let mut rest = text[start + 1..].char_indices();
    while let Some((j, c)) = rest.next() {
        if c != '\'' {
            out.push(c);
            continue;
        }
        let after = start + 1 + j + 1;
        if text.as_bytes().get(after) == Some(&b'\'') {
            out.push('\'');
            rest.next();
            continue;
        }
        return Ok((out, after));
    }
    Err(ParseError {
        position: start,
        message: "string not closed: expected a ' to end it".to_string(),
    })
}
