//! The decision for one resource a request touches, as RocketMQ 5 makes it
//! (`AclAuthorizationHandler`):
//!
//! 1. Entries of the subject's `Custom` policy that cover the resource, name one of the
//!    wanted actions (`All` names every action) and apply from the caller's address. Only
//!    when none does, the same from its `Default` policy.
//! 2. No entry: denied (deny by default).
//! 3. The entries are ordered most specific first: a typed resource before `*`; literal
//!    before prefixed before `Type:*`; among prefixed ones the longer prefix first; at the
//!    same rank a Deny before an Allow. The first entry decides.
//!
//! Super users are allowed before this is asked ([`super::Auth`]). A caller whose address
//! is not known (`None`: a protocol edge that does not pass it) meets entries with
//! `sourceIps` only when they deny: such an entry never allows, and always denies.

use std::net::IpAddr;

use super::model::{Action, Decision, Entry, Pattern, ResType, Resource, SubjectAcl};

/// Allowed, or why not (RocketMQ's wording after "has no permission to access ...").
pub fn decide(
    acl: Option<&SubjectAcl>,
    target: &Resource,
    wanted: &[Action],
    ip: Option<IpAddr>,
) -> Result<(), &'static str> {
    let Some(acl) = acl else {
        return Err("no matched policies");
    };
    fn matching<'a>(
        entries: &'a [Entry],
        target: &Resource,
        wanted: &[Action],
        ip: Option<IpAddr>,
    ) -> Vec<&'a Entry> {
        entries
            .iter()
            .filter(|e| e.resource.covers(target) && e.names_action(wanted) && e.applies_from(ip))
            .collect()
    }
    let mut found = matching(&acl.custom, target, wanted, ip);
    if found.is_empty() {
        found = matching(&acl.default, target, wanted, ip);
    }
    let first = found.into_iter().min_by_key(|e| rank(e));
    match first {
        None => Err("no matched policies"),
        Some(e) if e.decision == Decision::Deny => Err("the decision is deny"),
        Some(_) => Ok(()),
    }
}

/// Sort key: smaller is more specific.
fn rank(e: &Entry) -> (bool, u8, std::cmp::Reverse<usize>, bool) {
    let r = &e.resource;
    let pattern = match r.pattern {
        Pattern::Literal => 0,
        Pattern::Prefixed => 1,
        Pattern::Any => 2,
    };
    let prefix_len = if r.pattern == Pattern::Prefixed {
        r.name.len()
    } else {
        0
    };
    (
        r.ty == ResType::Any,
        pattern,
        std::cmp::Reverse(prefix_len),
        e.decision == Decision::Allow,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::v2::model::{IpRange, PolicyType};

    fn entry(res: &str, actions: &[Action], ips: &[&str], d: Decision) -> Entry {
        Entry {
            resource: Resource::parse(res).unwrap(),
            actions: actions.to_vec(),
            source_ips: ips.iter().map(|s| IpRange::parse(s).unwrap()).collect(),
            decision: d,
        }
    }

    fn topic(n: &str) -> Resource {
        Resource::literal(ResType::Topic, n)
    }

    const LO: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn each_permission_allows_exactly_what_it_names() {
        let mut acl = SubjectAcl::default();
        acl.merge(vec![(
            PolicyType::Custom,
            vec![entry("Topic:a", &[Action::Pub], &[], Decision::Allow)],
        )]);
        assert_eq!(decide(Some(&acl), &topic("a"), &[Action::Pub], LO), Ok(()));
        assert!(decide(Some(&acl), &topic("b"), &[Action::Pub], LO).is_err());
        assert!(decide(Some(&acl), &topic("a"), &[Action::Sub], LO).is_err());
        assert!(decide(None, &topic("a"), &[Action::Pub], LO).is_err());
    }

    #[test]
    fn most_specific_first_and_deny_wins_at_the_same_rank() {
        let mut acl = SubjectAcl::default();
        acl.merge(vec![(
            PolicyType::Custom,
            vec![
                entry("Topic:*", &[Action::All], &[], Decision::Allow),
                entry("Topic:sec*", &[Action::Pub], &[], Decision::Deny),
                entry("Topic:secret-ok", &[Action::Pub], &[], Decision::Allow),
                entry(
                    "Topic:secret-ok-longer*",
                    &[Action::Pub],
                    &[],
                    Decision::Allow,
                ),
            ],
        )]);
        let pubs = [Action::Pub];
        assert_eq!(decide(Some(&acl), &topic("orders"), &pubs, LO), Ok(()));
        assert!(decide(Some(&acl), &topic("secret"), &pubs, LO).is_err());
        assert_eq!(decide(Some(&acl), &topic("secret-ok"), &pubs, LO), Ok(()));
        assert_eq!(
            decide(Some(&acl), &topic("secret-ok-longer-x"), &pubs, LO),
            Ok(())
        );
        // Same resource twice cannot be stored (a merge replaces); same rank, two prefixes
        // of equal length: deny first.
        let mut tie = SubjectAcl {
            custom: vec![
                entry("Topic:ab*", &[Action::Pub], &[], Decision::Allow),
                entry("Topic:a*", &[Action::Pub], &[], Decision::Deny),
                entry("Topic:ac*", &[Action::Pub], &[], Decision::Deny),
            ],
            default: vec![],
        };
        assert_eq!(decide(Some(&tie), &topic("abc"), &pubs, LO), Ok(()));
        assert!(decide(Some(&tie), &topic("a-x"), &pubs, LO).is_err());
        tie.custom
            .push(entry("Topic:ab*", &[Action::Pub], &[], Decision::Deny));
        assert!(decide(Some(&tie), &topic("abc"), &pubs, LO).is_err());
    }

    #[test]
    fn default_policy_only_when_no_custom_entry_matches_and_source_ips_filter() {
        let mut acl = SubjectAcl::default();
        acl.merge(vec![
            (
                PolicyType::Custom,
                vec![entry(
                    "Topic:t",
                    &[Action::Sub],
                    &["10.0.0.0/8"],
                    Decision::Allow,
                )],
            ),
            (
                PolicyType::Default,
                vec![entry("Topic:*", &[Action::Pub], &[], Decision::Allow)],
            ),
        ]);
        let ten: Option<IpAddr> = Some("10.1.1.1".parse().unwrap());
        assert_eq!(decide(Some(&acl), &topic("t"), &[Action::Sub], ten), Ok(()));
        assert!(decide(Some(&acl), &topic("t"), &[Action::Sub], LO).is_err());
        assert_eq!(decide(Some(&acl), &topic("x"), &[Action::Pub], LO), Ok(()));
        // Unknown address: the address-bound Allow does not apply (the default then
        // decides: no Sub there).
        assert!(decide(Some(&acl), &topic("t"), &[Action::Sub], None).is_err());
        acl.custom.push(entry(
            "Topic:x",
            &[Action::Pub],
            &["10.0.0.0/8"],
            Decision::Deny,
        ));
        assert!(decide(Some(&acl), &topic("x"), &[Action::Pub], None).is_err());
        assert_eq!(decide(Some(&acl), &topic("x"), &[Action::Pub], LO), Ok(()));
    }
}
