//! Evaluation with RocketMQ's three-valued logic: a value is NULL (a missing property, an
//! unknown condition), a boolean, a 64-bit integer, a double or a string. A type mismatch
//! (a string that does not read as the number it is compared with) stops the evaluation and
//! the message does not match, as RocketMQ's exception does.

use std::cmp::Ordering;

use super::{CompareOp, Node};

#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

/// A string compared with a number did not read as one.
struct Mismatch;

type Eval<'a> = Result<Value<'a>, Mismatch>;

pub(super) fn matches<'a>(root: &'a Node, lookup: &dyn Fn(&str) -> Option<&'a str>) -> bool {
    matches!(eval(root, lookup), Ok(Value::Bool(true)))
}

fn eval<'a>(n: &'a Node, lookup: &dyn Fn(&str) -> Option<&'a str>) -> Eval<'a> {
    Ok(match n {
        Node::Property(p) => lookup(p).map_or(Value::Null, Value::Str),
        // A property's value is a string, never a boolean: present is false.
        Node::PropertyCondition(p) => lookup(p).map_or(Value::Null, |_| Value::Bool(false)),
        Node::Str(s) => Value::Str(s),
        Node::Long(v) => Value::Long(*v),
        Node::Double(v) => Value::Double(*v),
        Node::Bool(b) => Value::Bool(*b),
        Node::Null => Value::Null,
        Node::Not(x) => match eval(x, lookup)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => Value::Null,
        },
        Node::And(l, r) => and(eval(l, lookup)?, || eval(r, lookup))?,
        Node::Or(l, r) => or(eval(l, lookup)?, || eval(r, lookup))?,
        Node::Compare(op, l, r) => compare(*op, eval(l, lookup)?, eval(r, lookup)?)?,
        Node::Between {
            value,
            low,
            high,
            negated,
        } => {
            let v = eval(value, lookup)?;
            let (lo, hi) = (eval(low, lookup)?, eval(high, lookup)?);
            if *negated {
                or(compare(CompareOp::Lt, v, lo)?, || {
                    compare(CompareOp::Gt, v, hi)
                })?
            } else {
                and(compare(CompareOp::Ge, v, lo)?, || {
                    compare(CompareOp::Le, v, hi)
                })?
            }
        }
        Node::In {
            property,
            list,
            negated,
        } => match lookup(property) {
            None => Value::Null,
            Some(v) => Value::Bool(list.iter().any(|s| s == v) != *negated),
        },
        Node::IsNull { value, negated } => {
            Value::Bool(matches!(eval(value, lookup)?, Value::Null) != *negated)
        }
    })
}

/// RocketMQ's AND: unknown as soon as the left side is, false if it is false.
fn and<'a>(l: Value<'a>, r: impl FnOnce() -> Eval<'a>) -> Eval<'a> {
    match l {
        Value::Bool(true) => match r()? {
            Value::Bool(b) => Ok(Value::Bool(b)),
            _ => Ok(Value::Null),
        },
        Value::Bool(false) => Ok(Value::Bool(false)),
        _ => Ok(Value::Null),
    }
}

/// RocketMQ's OR: true if either side is, else unknown if either side is.
fn or<'a>(l: Value<'a>, r: impl FnOnce() -> Eval<'a>) -> Eval<'a> {
    if let Value::Bool(true) = l {
        return Ok(Value::Bool(true));
    }
    Ok(match (l, r()?) {
        (_, Value::Bool(true)) => Value::Bool(true),
        (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
        _ => Value::Null,
    })
}

fn compare<'a>(op: CompareOp, l: Value<'a>, r: Value<'a>) -> Eval<'a> {
    if op == CompareOp::Ne {
        return Ok(match compare(CompareOp::Eq, l, r)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => Value::Null,
        });
    }
    let ordering = match (l, r) {
        // RocketMQ's equality: NULL = NULL is true, NULL = x unknown, x = NULL false.
        (Value::Null, Value::Null) if op == CompareOp::Eq => return Ok(Value::Bool(true)),
        (_, Value::Null) if op == CompareOp::Eq => return Ok(Value::Bool(false)),
        (Value::Null, _) | (_, Value::Null) => return Ok(Value::Null),
        // Two strings under an ordering operator are read as doubles.
        (Value::Str(a), Value::Str(b)) if op != CompareOp::Eq => {
            Some(read_double(a)?.total_cmp(&read_double(b)?))
        }
        _ => order(l, r)?,
    };
    // RocketMQ answers -1 ("less") for types it cannot convert.
    let ordering = ordering.unwrap_or(Ordering::Less);
    Ok(Value::Bool(match op {
        CompareOp::Eq => ordering == Ordering::Equal,
        CompareOp::Ne => unreachable!("handled above"),
        CompareOp::Gt => ordering == Ordering::Greater,
        CompareOp::Ge => ordering != Ordering::Less,
        CompareOp::Lt => ordering == Ordering::Less,
        CompareOp::Le => ordering != Ordering::Greater,
    }))
}

/// RocketMQ's `__compare` with string conversion on: a string meeting a number is read as
/// that number's type; `None` for pairs it does not convert (booleans with numbers).
#[allow(clippy::cast_precision_loss)]
fn order(l: Value<'_>, r: Value<'_>) -> Result<Option<Ordering>, Mismatch> {
    Ok(Some(match (l, r) {
        (Value::Long(a), Value::Long(b)) => a.cmp(&b),
        (Value::Double(a), Value::Double(b)) => a.total_cmp(&b),
        (Value::Long(a), Value::Double(b)) => (a as f64).total_cmp(&b),
        (Value::Double(a), Value::Long(b)) => a.total_cmp(&(b as f64)),
        (Value::Str(a), Value::Str(b)) => a.cmp(b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(&b),
        (Value::Str(a), Value::Long(b)) => read_long(a)?.cmp(&b),
        (Value::Long(a), Value::Str(b)) => a.cmp(&read_long(b)?),
        (Value::Str(a), Value::Double(b)) => read_double(a)?.total_cmp(&b),
        (Value::Double(a), Value::Str(b)) => a.total_cmp(&read_double(b)?),
        (Value::Str(a), Value::Bool(b)) => read_bool(a).cmp(&b),
        (Value::Bool(a), Value::Str(b)) => a.cmp(&read_bool(b)),
        _ => return Ok(None),
    }))
}

/// Java's `Long.valueOf`: an optional sign and decimal digits.
fn read_long(s: &str) -> Result<i64, Mismatch> {
    s.parse().map_err(|_| Mismatch)
}

/// Java's `Double.valueOf` for decimal text (surrounding whitespace allowed); Rust's
/// `inf`/`nan` spellings are refused like any other word.
fn read_double(s: &str) -> Result<f64, Mismatch> {
    let t = s.trim();
    if t.bytes()
        .any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E')
    {
        return Err(Mismatch);
    }
    t.parse().map_err(|_| Mismatch)
}

/// Java's `Boolean.valueOf`: `true` in any case, anything else is false.
fn read_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}
