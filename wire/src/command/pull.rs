//! PULL_MESSAGE (11). The response body is the found records back to back, sent straight
//! from the CommitLog; the header says where to pull next. With no message at the offset the
//! broker parks the pull up to `suspend_timeout_ms` (long polling) before answering
//! PULL_NOT_FOUND.
//!
//! Tag expressions are RocketMQ's: `*` (or empty) matches every message, otherwise tags
//! separated by `||` (`TagA || TagB`); [`TagFilter`] parses one. SQL92 expressions are
//! evaluated by the broker on the properties.

crate::wire_enum! {
    /// How a subscription expression is read (RocketMQ `ExpressionType`).
    pub enum FilterType: u8 ("filter type") {
        Tag = 0 => "TAG",
        Sql92 = 1 => "SQL92",
    }
}

crate::wire_struct! {
    /// PULL_MESSAGE request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PullRequest {
        pub consumer_group: String,
        pub topic: String,
        pub queue_id: u32,
        /// First queue offset wanted.
        pub queue_offset: u64,
        /// At most this many records.
        pub max_messages: u32,
        /// At most this many body bytes (at least one record is returned if any exists).
        pub max_bytes: u32,
        pub filter_type: FilterType,
        /// `*`, `TagA || TagB`, or a SQL92 expression.
        pub expression: String,
        /// Park the pull up to this long when nothing is available (0: answer at once).
        pub suspend_timeout_ms: u32,
        /// Consumer offset to commit with this pull (RocketMQ's `commitOffset`).
        pub commit_offset: Option<u64>,
    }
}

crate::wire_struct! {
    /// PULL_MESSAGE response fields: present on SUCCESS, PULL_NOT_FOUND,
    /// PULL_RETRY_IMMEDIATELY and PULL_OFFSET_MOVED.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PullResponse {
        /// Offset to pull from next.
        pub next_begin_offset: u64,
        pub min_offset: u64,
        /// One past the last stored queue offset.
        pub max_offset: u64,
        /// Records in the body.
        pub message_count: u32,
        /// Broker id to pull from next time (a slave when the master suggests it).
        pub suggest_broker_id: u64,
    }
}

/// Most tags one expression may list.
pub const TAGS_PER_EXPRESSION_MAX: usize = 64;

/// A parsed tag expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagFilter<'a> {
    /// `*` or empty: every message.
    All,
    /// Messages with one of these tags.
    Tags(Vec<&'a str>),
}

impl<'a> TagFilter<'a> {
    /// Parses `*`, empty, or `TagA || TagB` (blanks around tags ignored, empty tags dropped).
    pub fn parse(expression: &'a str) -> crate::error::Result<Self> {
        let expr = expression.trim();
        if expr.is_empty() || expr == "*" {
            return Ok(TagFilter::All);
        }
        let tags: Vec<&str> = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        if tags.len() > TAGS_PER_EXPRESSION_MAX {
            return Err(crate::WireError::TooLong {
                what: "tag expression",
                len: tags.len(),
                max: TAGS_PER_EXPRESSION_MAX,
            });
        }
        if tags.is_empty() {
            return Ok(TagFilter::All);
        }
        Ok(TagFilter::Tags(tags))
    }

    /// ConsumeQueue tag hashes of the listed tags (for the broker's first-pass filter).
    pub fn hashes(&self) -> Vec<i64> {
        match self {
            TagFilter::All => Vec::new(),
            TagFilter::Tags(tags) => tags.iter().map(|t| crate::record::tag_hash(t)).collect(),
        }
    }

    /// Whether a message with `tag` passes.
    pub fn matches(&self, tag: Option<&str>) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Tags(tags) => tag.is_some_and(|t| tags.contains(&t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn pull_round_trip() {
        let req = PullRequest {
            consumer_group: "cg".into(),
            topic: "orders".into(),
            queue_id: 1,
            queue_offset: 42,
            max_messages: 32,
            max_bytes: 1 << 20,
            filter_type: FilterType::Tag,
            expression: "TagA || TagB".into(),
            suspend_timeout_ms: 15_000,
            commit_offset: None,
        };
        assert_eq!(PullRequest::decode(&req.to_vec().unwrap()).unwrap(), req);
        let resp = PullResponse {
            next_begin_offset: 74,
            min_offset: 0,
            max_offset: 100,
            message_count: 32,
            suggest_broker_id: 0,
        };
        let bytes = resp.to_vec().unwrap();
        assert_eq!(bytes.len(), 8 * 4 + 4);
        assert_eq!(PullResponse::decode(&bytes).unwrap(), resp);
    }

    #[test]
    fn tag_expressions() {
        assert_eq!(TagFilter::parse("*").unwrap(), TagFilter::All);
        assert_eq!(TagFilter::parse(" ").unwrap(), TagFilter::All);
        let f = TagFilter::parse("TagA || TagB").unwrap();
        assert_eq!(f, TagFilter::Tags(vec!["TagA", "TagB"]));
        assert!(f.matches(Some("TagB")));
        assert!(!f.matches(Some("TagC")));
        assert!(!f.matches(None));
        assert_eq!(f.hashes()[0], crate::record::tag_hash("TagA"));
        assert!(TagFilter::parse(&"a||".repeat(100)).is_err());
    }
}
