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

    /// Whether a message the broker returned passes the tag check (hash collisions); SQL92
    /// is decided by the broker alone.
    pub(crate) fn keeps_tag(&self, tag: Option<&str>) -> bool {
        match self.filter_type {
            FilterType::Sql92 => true,
            FilterType::Tag => match TagFilter::parse(&self.expression) {
                Ok(f) => f.matches(tag),
                Err(_) => true,
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
        assert!(!MessageSelector::tag("TagA").keeps_tag(Some("TagB")));
        assert!(MessageSelector::tag("TagA").keeps_tag(Some("TagA")));
        assert!(MessageSelector::sql("TAGS = 'TagA'").keeps_tag(Some("TagB")));
    }
}
