//! SQL92 property filters with RocketMQ's grammar and semantics (its `filter` module's
//! `SelectorParser`): a subscription expression is parsed once into an [`Expression`] tree,
//! then evaluated against each record's properties.
//!
//! Grammar (keywords case-insensitive; `a`..`z`, `A`..`Z`, `_`, `$` start a property name,
//! which may go on with digits and `.`):
//!
//! ```text
//! expr       := and ( OR and )*
//! and        := equality ( AND equality )*
//! equality   := comparison ( ( '=' | '<>' ) comparison | IS [NOT] NULL )*
//! comparison := unary ( ( '>' | '>=' | '<' | '<=' ) unary
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN '(' string ( ',' string )* ')' )*
//! unary      := NOT unary | [ '+' | '-' ] number | primary
//! primary    := string | number | TRUE | FALSE | NULL | property | '(' expr ')'
//! ```
//!
//! Strings are single-quoted (`''` is a quote inside one); numbers are 64-bit integers
//! (`42`) or doubles (`4.2`, `.5`, `1e3`).
//!
//! Semantics (RocketMQ's, kept on purpose):
//! - Property values are strings. Compared with a number, the value is read as that number's
//!   type (`Long.valueOf` / `Double.valueOf`); two properties under `>`/`<` are both read as
//!   doubles. A value that does not read as a number is a *type mismatch*: the whole
//!   expression is false for that message (RocketMQ's evaluation throws and the broker skips
//!   the message), never an error at pull time.
//! - A missing property is NULL: comparisons with it are unknown, `NOT unknown` is unknown,
//!   and an unknown result does not match. `IS NULL` is true for it.
//!   `AND` answers unknown as soon as its left side is unknown; `OR` is true if either side
//!   is.
//! - `a <> b` is `NOT (a = b)`; `a BETWEEN x AND y` is `a >= x AND a <= y`; `NOT BETWEEN` is
//!   `a < x OR a > y`; `IN` compares strings only.
//! - Checked at parse time, as RocketMQ does: `>`, `>=`, `<`, `<=` and `BETWEEN` take numbers
//!   or properties (not strings or booleans); `=` does not take `NULL` (use `IS NULL`); `IN`
//!   needs a property on its left; a `BETWEEN` of two numbers needs low <= high; the whole
//!   expression, and each side of `AND`, `OR` and `NOT`, must be a condition or a property.
//! - A property alone as a condition (`a AND b`) is unknown when missing and false when
//!   present (its value is a string, never a boolean).
//!
//! Not supported: RocketMQ 5's `CONTAINS`, `STARTSWITH` and `ENDSWITH`, `+`/`-` on anything
//! but a number literal. Bounds: [`EXPRESSION_BYTES_MAX`], [`NESTING_MAX`].
//!
//! Pure: no I/O. Parsing never panics on any input (proptest in `sql92/tests.rs`), and
//! printing an expression ([`std::fmt::Display`]) then parsing it gives the same tree.

mod eval;
mod lex;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;

/// Longest expression accepted, in bytes.
pub const EXPRESSION_BYTES_MAX: usize = 4096;
/// Deepest nesting of parentheses and `NOT`s accepted (bounds the parser's recursion).
pub const NESTING_MAX: usize = 64;

/// Why an expression did not parse: the byte offset in the expression and what was wrong or
/// expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at {position}: {message}")]
pub struct ParseError {
    /// Byte offset from the start of the expression.
    pub position: usize,
    pub message: String,
}

/// A compiled expression. Cheap to evaluate many times; build it once per subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Expression {
    root: Node,
}

impl Expression {
    /// Parses `text` (at most [`EXPRESSION_BYTES_MAX`] bytes).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        parse::parse(text).map(|root| Expression { root })
    }

    /// Whether a message whose properties `lookup` answers matches. Missing properties and
    /// type mismatches never match; this never fails.
    pub fn matches<'p>(&self, lookup: impl Fn(&str) -> Option<&'p str>) -> bool {
        eval::matches(&self.root, &|key| lookup(key))
    }

    /// Whether a record with this encoded properties block (RocketMQ's text form, see
    /// [`crate::properties`]) matches. `TAGS` is a property like any other.
    pub fn matches_properties(&self, block: &[u8]) -> bool {
        self.matches(|key| crate::properties::get(block, key))
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.root)
    }
}

/// A node of the expression tree. Values and conditions share one type because RocketMQ's
/// grammar lets a parenthesized condition be compared (`(a > 1) = TRUE`).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Property(String),
    /// A property used as a condition (`a AND b`).
    PropertyCondition(String),
    Str(String),
    Long(i64),
    Double(f64),
    Bool(bool),
    Null,
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Compare(CompareOp, Box<Node>, Box<Node>),
    Between {
        value: Box<Node>,
        low: Box<Node>,
        high: Box<Node>,
        negated: bool,
    },
    In {
        property: String,
        list: Vec<String>,
        negated: bool,
    },
    IsNull {
        value: Box<Node>,
        negated: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompareOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl CompareOp {
    fn symbol(self) -> &'static str {
        match self {
            CompareOp::Eq => "=",
            CompareOp::Ne => "<>",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
        }
    }
}

impl fmt::Display for Node {
    /// Fully parenthesized, so parsing the text gives this tree back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Property(p) | Node::PropertyCondition(p) => f.write_str(p),
            Node::Str(s) => write_string(f, s),
            Node::Long(n) => write!(f, "{n}"),
            Node::Double(d) => write!(f, "{d:?}"),
            Node::Bool(true) => f.write_str("TRUE"),
            Node::Bool(false) => f.write_str("FALSE"),
            Node::Null => f.write_str("NULL"),
            Node::Not(n) => write!(f, "(NOT {n})"),
            Node::And(l, r) => write!(f, "({l} AND {r})"),
            Node::Or(l, r) => write!(f, "({l} OR {r})"),
            Node::Compare(op, l, r) => write!(f, "({l} {} {r})", op.symbol()),
            Node::Between {
                value,
                low,
                high,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({value} {not}BETWEEN {low} AND {high})")
            }
            Node::In {
                property,
                list,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({property} {not}IN (")?;
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_string(f, s)?;
                }
                f.write_str("))")
            }
            Node::IsNull { value, negated } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({value} IS {not}NULL)")
            }
        }
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    write!(f, "'{}'", s.replace('\'', "''"))
}
