//! RocketMQ's `plain_acl.yml`, read and written: global white addresses and accounts with
//! their topic and group permissions. An operator's existing file reads unchanged (numbers
//! as secret keys, `PUB|SUB` or `SUB|PUB`, a missing `whiteRemoteAddress`); what ringmq does
//! differently with it is in `docs/security.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ringmq_wire::auth::{NativeKey, RemotingKey, Secret};
use yaml_rust2::{Yaml, YamlLoader};

use super::addr::AddrPattern;

/// A permission, as RocketMQ writes it: `DENY`, `PUB`, `SUB`, `PUB|SUB` (or `ANY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Perm(u8);

impl Perm {
    pub const NONE: Perm = Perm(0);
    pub const DENY: Perm = Perm(1);
    pub const PUB: Perm = Perm(4);
    pub const SUB: Perm = Perm(8);
    pub const ANY: Perm = Perm(4 | 8);

    pub fn parse(s: &str) -> Result<Perm, String> {
        let mut p = Perm::NONE;
        for part in s.split('|') {
            p.0 |= match part.trim().to_ascii_uppercase().as_str() {
                "DENY" => Perm::DENY.0,
                "PUB" => Perm::PUB.0,
                "SUB" => Perm::SUB.0,
                "ANY" => Perm::ANY.0,
                other => {
                    return Err(format!(
                        "unknown permission `{other}` (DENY, PUB, SUB, PUB|SUB or ANY)"
                    ))
                }
            };
        }
        Ok(p)
    }

    pub fn is_deny(self) -> bool {
        self.0 & Perm::DENY.0 != 0
    }

    /// Does this permission grant all of `need` (never when it denies)?
    pub fn grants(self, need: Perm) -> bool {
        !self.is_deny() && self.0 & need.0 == need.0
    }

    /// Both permissions at once: a deny in either wins.
    pub fn merge(self, other: Perm) -> Perm {
        if self.is_deny() || other.is_deny() {
            Perm::DENY
        } else {
            Perm(self.0 | other.0)
        }
    }

    pub fn name(self) -> &'static str {
        match self.0 {
            _ if self.is_deny() => "DENY",
            12 => "PUB|SUB",
            4 => "PUB",
            8 => "SUB",
            _ => "NONE",
        }
    }
}

/// One account of the file.
#[derive(Debug, Clone)]
pub struct Account {
    pub access_key: String,
    pub secret: Secret,
    /// Where this account may be used from (`whiteRemoteAddress`); `None` = anywhere.
    pub white_remote_address: Option<AddrPattern>,
    pub admin: bool,
    /// `None` when the file does not say: DENY, or PUB|SUB for an admin.
    pub default_topic_perm: Option<Perm>,
    pub default_group_perm: Option<Perm>,
    pub topic_perms: BTreeMap<String, Perm>,
    pub group_perms: BTreeMap<String, Perm>,
    pub native_key: NativeKey,
    pub remoting_key: RemotingKey,
}

impl Account {
    pub fn new(access_key: String, secret: Secret) -> Account {
        let native_key = NativeKey::new(secret.expose().as_bytes());
        let remoting_key = RemotingKey::new(secret.expose().as_bytes());
        Account {
            access_key,
            secret,
            white_remote_address: None,
            admin: false,
            default_topic_perm: None,
            default_group_perm: None,
            topic_perms: BTreeMap::new(),
            group_perms: BTreeMap::new(),
            native_key,
            remoting_key,
        }
    }

    /// What this account holds on `topic`.
    pub fn topic_perm(&self, topic: &str) -> Perm {
        self.topic_perms
            .get(topic)
            .copied()
            .unwrap_or_else(|| self.default_perm(self.default_topic_perm))
    }

    /// What this account holds on consumer or producer group `group`.
    pub fn group_perm(&self, group: &str) -> Perm {
        self.group_perms
            .get(group)
            .copied()
            .unwrap_or_else(|| self.default_perm(self.default_group_perm))
    }

    fn default_perm(&self, given: Option<Perm>) -> Perm {
        given.unwrap_or(if self.admin { Perm::ANY } else { Perm::DENY })
    }
}

/// The whole file.
#[derive(Debug, Clone, Default)]
pub struct AclFile {
    pub global_white: Vec<AddrPattern>,
    pub accounts: BTreeMap<String, Account>,
}

