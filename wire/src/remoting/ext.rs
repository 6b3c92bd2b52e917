//! Typed access to a remoting command's `extFields`: the string map in which every RocketMQ
//! custom header travels (`CommandCustomHeader`, flattened to `name -> value.toString()`).
//!
//! The header codec ([`super::frame`]) yields the map with every value already a string
//! (JSON numbers and booleans turned into their text). This module owns how one value reads
//! as a field, with Java's rules, because Java brokers are what clients were tested against:
//!
//! | Field type | Accepted text (Java parser)                                                   |
//! |------------|-------------------------------------------------------------------------------|
//! | `String`   | any; a required key must be present (`getAndCheckNotNull`), empty is allowed  |
//! | `i32`      | `Integer.parseInt`: optional `+`/`-`, then ASCII digits, in range; no blanks  |
//! | `i64`      | `Long.parseLong`: the same, 64-bit                                            |
//! | `bool`     | `Boolean.parseBoolean`: `true` in any case is true, anything else is false    |
//!
//! Java's parsers also take non-ASCII Unicode digits; no client sends them and this module
//! rejects them. Keys a header does not name are ignored (clients add `bname`, `lo`, `ns`,
//! `nsd`, `oway`, ...).

use crate::error::{Result, WireError, BAD_VALUE_CHARS_MAX};

pub use super::fields::ExtFields;

/// A header read from `extFields` (a request the broker receives, or a response a client
/// reads).
pub trait FromExt: Sized {
    fn from_ext(ext: &ExtFields) -> Result<Self>;
}

/// A header written to `extFields` (a response, or a request the broker sends a client).
pub trait ToExt {
    fn to_ext(&self) -> ExtFields;
    /// Adds the header's fields to `ext` (sized by the caller for what else it adds).
    fn put_ext(&self, ext: &mut ExtFields);
}

/// The value of a required key.
pub fn req_str<'a>(ext: &'a ExtFields, field: &'static str) -> Result<&'a str> {
    ext.get(field).ok_or(WireError::MissingField { field })
}

/// The value of an optional key.
pub fn opt_str<'a>(ext: &'a ExtFields, field: &'static str) -> Option<&'a str> {
    ext.get(field)
}

/// A required key parsed as Java's `Integer.parseInt` does.
pub fn req_i32(ext: &ExtFields, field: &'static str) -> Result<i32> {
    parse_i32(field, req_str(ext, field)?)
}

/// An optional key parsed as Java's `Integer.parseInt` does; present but malformed is an
/// error, as in Java.
pub fn opt_i32(ext: &ExtFields, field: &'static str) -> Result<Option<i32>> {
    opt_str(ext, field).map(|v| parse_i32(field, v)).transpose()
}

/// A required key parsed as Java's `Long.parseLong` does.
pub fn req_i64(ext: &ExtFields, field: &'static str) -> Result<i64> {
    parse_i64(field, req_str(ext, field)?)
}

/// An optional key parsed as Java's `Long.parseLong` does.
pub fn opt_i64(ext: &ExtFields, field: &'static str) -> Result<Option<i64>> {
    opt_str(ext, field).map(|v| parse_i64(field, v)).transpose()
}

/// A required key read as Java's `Boolean.parseBoolean` does (never fails once present).
pub fn req_bool(ext: &ExtFields, field: &'static str) -> Result<bool> {
    req_str(ext, field).map(java_bool)
}

/// An optional key read as Java's `Boolean.parseBoolean` does.
pub fn opt_bool(ext: &ExtFields, field: &'static str) -> Option<bool> {
    opt_str(ext, field).map(java_bool)
}

/// `Integer.parseInt` over ASCII: an optional sign, at least one digit, nothing else.
pub fn parse_i32(field: &'static str, text: &str) -> Result<i32> {
    // `i32::from_str` accepts exactly `[+-]?[0-9]+` (no blanks, no `_`), in range.
    text.parse()
        .map_err(|_| bad_field(field, text, "a Java int (Integer.parseInt)"))
}

