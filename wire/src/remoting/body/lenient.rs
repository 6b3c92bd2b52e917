//! Field deserializers for the remoting JSON bodies that accept what the various clients
//! write: strings for numbers, null for empty, Java enum names or ordinals, and lists and
//! maps capped at a named maximum (one item over it is an error, not an allocation).

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::remoting::ext;

/// A scalar read from a JSON string, number, bool or null.
#[derive(Debug)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Text(String),
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom("integer out of the range of a Java long"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(opt_string(d)?.unwrap_or_default())
}

pub fn string_or_tag<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(opt_string(d)?.unwrap_or_else(|| super::EXPRESSION_TYPE_TAG.to_owned()))
}

pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Scalar::deserialize(d)? {
        Scalar::Null => Ok(None),
        Scalar::Text(s) => Ok(Some(s)),
        Scalar::Bool(b) => Ok(Some(b.to_string())),
        Scalar::Int(n) => Ok(Some(n.to_string())),
        Scalar::Other => Err(de::Error::custom("expected a string")),
    }
}

pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Scalar::deserialize(d)? {
        Scalar::Null => Ok(0),
        Scalar::Int(n) => Ok(n),
        Scalar::Text(s) => ext::parse_i64("json", &s).map_err(de::Error::custom),
        _ => Err(de::Error::custom("expected an integer")),
    }
}

pub fn i32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    i32::try_from(i64(d)?).map_err(|_| de::Error::custom("integer out of the range of a Java int"))
}

pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Scalar::deserialize(d)? {
        Scalar::Null => Ok(false),
        Scalar::Bool(b) => Ok(b),
        Scalar::Text(s) => Ok(ext::java_bool(&s)),
        _ => Err(de::Error::custom("expected a boolean")),
    }
}

/// An `i32` from a JSON number or a string holding one (a tag hash code).
struct Code(i32);

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        i32(d).map(Code)
    }
}

pub fn code_set<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    let codes: Vec<Code> = seq::<_, _, { super::TAGS_MAX }>(d)?;
    Ok(codes.into_iter().map(|c| c.0).collect())
}

/// A JSON array (or null, read as empty) of at most `MAX` items.
pub fn seq<'de, D, T, const MAX: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct V<T, const MAX: usize>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for V<T, MAX> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an array of at most {MAX} items")
        }
        fn visit_unit<E>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                if items.len() == MAX {
                    return Err(de::Error::custom(format!(
                        "array over the maximum of {MAX} items"
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    d.deserialize_any(V::<T, MAX>(PhantomData))
}

/// A JSON object (or null, read as empty) of at most `MAX` entries; a repeated key keeps
/// its last value, as fastjson does.
pub fn map<'de, D, K, V, const MAX: usize>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    struct Vis<K, V, const MAX: usize>(PhantomData<(K, V)>);
    impl<'de, K, V, const MAX: usize> Visitor<'de> for Vis<K, V, MAX>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an object of at most {MAX} entries")
        }
        fn visit_unit<E>(self) -> Result<BTreeMap<K, V>, E> {
            Ok(BTreeMap::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BTreeMap<K, V>, A::Error> {
            let mut out = BTreeMap::new();
            let mut seen = 0usize;
            while let Some((k, v)) = map.next_entry()? {
                if seen == MAX {
                    return Err(de::Error::custom(format!(
                        "object over the maximum of {MAX} entries"
                    )));
                }
                seen += 1;
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Vis::<K, V, MAX>(PhantomData))
}

/// Reads a Java enum from its name or its ordinal.
pub struct EnumVisitor<T: 'static> {
    what: &'static str,
    all: &'static [T],
    by_name: fn(&str) -> Option<T>,
}

impl<T> EnumVisitor<T> {
    pub fn new(what: &'static str, all: &'static [T], by_name: fn(&str) -> Option<T>) -> Self {
        EnumVisitor { what, all, by_name }
    }
}

impl<'de, T: Copy> Visitor<'de> for EnumVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {} name or ordinal", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.by_name)(v).ok_or_else(|| {
            let shown: String = v.chars().take(64).collect();
            E::custom(format!("unknown {} {shown:?}", self.what))
        })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        usize::try_from(v)
            .ok()
            .and_then(|i| self.all.get(i).copied())
            .ok_or_else(|| E::custom(format!("unknown {} ordinal {v}", self.what)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Err(E::custom(format!("unknown {} ordinal {v}", self.what)))
    }
}