impl AclFile {
    /// Parses the YAML text; the error names the account and field.
    pub fn parse(text: &str) -> Result<AclFile, String> {
        let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
        let Some(doc) = docs.into_iter().next() else {
            return Ok(AclFile::default());
        };
        let root = match &doc {
            Yaml::Hash(_) => &doc,
            Yaml::Null => return Ok(AclFile::default()),
            _ => return Err("the top level is not a mapping".to_owned()),
        };
        let mut file = AclFile::default();
        for (i, item) in list(
            &root["globalWhiteRemoteAddresses"],
            "globalWhiteRemoteAddresses",
        )?
        .iter()
        .enumerate()
        {
            let s = scalar(item).ok_or_else(|| {
                format!("globalWhiteRemoteAddresses[{i}] is not an address pattern")
            })?;
            file.global_white.push(
                AddrPattern::parse(&s)
                    .map_err(|e| format!("globalWhiteRemoteAddresses[{i}]: {e}"))?,
            );
        }
        for (i, item) in list(&root["accounts"], "accounts")?.iter().enumerate() {
            let a = account(item).map_err(|e| format!("accounts[{i}]: {e}"))?;
            if file.accounts.contains_key(&a.access_key) {
                return Err(format!(
                    "accounts[{i}]: access key {} appears twice",
                    a.access_key
                ));
            }
            file.accounts.insert(a.access_key.clone(), a);
        }
        Ok(file)
    }

    /// The file as YAML in RocketMQ's layout (comments of the original are not kept).
    pub fn to_yaml(&self) -> String {
        let mut s = String::from("globalWhiteRemoteAddresses:\n");
        for w in &self.global_white {
            let _ = writeln!(s, "  - {}", quote(w.as_str()));
        }
        s.push_str("accounts:\n");
        for a in self.accounts.values() {
            let _ = writeln!(s, "  - accessKey: {}", quote(&a.access_key));
            let _ = writeln!(s, "    secretKey: {}", quote(a.secret.expose()));
            if let Some(w) = &a.white_remote_address {
                let _ = writeln!(s, "    whiteRemoteAddress: {}", quote(w.as_str()));
            }
            let _ = writeln!(s, "    admin: {}", a.admin);
            if let Some(p) = a.default_topic_perm {
                let _ = writeln!(s, "    defaultTopicPerm: {}", p.name());
            }
            if let Some(p) = a.default_group_perm {
                let _ = writeln!(s, "    defaultGroupPerm: {}", p.name());
            }
            for (name, perms) in [
                ("topicPerms", &a.topic_perms),
                ("groupPerms", &a.group_perms),
            ] {
                if perms.is_empty() {
                    continue;
                }
                let _ = writeln!(s, "    {name}:");
                for (res, p) in perms {
                    let _ = writeln!(s, "      - {}", quote(&format!("{res}={}", p.name())));
                }
            }
        }
        s
    }
}

/// A YAML scalar in double quotes (escaping quotes and backslashes).
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn list<'a>(y: &'a Yaml, what: &str) -> Result<&'a [Yaml], String> {
    match y {
        Yaml::Array(a) => Ok(a),
        Yaml::Null | Yaml::BadValue => Ok(&[]),
        _ => Err(format!("{what} is not a list")),
    }
}

/// A scalar as text (RocketMQ's files have numbers as secret keys).
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn account(y: &Yaml) -> Result<Account, String> {
    let Yaml::Hash(h) = y else {
        return Err("not a mapping".to_owned());
    };
    for k in h.keys() {
        let known = matches!(
            k.as_str(),
            Some(
                "accessKey"
                    | "secretKey"
                    | "whiteRemoteAddress"
                    | "admin"
                    | "defaultTopicPerm"
                    | "defaultGroupPerm"
                    | "topicPerms"
                    | "groupPerms"
            )
        );
        if !known {
            return Err(format!("unknown field {:?}", scalar(k).unwrap_or_default()));
        }
    }
    let access_key = scalar(&y["accessKey"])
        .filter(|s| !s.is_empty())
        .ok_or("accessKey is missing")?;
    if access_key.len() > ringmq_wire::auth::ACCESS_KEY_BYTES_MAX {
        return Err(format!("accessKey {access_key:.32}... is over 255 bytes"));
    }
    let secret = scalar(&y["secretKey"])
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("account {access_key}: secretKey is missing"))?;
    let ctx = |e: String| format!("account {access_key}: {e}");
    let mut a = Account::new(access_key.clone(), Secret::new(secret));
    a.white_remote_address = match scalar(&y["whiteRemoteAddress"]) {
        Some(s) if !s.trim().is_empty() => Some(AddrPattern::parse(&s).map_err(ctx)?),
        _ => None,
    };
    a.admin = match &y["admin"] {
        Yaml::Boolean(b) => *b,
        Yaml::Null | Yaml::BadValue => false,
        Yaml::String(s) if s.eq_ignore_ascii_case("true") => true,
        Yaml::String(s) if s.eq_ignore_ascii_case("false") => false,
        _ => return Err(ctx("admin is not true or false".to_owned())),
    };
    a.default_topic_perm =
        opt_perm(&y["defaultTopicPerm"]).map_err(|e| ctx(format!("defaultTopicPerm: {e}")))?;
    a.default_group_perm =
        opt_perm(&y["defaultGroupPerm"]).map_err(|e| ctx(format!("defaultGroupPerm: {e}")))?;
    a.topic_perms = perms(&y["topicPerms"], "topicPerms").map_err(ctx)?;
    a.group_perms = perms(&y["groupPerms"], "groupPerms").map_err(ctx)?;
    Ok(a)
}