/// `Long.parseLong` over ASCII: an optional sign, at least one digit, nothing else.
pub fn parse_i64(field: &'static str, text: &str) -> Result<i64> {
    text.parse()
        .map_err(|_| bad_field(field, text, "a Java long (Long.parseLong)"))
}

/// `Boolean.parseBoolean`: `"true"` ignoring ASCII case; anything else is false.
pub fn java_bool(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

/// A [`WireError::BadField`] quoting at most [`BAD_VALUE_CHARS_MAX`] characters of `text`.
pub fn bad_field(field: &'static str, text: &str, expected: &'static str) -> WireError {
    WireError::BadField {
        field,
        value: text.chars().take(BAD_VALUE_CHARS_MAX).collect(),
        expected,
    }
}

/// One field's type as it travels in `extFields`: how it is read (absent and malformed
/// included) and written. The header structs in [`super::headers`] are lists of these.
pub trait ExtValue: Sized {
    /// Reads the field `key`.
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self>;
    /// Writes the field `key` (an absent optional writes nothing).
    fn put(&self, ext: &mut ExtFields, key: &'static str);
}

impl ExtValue for String {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        req_str(ext, key).map(str::to_owned)
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert(key, self);
    }
}

impl ExtValue for Option<String> {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        Ok(opt_str(ext, key).map(str::to_owned))
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            ext.insert(key, v);
        }
    }
}

impl ExtValue for i32 {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        req_i32(ext, key)
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert_int(key, *self);
    }
}

impl ExtValue for Option<i32> {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        opt_i32(ext, key)
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            ext.insert_int(key, *v);
        }
    }
}

impl ExtValue for i64 {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        req_i64(ext, key)
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert_int(key, *self);
    }
}

impl ExtValue for Option<i64> {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        opt_i64(ext, key)
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            ext.insert_int(key, *v);
        }
    }
}

/// A Java `Boolean` that defaults to false: absent reads as false
/// (`Boolean.parseBoolean(null)` is false), and it is always written.
impl ExtValue for bool {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        Ok(opt_bool(ext, key).unwrap_or(false))
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert_display(key, self);
    }
}

/// A Java `Boolean` whose absence means something (a non-false default, or "not said").
impl ExtValue for Option<bool> {
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self> {
        Ok(opt_bool(ext, key))
    }
    fn put(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            ext.insert_display(key, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn integers_parse_like_java() {
        for (text, want) in [("5", Some(5)), ("+5", Some(5)), ("-0", Some(0))] {
            assert_eq!(parse_i32("f", text).ok(), want, "{text:?}");
        }
        for text in [
            "",
            "+",
            "-",
            " 5",
            "5 ",
            "5.0",
            "0x5",
            "1_0",
            "٣",
            "2147483648",
        ] {
            assert!(parse_i32("f", text).is_err(), "{text:?} parsed");
        }
        assert_eq!(parse_i64("f", "-9223372036854775808").ok(), Some(i64::MIN));
        assert!(parse_i64("f", "9223372036854775808").is_err());
    }

    #[test]
    fn booleans_parse_like_java() {
        assert!(java_bool("true") && java_bool("TRUE") && java_bool("tRuE"));
        for text in ["", "1", "yes", " true", "false", "t"] {
            assert!(!java_bool(text), "{text:?}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = ext(&[("queueId", "x".repeat(200).as_str())]);
        assert_eq!(
            req_i32(&e, "topic"),
            Err(WireError::MissingField { field: "topic" })
        );
        match req_i32(&e, "queueId") {
            Err(WireError::BadField { field, value, .. }) => {
                assert_eq!(field, "queueId");
                assert_eq!(value.chars().count(), BAD_VALUE_CHARS_MAX);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(opt_i64(&e, "absent"), Ok(None));
        assert_eq!(opt_bool(&e, "absent"), None);
        assert_eq!(<bool as ExtValue>::get(&e, "absent"), Ok(false));
    }
}
