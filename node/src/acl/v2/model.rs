//! ACL 2.0's nouns as RocketMQ 5 names them, read from and written to RocketMQ's JSON
//! (`UserInfo`, `AclInfo`): users (type `Super`/`Normal`, status `enable`/`disable`) and,
//! per subject `User:name`, policies (`Custom`, `Default`) of entries (resource, actions,
//! source addresses, decision). Parsing refuses what RocketMQ would not store (an unknown
//! action, resource type, decision or address) with an error naming the value.
//!
//! Resource keys: `*` (anything), `Topic:*` (any topic), `Topic:orders` (literal),
//! `Topic:ord*` (prefixed); the same for `Group:` and `Cluster:`.

use std::net::IpAddr;

use ringmq_wire::auth::{NativeKey, RemotingKey, Secret};
use ringmq_wire::command::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};

/// Most entries in one subject's ACL (both policies), and most source addresses per entry.
pub const ENTRIES_MAX: usize = 4096;
pub const SOURCE_IPS_MAX: usize = 256;
/// Longest username or password.
pub const NAME_BYTES_MAX: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserType {
    Super,
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserStatus {
    Enable,
    Disable,
}

/// One user: the username is the access key, the password the secret key.
#[derive(Clone)]
pub struct User {
    pub name: String,
    pub password: Secret,
    pub user_type: UserType,
    pub status: UserStatus,
    pub native_key: NativeKey,
    pub remoting_key: RemotingKey,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("user_type", &self.user_type)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl User {
    pub fn new(name: String, password: Secret, user_type: UserType, status: UserStatus) -> User {
        User {
            native_key: NativeKey::new(password.expose().as_bytes()),
            remoting_key: RemotingKey::new(password.expose().as_bytes()),
            name,
            password,
            user_type,
            status,
        }
    }

    pub fn is_super(&self) -> bool {
        self.user_type == UserType::Super
    }

    /// RocketMQ's `UserInfo`, with the password only when `with_password`.
    pub fn info(&self, with_password: bool) -> UserInfo {
        UserInfo {
            username: Some(self.name.clone()),
            password: with_password.then(|| self.password.expose().to_owned()),
            user_type: Some(
                match self.user_type {
                    UserType::Super => "Super",
                    UserType::Normal => "Normal",
                }
                .to_owned(),
            ),
            user_status: Some(
                match self.status {
                    UserStatus::Enable => "enable",
                    UserStatus::Disable => "disable",
                }
                .to_owned(),
            ),
        }
    }
}

pub fn parse_user_type(s: &str) -> Result<UserType, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "super" => Ok(UserType::Super),
        "normal" => Ok(UserType::Normal),
        other => Err(format!("unknown userType `{other}` (Super or Normal)")),
    }
}

pub fn parse_user_status(s: &str) -> Result<UserStatus, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "enable" => Ok(UserStatus::Enable),
        "disable" => Ok(UserStatus::Disable),
        other => Err(format!("unknown userStatus `{other}` (enable or disable)")),
    }
}

