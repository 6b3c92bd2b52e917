//! What a subscription keeps: RocketMQ's `MessageSelector`, a tag expression (`*`,
//! `TagA || TagB`, matched by the broker on tag hashes and re-checked here for hash
//! collisions) or a SQL92 expression over the message properties (matched by the broker,
//! which must run with `enablePropertyFilter=true`). Both are checked locally with the
//! broker's own parsers before anything is sent, so a bad expression fails where it is
//! given.

use ringmq_wire::command::pull::{FilterType, TagFilter};
use ringmq_wire::sql92::Expression;

use crate::error::{Error, Result};

/// A subscription's filter: [`MessageSelector::tag`] or [`MessageSelector::sql`]. A `&str`
/// or `String` converts to a tag selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSelector {
    filter_type: FilterType,
    expression: String,
}

impl MessageSelector {
    /// Every message (`*`).
    pub fn all() -> Self {
        Self::tag("*")
    }

    /// A tag expression: `*` (or empty) for every message, else tags separated by `||`.
    pub fn tag(expression: impl Into<String>) -> Self {
        MessageSelector {
            filter_type: FilterType::Tag,
            expression: expression.into(),
        }
    }

    /// A SQL92 expression over message properties (RocketMQ's `MessageSelector.bySql`), e.g.
    /// `region = 'eu' AND price BETWEEN 10 AND 20`; `TAGS` is the tag. Missing properties
    /// and values that do not read as the number they are compared with never match.
    pub fn sql(expression: impl Into<String>) -> Self {
        MessageSelector {
            filter_type: FilterType::Sql92,
            expression: expression.into(),
        }
    }

    pub fn filter_type(&self) -> FilterType {
        self.filter_type
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Parses the expression as the broker will; the error names the position and what was
    /// expected (`SQL92 expression "a >": at 3: expected a value after '>', found the end`).
    pub fn check(&self) -> Result<()> {
        match self.filter_type {
            FilterType::Tag => TagFilter::parse(&self.expression)
                .map(|_| ())
                .map_err(|e| Error::Config(format!("tag expression {:?}: {e}", self.expression))),
            FilterType::Sql92 => Expression::parse(&self.expression)
                .map(|_| ())
                .map_err(|e| Error::Config(format!("SQL92 expression {:?}: {e}", self.expression))),
        }
    }

    /// The tag check for messages the broker returned (hash collisions), parsed once per
    /// pull; `None` when every message passes (`*`, SQL92: decided by the broker alone, or
    /// an expression that does not parse, which [`MessageSelector::check`] refused earlier).
    pub(crate) fn tag_filter(&self) -> Option<TagFilter<'_>> {
        match self.filter_type {
            FilterType::Sql92 => None,
            FilterType::Tag => match TagFilter::parse(&self.expression) {
                Ok(TagFilter::All) | Err(_) => None,
                Ok(f) => Some(f),
            },
        }
    }
}

impl From<&str> for MessageSelector {
    fn from(expression: &str) -> Self {
        Self::tag(expression)
    }
}

impl From<String> for MessageSelector {
    fn from(expression: String) -> Self {
        Self::tag(expression)
    }
}

impl From<&MessageSelector> for MessageSelector {
    fn from(s: &MessageSelector) -> Self {
        s.clone()
    }
}

impl std::fmt::Display for MessageSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.filter_type {
            FilterType::Tag => write!(f, "tag {}", self.expression),
            FilterType::Sql92 => write!(f, "SQL92 {}", self.expression),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_like_the_broker() {
        assert!(MessageSelector::all().check().is_ok());
        assert!(MessageSelector::sql("a > 1 AND TAGS IN ('x')")
            .check()
            .is_ok());
        let e = MessageSelector::sql("a >").check().unwrap_err().to_string();
        assert!(e.contains("at 3: expected a value after '>'"), "{e}");
        let tags = (0..100)
            .map(|i| format!("T{i}"))
            .collect::<Vec<_>>()
            .join("||");
        assert!(MessageSelector::tag(tags).check().is_err());
        assert_eq!(MessageSelector::from("TagA"), MessageSelector::tag("TagA"));
    }

    #[test]
    fn tag_recheck_only_for_tags() {
        let tag_a = MessageSelector::tag("TagA");
        let f = tag_a.tag_filter().expect("a tag list filters");
        assert!(!f.matches(Some("TagB")));
        assert!(f.matches(Some("TagA")));
        assert!(MessageSelector::sql("TAGS = 'TagA'").tag_filter().is_none());
        assert!(MessageSelector::all().tag_filter().is_none());
    }
}
