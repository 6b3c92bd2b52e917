//! One remoting command as both header serializations carry it ([`Command`]: code,
//! language, version, opaque, flag, remark, extFields), below the frame codec (`frame.rs`,
//! the binary header) and the JSON header (`json_header.rs`), which both build and read it.

use super::ext::ExtFields;

/// Most extFields one header may carry (RocketMQ's largest custom header has about 20).
pub const EXT_FIELDS_MAX: usize = 1024;

/// `flag` bit 0: a response (`RPC_TYPE`).
pub const FLAG_RESPONSE: i32 = 1;
/// `flag` bit 1: a request that expects no response (`RPC_ONEWAY`).
pub const FLAG_ONEWAY: i32 = 2;

/// RocketMQ's `LanguageCode`: the peer's implementation language. Unknown codes and names
/// are kept as [`Language::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Java,
    Cpp,
    DotNet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
}

const LANGUAGES: [(Language, &str); 14] = [
    (Language::Java, "JAVA"),
    (Language::Cpp, "CPP"),
    (Language::DotNet, "DOTNET"),
    (Language::Python, "PYTHON"),
    (Language::Delphi, "DELPHI"),
    (Language::Erlang, "ERLANG"),
    (Language::Ruby, "RUBY"),
    (Language::Other, "OTHER"),
    (Language::Http, "HTTP"),
    (Language::Go, "GO"),
    (Language::Php, "PHP"),
    (Language::Oms, "OMS"),
    (Language::Rust, "RUST"),
    (Language::NodeJs, "NODE_JS"),
];

impl Language {
    pub fn code(self) -> u8 {
        LANGUAGES
            .iter()
            .position(|(l, _)| *l == self)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(7)
    }

    pub fn from_code(c: u8) -> Self {
        LANGUAGES
            .get(usize::from(c))
            .map_or(Language::Other, |(l, _)| *l)
    }

    pub fn name(self) -> &'static str {
        LANGUAGES[usize::from(self.code())].1
    }

    pub fn from_name(n: &str) -> Self {
        LANGUAGES
            .iter()
            .find(|(_, name)| *name == n)
            .map_or(Language::Other, |(l, _)| *l)
    }
}

/// One remoting command: the header's fields (the body travels beside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Request code in a request, response code in a response.
    pub code: i32,
    pub language: Language,
    pub version: i32,
    /// Matches a response to its request.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    pub remark: Option<String>,
    /// The custom header, every value as text.
    pub ext_fields: ExtFields,
}

impl Command {
    /// A request with `code` and `ext_fields`.
    pub fn request(code: i32, opaque: i32, ext_fields: impl Into<ExtFields>) -> Self {
        Command {
            code,
            language: Language::Java,
            version: VERSION,
            opaque,
            flag: 0,
            remark: None,
            ext_fields: ext_fields.into(),
        }
    }

    /// A response to the request with `opaque`.
    pub fn response(code: i32, opaque: i32, remark: Option<String>) -> Self {
        Command {
            code,
            language: Language::Java,
            version: VERSION,
            opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: ExtFields::new(),
        }
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// The ext field `key`, if present.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key)
    }
}

/// The `version` ringmq puts in what it sends: RocketMQ 5.3.1's `MQVersion` ordinal, recent
/// enough that clients send SQL92 subscriptions to it.
pub const VERSION: i32 = 483;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_map_both_ways() {
        for (i, (l, n)) in LANGUAGES.iter().enumerate() {
            assert_eq!(usize::from(l.code()), i);
            assert_eq!(Language::from_name(n), *l);
            assert_eq!(l.name(), *n);
        }
        assert_eq!(Language::from_code(200), Language::Other);
    }
}