/// A username as RocketMQ accepts it: not blank, no `:` (subjects are `User:name`).
pub fn check_username(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("the username is blank".to_owned());
    }
    if name.len() > NAME_BYTES_MAX || name.contains([':', '\n', '"']) || name != name.trim() {
        return Err(format!(
            "username {name:?} is over {NAME_BYTES_MAX} bytes or holds `:`, `\"`, a newline or outer spaces"
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResType {
    Any,
    Cluster,
    Topic,
    Group,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Any,
    Literal,
    Prefixed,
}

/// A resource of a policy entry, or (always literal) the resource a request touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub ty: ResType,
    pub name: String,
    pub pattern: Pattern,
}

impl Resource {
    pub fn literal(ty: ResType, name: &str) -> Resource {
        Resource {
            ty,
            name: name.to_owned(),
            pattern: Pattern::Literal,
        }
    }

    pub fn parse(key: &str) -> Result<Resource, String> {
        let key = key.trim();
        if key == "*" {
            return Ok(Resource {
                ty: ResType::Any,
                name: String::new(),
                pattern: Pattern::Any,
            });
        }
        let (ty, name) = key
            .split_once(':')
            .ok_or_else(|| format!("resource `{key}` is not `*` or Type:name"))?;
        let ty = match ty.to_ascii_lowercase().as_str() {
            "topic" => ResType::Topic,
            "group" => ResType::Group,
            "cluster" => ResType::Cluster,
            other => {
                return Err(format!(
                    "resource `{key}`: unknown type `{other}` (Topic, Group or Cluster)"
                ))
            }
        };
        let (name, pattern) = if name == "*" {
            (String::new(), Pattern::Any)
        } else if let Some(prefix) = name.strip_suffix('*') {
            (prefix.to_owned(), Pattern::Prefixed)
        } else if name.is_empty() {
            return Err(format!("resource `{key}` has no name"));
        } else {
            (name.to_owned(), Pattern::Literal)
        };
        Ok(Resource { ty, name, pattern })
    }

    /// RocketMQ's resource key (`Topic:orders`, `Topic:ord*`, `Topic:*`, `*`).
    pub fn key(&self) -> String {
        let ty = match self.ty {
            ResType::Any => return "*".to_owned(),
            ResType::Cluster => "Cluster",
            ResType::Topic => "Topic",
            ResType::Group => "Group",
        };
        match self.pattern {
            Pattern::Any => format!("{ty}:*"),
            Pattern::Literal => format!("{ty}:{}", self.name),
            Pattern::Prefixed => format!("{ty}:{}*", self.name),
        }
    }

    /// Does this (entry) resource cover `target` (a literal resource)?
    pub fn covers(&self, target: &Resource) -> bool {
        if self.ty == ResType::Any {
            return true;
        }
        if self.ty != target.ty {
            return false;
        }
        match self.pattern {
            Pattern::Any => true,
            Pattern::Literal => self.name == target.name,
            Pattern::Prefixed => target.name.starts_with(&self.name),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    All,
    Pub,
    Sub,
    Create,
    Update,
    Delete,
    Get,
    List,
}

impl Action {
    pub fn parse(s: &str) -> Result<Action, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "all" => Action::All,
            "pub" => Action::Pub,
            "sub" => Action::Sub,
            "create" => Action::Create,
            "update" => Action::Update,
            "delete" => Action::Delete,
            "get" => Action::Get,
            "list" => Action::List,
            other => {
                return Err(format!(
                    "unknown action `{other}` (Pub, Sub, Create, Update, Delete, Get, List or All)"
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::All => "All",
            Action::Pub => "Pub",
            Action::Sub => "Sub",
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Delete => "Delete",
            Action::Get => "Get",
            Action::List => "List",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// A source address range: one address or a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpRange {
    text: String,
    net: IpAddr,
    prefix: u8,
}

impl IpRange {
    pub fn parse(s: &str) -> Result<IpRange, String> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr
            .parse()
            .map_err(|_| format!("source address `{s}` is not an IP address or CIDR block"))?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= bits => p,
                _ => return Err(format!("source address `{s}`: prefix over {bits} bits")),
            },
        };
        Ok(IpRange {
            text: s.to_owned(),
            net,
            prefix,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                masked(u128::from(u32::from(n)), 32, self.prefix)
                    == masked(u128::from(u32::from(a)), 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                masked(u128::from(n), 128, self.prefix) == masked(u128::from(a), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn masked(v: u128, bits: u32, prefix: u8) -> u128 {
    let keep = u32::from(prefix);
    if keep == 0 {
        0
    } else {
        v >> (bits - keep)
    }
}

/// One entry of a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub resource: Resource,
    pub actions: Vec<Action>,
    pub source_ips: Vec<IpRange>,
    pub decision: Decision,
}

impl Entry {
    pub fn parse(e: &PolicyEntryInfo) -> Result<Entry, String> {
        let key = e.resource.as_deref().unwrap_or("");
        let resource = Resource::parse(key)?;
        if e.actions.is_empty() {
            return Err(format!("the entry for {key} has no actions"));
        }
        let actions = e
            .actions
            .iter()
            .map(|a| Action::parse(a))
            .collect::<Result<Vec<_>, _>>()?;
        if e.source_ips.len() > SOURCE_IPS_MAX {
            return Err(format!(
                "the entry for {key} has over {SOURCE_IPS_MAX} source addresses"
            ));
        }
        let source_ips = e
            .source_ips
            .iter()
            .map(|s| IpRange::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let decision = match e
            .decision
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("allow") => Decision::Allow,
            Some("deny") => Decision::Deny,
            Some(other) => return Err(format!("unknown decision `{other}` (Allow or Deny)")),
            None => {
                return Err(format!(
                    "the entry for {key} has no decision (Allow or Deny)"
                ))
            }
        };
        Ok(Entry {
            resource,
            actions,
            source_ips,
            decision,
        })
    }

    pub fn info(&self) -> PolicyEntryInfo {
        PolicyEntryInfo {
            resource: Some(self.resource.key()),
            actions: self.actions.iter().map(|a| a.name().to_owned()).collect(),
            source_ips: self
                .source_ips
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            decision: Some(
                match self.decision {
                    Decision::Allow => "Allow",
                    Decision::Deny => "Deny",
                }
                .to_owned(),
            ),
        }
    }

    /// Does this entry name any of `wanted` (RocketMQ: `All` names every action)?
    pub fn names_action(&self, wanted: &[Action]) -> bool {
        wanted
            .iter()
            .any(|w| self.actions.contains(w) || self.actions.contains(&Action::All))
    }

    /// Does this entry apply to a request from `ip` (any address when none are listed)? An
    /// unknown address meets an address-bound entry only when it denies.
    pub fn applies_from(&self, ip: Option<IpAddr>) -> bool {
        if self.source_ips.is_empty() {
            return true;
        }
        match ip {
            Some(ip) => self.source_ips.iter().any(|r| r.contains(ip)),
            None => self.decision == Decision::Deny,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    Custom,
    Default,
}

impl PolicyType {
    pub fn parse(s: Option<&str>) -> Result<PolicyType, String> {
        match s.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("custom") => Ok(PolicyType::Custom),
            Some("default") => Ok(PolicyType::Default),
            Some(other) => Err(format!("unknown policyType `{other}` (Custom or Default)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyType::Custom => "Custom",
            PolicyType::Default => "Default",
        }
    }
}

/// One subject's ACL: at most one policy of each type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubjectAcl {
    pub custom: Vec<Entry>,
    pub default: Vec<Entry>,
}

impl SubjectAcl {
    pub fn policy_mut(&mut self, t: PolicyType) -> &mut Vec<Entry> {
        match t {
            PolicyType::Custom => &mut self.custom,
            PolicyType::Default => &mut self.default,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.custom.is_empty() && self.default.is_empty()
    }

    pub fn len(&self) -> usize {
        self.custom.len() + self.default.len()
    }

    /// Parses `AclInfo.policies`.
    pub fn parse(policies: &[PolicyInfo]) -> Result<Vec<(PolicyType, Vec<Entry>)>, String> {
        policies
            .iter()
            .map(|p| {
                let t = PolicyType::parse(p.policy_type.as_deref())?;
                let entries = p
                    .entries
                    .iter()
                    .map(Entry::parse)
                    .collect::<Result<_, _>>()?;
                Ok((t, entries))
            })
            .collect()
    }

    /// RocketMQ's merge: an entry for a resource already present replaces its actions,
    /// addresses and decision; a new resource is added.
    pub fn merge(&mut self, policies: Vec<(PolicyType, Vec<Entry>)>) {
        for (t, entries) in policies {
            let list = self.policy_mut(t);
            for e in entries {
                match list.iter_mut().find(|old| old.resource == e.resource) {
                    Some(old) => *old = e,
                    None => list.push(e),
                }
            }
        }
    }

    pub fn info(&self, subject: &str, resource_filter: &str) -> AclInfo {
        let policy = |t: PolicyType, v: &[Entry]| PolicyInfo {
            policy_type: Some(t.name().to_owned()),
            entries: v
                .iter()
                .filter(|e| {
                    resource_filter.is_empty() || e.resource.key().contains(resource_filter)
                })
                .map(Entry::info)
                .collect(),
        };
        let mut policies = Vec::new();
        for (t, v) in [
            (PolicyType::Custom, &self.custom),
            (PolicyType::Default, &self.default),
        ] {
            let p = policy(t, v);
            if !p.entries.is_empty() {
                policies.push(p);
            }
        }
        AclInfo {
            subject: Some(subject.to_owned()),
            policies,
        }
    }
}

/// `User:name` -> `name`.
pub fn subject_user(subject: &str) -> Result<&str, String> {
    match subject.trim().split_once(':') {
        Some((t, name)) if t.eq_ignore_ascii_case("user") && !name.is_empty() => Ok(name),
        _ => Err(format!("subject `{subject}` is not User:<username>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_parse_and_cover() {
        let lit = Resource::parse("Topic:orders").unwrap();
        let pre = Resource::parse("topic:ord*").unwrap();
        let any_topic = Resource::parse("Topic:*").unwrap();
        let any = Resource::parse("*").unwrap();
        let t = Resource::literal(ResType::Topic, "orders");
        let g = Resource::literal(ResType::Group, "orders");
        assert!(lit.covers(&t) && pre.covers(&t) && any_topic.covers(&t) && any.covers(&t));
        assert!(!lit.covers(&g) && !pre.covers(&g) && !any_topic.covers(&g) && any.covers(&g));
        assert!(!pre.covers(&Resource::literal(ResType::Topic, "or")));
        assert_eq!(pre.key(), "Topic:ord*");
        assert!(Resource::parse("Queue:x").is_err());
        assert!(Resource::parse("Topic:").is_err());
    }

    #[test]
    fn source_ranges() {
        let r = IpRange::parse("10.1.0.0/16").unwrap();
        assert!(r.contains("10.1.2.3".parse().unwrap()));
        assert!(!r.contains("10.2.0.1".parse().unwrap()));
        assert!(r.contains("::ffff:10.1.9.9".parse().unwrap()));
        let one = IpRange::parse("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(IpRange::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(IpRange::parse("10.0.0.0/33").is_err());
        assert!(IpRange::parse("10.*").is_err());
    }
}