fn opt_perm(y: &Yaml) -> Result<Option<Perm>, String> {
    match scalar(y) {
        Some(s) if !s.trim().is_empty() => Perm::parse(&s).map(Some),
        _ => Ok(None),
    }
}

/// `name=PERM` entries; a resource listed twice holds both, and a DENY in either wins.
fn perms(y: &Yaml, what: &str) -> Result<BTreeMap<String, Perm>, String> {
    let mut out = BTreeMap::new();
    for (i, item) in list(y, what)?.iter().enumerate() {
        let s = scalar(item).ok_or_else(|| format!("{what}[{i}] is not `name=PERM`"))?;
        let (name, perm) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("{what}[{i}] `{s}` is not `name=PERM`"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("{what}[{i}] `{s}` has no name"));
        }
        let perm = Perm::parse(perm).map_err(|e| format!("{what}[{i}]: {e}"))?;
        let merged = out.get(name).map_or(perm, |p: &Perm| p.merge(perm));
        out.insert(name.to_owned(), merged);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocketMQ 4.9's distributed `conf/plain_acl.yml`, as operators have it.
    const ROCKETMQ_SAMPLE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"#;

    #[test]
    fn rocketmqs_sample_file_reads_unchanged() {
        let f = AclFile::parse(ROCKETMQ_SAMPLE).expect("parses");
        assert_eq!(f.global_white.len(), 2);
        let a = &f.accounts["RocketMQ"];
        assert_eq!(a.secret.expose(), "12345678");
        assert!(!a.admin);
        assert!(a.white_remote_address.is_none());
        assert_eq!(a.topic_perm("topicA"), Perm::DENY);
        assert_eq!(a.topic_perm("topicB"), Perm::ANY);
        assert_eq!(a.topic_perm("topicC"), Perm::SUB);
        assert_eq!(a.topic_perm("other"), Perm::DENY);
        assert_eq!(a.group_perm("groupC"), Perm::SUB);
        assert_eq!(a.group_perm("other"), Perm::SUB);
        let admin = &f.accounts["rocketmq2"];
        assert!(admin.admin);
        assert_eq!(admin.topic_perm("anything"), Perm::ANY);
    }

    #[test]
    fn deny_wins_over_allow_for_a_resource_listed_twice() {
        let f = AclFile::parse(
            "accounts:\n  - accessKey: a\n    secretKey: s\n    topicPerms:\n      - t=PUB\n      - t=DENY\n      - u=SUB\n      - u=PUB\n",
        )
        .expect("parses");
        assert_eq!(f.accounts["a"].topic_perm("t"), Perm::DENY);
        assert_eq!(f.accounts["a"].topic_perm("u"), Perm::ANY);
    }

    #[test]
    fn errors_name_the_account_and_field() {
        for (text, want) in [
            ("accounts:\n  - accessKey: a\n", "secretKey is missing"),
            (
                "accounts:\n  - accessKey: a\n    secretKey: s\n    topicPerms: [t=WRITE]\n",
                "unknown permission",
            ),
            (
                "accounts:\n  - accessKey: a\n    secretKey: s\n    admn: true\n",
                "unknown field",
            ),
            (
                "accounts:\n  - {accessKey: a, secretKey: s}\n  - {accessKey: a, secretKey: t}\n",
                "appears twice",
            ),
            ("accounts: [\n", "not YAML"),
            ("- just a list\n", "top level"),
        ] {
            let e = AclFile::parse(text).expect_err(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn written_files_read_back_the_same() {
        let f = AclFile::parse(ROCKETMQ_SAMPLE).expect("parses");
        let again = AclFile::parse(&f.to_yaml()).expect("reads back");
        assert_eq!(again.to_yaml(), f.to_yaml());
        assert_eq!(again.accounts["RocketMQ"].topic_perm("topicB"), Perm::ANY);
        assert_eq!(again.global_white.len(), 2);
    }
}
