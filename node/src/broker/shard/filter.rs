//! Subscription filters on the broker: tag expressions (matched on the ConsumeQueue unit's tag
//! hash) and SQL92 expressions (matched on each record's properties, only with
//! `enablePropertyFilter=true`).
//!
//! A SQL92 expression is compiled once and reused: compiled trees are cached per thread (one
//! shard per thread), keyed by the expression's text, at most
//! [`SQL_FILTERS_PER_SHARD_MAX`](limits::SQL_FILTERS_PER_SHARD_MAX) of them. The cache is pure
//! memoization of [`Expression::parse`], so sharing it between shards of one thread (the
//! simulator) changes nothing. A consumer learns of a bad expression when it subscribes (its
//! HEART_BEAT is refused) and again on any pull that carries one.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{HeartbeatData, PullRequest};
use ringmq_wire::sql92::Expression;

use crate::broker::shard::Shard;
use crate::limits;
use crate::net::reply::Reply;
use ringmq_wire::record;

/// A parsed tag expression: `None` = every message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter(Option<Vec<i64>>);

impl TagFilter {
    /// `*` or empty matches everything; `TagA || TagB` matches those tags.
    pub fn parse(expr: &str) -> Self {
        let expr = expr.trim();
        if expr.is_empty() || expr == "*" {
            return TagFilter(None);
        }
        let hashes = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(record::tag_hash)
            .collect();
        TagFilter(Some(hashes))
    }

    pub fn matches(&self, tag_hash: i64) -> bool {
        match &self.0 {
            None => true,
            Some(h) => h.contains(&tag_hash),
        }
    }
}

/// What a pull keeps.
#[derive(Debug, Clone)]
pub enum Filter {
    Tags(TagFilter),
    Sql(Rc<Expression>),
}

impl Filter {
    /// The filter of a pull, compiled (or found compiled); an error reply when the broker
    /// does not filter by SQL92 or the expression does not parse.
    pub fn for_pull(shard: &Shard, h: &PullRequest) -> Result<Filter, Reply> {
        match h.filter_type {
            FilterType::Tag => Ok(Filter::Tags(TagFilter::parse(&h.expression))),
            FilterType::Sql92 => {
                compile(shard, &h.consumer_group, &h.topic, &h.expression).map(Filter::Sql)
            }
        }
    }

    /// Whether a ConsumeQueue unit's tag hash may match (SQL92: decided on the record).
    pub fn tag_matches(&self, tag_hash: i64) -> bool {
        match self {
            Filter::Tags(t) => t.matches(tag_hash),
            Filter::Sql(_) => true,
        }
    }

    /// The expression to run on records' properties, if any.
    pub fn sql(&self) -> Option<&Expression> {
        match self {
            Filter::Tags(_) => None,
            Filter::Sql(e) => Some(e),
        }
    }
}

/// Checks every SQL92 subscription of a heartbeat before the broker records it, so a consumer
/// with a bad expression fails when it subscribes, not on its first pull.
pub fn check_heartbeat(shard: &Shard, hb: &HeartbeatData) -> Result<(), Reply> {
    for g in &hb.consumer_groups {
        for s in &g.subscriptions {
            if s.filter_type == FilterType::Sql92 {
                compile(shard, &g.group, &s.topic, &s.expression)?;
            }
        }
    }
    Ok(())
}

thread_local! {
    static COMPILED: RefCell<HashMap<String, Rc<Expression>>> = RefCell::new(HashMap::new());
}

fn compile(shard: &Shard, group: &str, topic: &str, text: &str) -> Result<Rc<Expression>, Reply> {
    if !shard.broker.config.enable_property_filter {
        return Err(Reply::error(
            Status::PropertyFilterDisabled,
            format!(
                "group {group}, topic {topic}: this broker does not filter by SQL92 \
                 (enablePropertyFilter=false); subscribe with a tag expression or enable it"
            ),
        ));
    }
    if let Some(e) = COMPILED.with(|c| c.borrow().get(text).cloned()) {
        return Ok(e);
    }
    let e = Expression::parse(text).map(Rc::new).map_err(|e| {
        Reply::error(
            Status::SubscriptionParseFailed,
            format!("group {group}, topic {topic}: SQL92 expression {text:?}: {e}"),
        )
    })?;
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= limits::SQL_FILTERS_PER_SHARD_MAX {
            // Simplest bound: start over. Live subscriptions each cost one parse to return.
            c.clear();
        }
        c.insert(text.to_string(), Rc::clone(&e));
    });
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions() {
        assert!(TagFilter::parse("*").matches(123));
        assert!(TagFilter::parse("").matches(0));
        let f = TagFilter::parse("TagA || TagB");
        assert!(f.matches(record::tag_hash("TagA")));
        assert!(f.matches(record::tag_hash("TagB")));
        assert!(!f.matches(record::tag_hash("TagC")));
    }
}
