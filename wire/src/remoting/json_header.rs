//! The JSON header read straight from its bytes with serde visitors: no intermediate JSON
//! document, header keys matched without allocating, only the extFields a command keeps
//! are copied, into one text buffer ([`ExtFields`]). Unknown keys are skipped (they must
//! still be valid JSON).
//!
//! Leniency, for clients written in many languages: `code`, `version`, `opaque` and `flag`
//! may be JSON numbers or numeric strings; `language` a name or an ordinal; an `extFields`
//! value any JSON scalar (kept as its text; `null` drops the key). Refused: a document that
//! is not one JSON object, no `code`, integers out of `i32`, a `remark` that is not a string
//! or null, `extFields` that is not an object or null, an array or object as an extFields
//! value, more than [`EXT_FIELDS_MAX`] extFields.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::command::{Command, Language, EXT_FIELDS_MAX};
use super::ext::ExtFields;
use crate::error::{Result, WireError};

/// Longest serde_json message kept in an error, in characters.
const DETAIL_CHARS_MAX: usize = 200;

/// Decodes a JSON header.
pub(super) fn decode(header: &[u8]) -> Result<Command> {
    // The header is checked as UTF-8 once, here, rather than string by string: a JSON text
    // is UTF-8 throughout, and a header has a few dozen short strings.
    let text = std::str::from_utf8(header).map_err(|e| WireError::BadJson {
        what: "remoting JSON header",
        detail: format!("not UTF-8: {e}"),
    })?;
    let mut de = serde_json::Deserializer::from_str(text);
    let cmd = de
        .deserialize_map(HeaderVisitor {
            text_bytes: header.len(),
        })
        .and_then(|c| de.end().map(|()| c))
        .map_err(|e| WireError::BadJson {
            what: "remoting JSON header",
            detail: e.to_string().chars().take(DETAIL_CHARS_MAX).collect(),
        })?;
    Ok(cmd)
}

enum Field {
    Code,
    Language,
    Version,
    Opaque,
    Flag,
    Remark,
    ExtFields,
    Other,
}

impl<'de> de::Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a header key")
            }
            fn visit_str<E: de::Error>(self, k: &str) -> std::result::Result<Field, E> {
                Ok(match k {
                    "code" => Field::Code,
                    "language" => Field::Language,
                    "version" => Field::Version,
                    "opaque" => Field::Opaque,
                    "flag" => Field::Flag,
                    "remark" => Field::Remark,
                    "extFields" => Field::ExtFields,
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// `text_bytes`: room for the extFields' keys and values (the header's length bounds them).
struct HeaderVisitor {
    text_bytes: usize,
}

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Command;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a remoting header object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Command, A::Error> {
        let mut code = None;
        let mut cmd = Command {
            code: 0,
            language: Language::Other,
            version: 0,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
        };
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Code => code = map.next_value_seed(Int("code"))?,
                Field::Version => cmd.version = map.next_value_seed(Int("version"))?.unwrap_or(0),
                Field::Opaque => cmd.opaque = map.next_value_seed(Int("opaque"))?.unwrap_or(0),
                Field::Flag => cmd.flag = map.next_value_seed(Int("flag"))?.unwrap_or(0),
                Field::Language => cmd.language = map.next_value_seed(Lang)?,
                Field::Remark => cmd.remark = map.next_value::<Option<String>>()?,
                Field::ExtFields => {
                    cmd.ext_fields = map.next_value_seed(Ext {
                        text_bytes: self.text_bytes,
                    })?
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        cmd.code = code.ok_or_else(|| de::Error::custom("no \"code\""))?;
        Ok(cmd)
    }
}

/// An `i32` header field: a JSON number or a numeric string; `None` for null.
struct Int(&'static str);

impl<'de> DeserializeSeed<'de> for Int {
    type Value = Option<i32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Int {
    type Value = Option<i32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\" as a 32-bit integer", self.0)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Self::Value, E> {
        i32::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("\"{}\" {v} is out of range", self.0)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Self::Value, E> {
        i32::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("\"{}\" {v} is out of range", self.0)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        v.trim()
            .parse::<i32>()
            .map(Some)
            .map_err(|_| E::custom(format!("\"{}\" is not a 32-bit integer", self.0)))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
}

/// `language`: a name or an ordinal; anything else reads as OTHER.
struct Lang;

impl<'de> DeserializeSeed<'de> for Lang {
    type Value = Language;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Language, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Lang {
    type Value = Language;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a language")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Language, E> {
        Ok(Language::from_name(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Language, E> {
        Ok(u8::try_from(v).map_or(Language::Other, Language::from_code))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Language, E> {
        Ok(Language::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Language, E> {
        Ok(Language::Other)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Language, E> {
        Ok(Language::Other)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Language, E> {
        Ok(Language::Other)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> std::result::Result<Language, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Language::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Language, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Language::Other)
    }
}

/// `extFields`: an object of scalars (or null), written straight into one [`ExtFields`] of
/// `text_bytes` bytes of text.
struct Ext {
    text_bytes: usize,
}

impl<'de> DeserializeSeed<'de> for Ext {
    type Value = ExtFields;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Ext {
    type Value = ExtFields;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"extFields\" as an object")
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(ExtFields::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Self::Value, A::Error> {
        let mut out = ExtFields::with_capacity(self.text_bytes, m.size_hint().unwrap_or(16));
        while let Some(key) = m.next_key_seed(Key)? {
            if out.len() >= EXT_FIELDS_MAX {
                return Err(de::Error::custom(format!(
                    "more than {EXT_FIELDS_MAX} extFields"
                )));
            }
            m.next_value_seed(Scalar {
                out: &mut out,
                key: &key,
            })?;
        }
        Ok(out)
    }
}

/// An extFields key, borrowed from the header when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extFields key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// One extFields value, inserted under `key` as its text; null inserts nothing.
struct Scalar<'a> {
    out: &'a mut ExtFields,
    key: &'a str,
}

impl<'de> DeserializeSeed<'de> for Scalar<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Scalar<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an extFields value that is a scalar, not an array or an object")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.out.insert(self.key, v);
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.out.insert_int(self.key, v);
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<(), E> {
        self.out.insert_int(self.key, v);
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<(), E> {
        match serde_json::Number::from_f64(v) {
            Some(n) => self.out.insert_display(self.key, n),
            None => self.out.insert_display(self.key, v),
        }
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.out.insert_display(self.key, v);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }
}
