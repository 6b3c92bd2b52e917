//! Recursive descent over the grammar in the module docs, with RocketMQ's parse-time checks.
//! Recursion is bounded by [`NESTING_MAX`]; every error names a byte offset.

use super::lex::{self, Kw, Tok};
use super::{CompareOp, Node, ParseError, EXPRESSION_BYTES_MAX, NESTING_MAX};

pub(super) fn parse(text: &str) -> Result<Node, ParseError> {
    if text.len() > EXPRESSION_BYTES_MAX {
        return Err(ParseError {
            position: EXPRESSION_BYTES_MAX,
            message: format!(
                "the expression is {} bytes, over the maximum of {EXPRESSION_BYTES_MAX}",
                text.len()
            ),
        });
    }
    let mut p = Parser {
        toks: lex::tokens(text)?,
        at: 0,
        depth: 0,
    };
    let start = p.pos();
    let root = p.or()?;
    if p.peek() != &Tok::End {
        return Err(p.error(format!(
            "expected an operator, AND, OR or the end, found {}",
            p.peek().describe()
        )));
    }
    condition(root, start)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].1
    }

    fn peek2(&self) -> &Tok {
        self.toks.get(self.at + 1).map_or(&Tok::End, |t| &t.1)
    }

    fn pos(&self) -> usize {
        self.toks[self.at].0
    }

    fn bump(&mut self) -> (usize, Tok) {
        let t = self.toks[self.at].clone();
        if t.1 != Tok::End {
            self.at += 1;
        }
        t
    }

    fn error(&self, message: String) -> ParseError {
        ParseError {
            position: self.pos(),
            message,
        }
    }

    fn eat_kw(&mut self, kw: Kw) -> bool {
        if self.peek() == &Tok::Kw(kw) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, want: Tok, after: &str) -> Result<(), ParseError> {
        if self.peek() == &want {
            self.at += 1;
            return Ok(());
        }
        Err(self.error(format!(
            "expected {} after {after}, found {}",
            want.describe(),
            self.peek().describe()
        )))
    }

    fn or(&mut self) -> Result<Node, ParseError> {
        let start = self.pos();
        let mut left = self.and()?;
        while self.peek() == &Tok::Kw(Kw::Or) {
            let (op_at, _) = self.bump();
            let right_at = self.pos();
            let right = self.and()?;
            left = Node::Or(
                Box::new(condition(left, start)?),
                Box::new(condition(right, right_at).map_err(|e| after_op(e, op_at, "OR"))?),
            );
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, ParseError> {
        let start = self.pos();
        let mut left = self.equality()?;
        while self.peek() == &Tok::Kw(Kw::And) {
            let (op_at, _) = self.bump();
            let right_at = self.pos();
            let right = self.equality()?;
            left = Node::And(
                Box::new(condition(left, start)?),
                Box::new(condition(right, right_at).map_err(|e| after_op(e, op_at, "AND"))?),
            );
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Node, ParseError> {
        let mut left = self.comparison()?;
        loop {
            let op = match self.peek() {
                Tok::Sym("=") => CompareOp::Eq,
                Tok::Sym("<>") => CompareOp::Ne,
                Tok::Kw(Kw::Is) => {
                    self.bump();
                    let negated = self.eat_kw(Kw::Not);
                    if !self.eat_kw(Kw::Null) {
                        let what = if negated { "IS NOT" } else { "IS" };
                        return Err(self.error(format!(
                            "expected NULL after {what}, found {}",
                            self.peek().describe()
                        )));
                    }
                    left = Node::IsNull {
                        value: Box::new(left),
                        negated,
                    };
                    continue;
                }
                _ => return Ok(left),
            };
            let (op_at, _) = self.bump();
            let right = self.comparison()?;
            check_equal(&left, &right, op_at, op)?;
            left = Node::Compare(op, Box::new(left), Box::new(right));
        }
    }

    fn comparison(&mut self) -> Result<Node, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Sym(">") => CompareOp::Gt,
                Tok::Sym(">=") => CompareOp::Ge,
                Tok::Sym("<") => CompareOp::Lt,
                Tok::Sym("<=") => CompareOp::Le,
                Tok::Kw(Kw::Between) => {
                    left = self.between(left, false)?;
                    continue;
                }
                Tok::Kw(Kw::In) => {
                    left = self.in_list(left, false)?;
                    continue;
                }
                Tok::Kw(Kw::Not) if self.peek2() == &Tok::Kw(Kw::Between) => {
                    self.bump();
                    left = self.between(left, true)?;
                    continue;
                }
                Tok::Kw(Kw::Not) if self.peek2() == &Tok::Kw(Kw::In) => {
                    self.bump();
                    left = self.in_list(left, true)?;
                    continue;
                }
                _ => return Ok(left),
            };
            let (op_at, _) = self.bump();
            let right = self.unary()?;
            check_ordered(&left, op_at, op.symbol())?;
            check_ordered(&right, op_at, op.symbol())?;
            left = Node::Compare(op, Box::new(left), Box::new(right));
        }
    }

    fn between(&mut self, value: Node, negated: bool) -> Result<Node, ParseError> {
        let (op_at, _) = self.bump();
        let low = self.unary()?;
        self.expect(Tok::Kw(Kw::And), "the low bound of BETWEEN")?;
        let high = self.unary()?;
        for n in [&value, &low, &high] {
            check_ordered(n, op_at, "BETWEEN")?;
        }
        if let (Some(l), Some(h)) = (number(&low), number(&high)) {
            if h < l {
                return Err(ParseError {
                    position: op_at,
                    message: format!("BETWEEN needs low <= high, got {low} AND {high}"),
                });
            }
        }
        Ok(Node::Between {
            value: Box::new(value),
            low: Box::new(low),
            high: Box::new(high),
            negated,
        })
    }

    fn in_list(&mut self, left: Node, negated: bool) -> Result<Node, ParseError> {
        let (op_at, _) = self.bump();
        let Node::Property(property) = left else {
            return Err(ParseError {
                position: op_at,
                message: format!("IN needs a property on its left, found {left}"),
            });
        };
        self.expect(Tok::Sym("("), "IN")?;
        let mut list = Vec::new();
        loop {
            match self.bump() {
                (_, Tok::Str(s)) => list.push(s),
                (at, other) => {
                    return Err(ParseError {
                        position: at,
                        message: format!(
                            "expected a string in the IN list, found {}",
                            other.describe()
                        ),
                    })
                }
            }
            match self.peek() {
                Tok::Sym(",") => {
                    self.bump();
                }
                Tok::Sym(")") => {
                    self.bump();
                    break;
                }
                other => {
                    return Err(self.error(format!(
                        "expected ',' or ')' in the IN list, found {}",
                        other.describe()
                    )))
                }
            }
        }
        Ok(Node::In {
            property,
            list,
            negated,
        })
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        if self.depth >= NESTING_MAX {
            return Err(self.error(format!(
                "nested deeper than {NESTING_MAX} parentheses or NOTs"
            )));
        }
        self.depth += 1;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<Node, ParseError> {
        let (at, tok) = self.bump();
        match tok {
            Tok::Kw(Kw::Not) => {
                let operand_at = self.pos();
                let operand = self.unary()?;
                let operand = condition(operand, operand_at).map_err(|e| after_op(e, at, "NOT"))?;
                Ok(Node::Not(Box::new(operand)))
            }
            Tok::Sym(sign @ ("+" | "-")) => match self.bump() {
                (n_at, Tok::Integer(digits)) => integer(&digits, sign == "-", n_at),
                (n_at, Tok::Float(text)) => float(&text, sign == "-", n_at),
                (n_at, other) => Err(ParseError {
                    position: n_at,
                    message: format!(
                        "expected a number after '{sign}', found {}",
                        other.describe()
                    ),
                }),
            },
            Tok::Sym("(") => {
                let inner = self.or()?;
                self.expect(Tok::Sym(")"), "a parenthesized expression")?;
                Ok(inner)
            }
            Tok::Integer(digits) => integer(&digits, false, at),
            Tok::Float(text) => float(&text, false, at),
            Tok::Str(s) => Ok(Node::Str(s)),
            Tok::Ident(name) => Ok(Node::Property(name)),
            Tok::Kw(Kw::True) => Ok(Node::Bool(true)),
            Tok::Kw(Kw::False) => Ok(Node::Bool(false)),
            Tok::Kw(Kw::Null) => Ok(Node::Null),
            other => {
                self.at -= usize::from(other != Tok::End);
                let after = match self.at.checked_sub(1) {
                    Some(prev) => format!(" after {}", self.toks[prev].1.describe()),
                    None => String::new(),
                };
                Err(ParseError {
                    position: at,
                    message: format!("expected a value{after}, found {}", other.describe()),
                })
            }
        }
    }
}

fn integer(digits: &str, negative: bool, at: usize) -> Result<Node, ParseError> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    text.parse::<i64>().map(Node::Long).map_err(|_| ParseError {
        position: at,
        message: format!("integer {text} is outside the 64-bit range"),
    })
}

fn float(text: &str, negative: bool, at: usize) -> Result<Node, ParseError> {
    let v: f64 = text.parse().map_err(|_| ParseError {
        position: at,
        message: format!("{text} is not a number"),
    })?;
    if !v.is_finite() {
        return Err(ParseError {
            position: at,
            message: format!("number {text} is outside the double range"),
        });
    }
    Ok(Node::Double(if negative { -v } else { v }))
}

/// The numeric value of a number literal.
fn number(n: &Node) -> Option<f64> {
    match *n {
        #[allow(clippy::cast_precision_loss)]
        Node::Long(v) => Some(v as f64),
        Node::Double(v) => Some(v),
        _ => None,
    }
}

/// RocketMQ's `asBooleanExpression`: a condition stays, a property becomes one, anything
/// else is refused.
fn condition(n: Node, at: usize) -> Result<Node, ParseError> {
    match n {
        Node::Property(p) => Ok(Node::PropertyCondition(p)),
        Node::Str(_) | Node::Long(_) | Node::Double(_) => Err(ParseError {
            position: at,
            message: format!("expected a condition, found the value {n}"),
        }),
        other => Ok(other),
    }
}

fn after_op(mut e: ParseError, _op_at: usize, op: &str) -> ParseError {
    if e.message.starts_with("expected a condition") {
        e.message = format!("{} after {op}", e.message);
    }
    e
}

/// RocketMQ's `checkLessThanOperand`: numbers and properties only.
fn check_ordered(n: &Node, op_at: usize, op: &str) -> Result<(), ParseError> {
    match n {
        Node::Property(_) | Node::Long(_) | Node::Double(_) => Ok(()),
        other => Err(ParseError {
            position: op_at,
            message: format!("{op} compares numbers or properties, not {}", kind(other)),
        }),
    }
}

/// RocketMQ's `checkEqualOperand` and `checkEqualOperandCompatability`.
fn check_equal(l: &Node, r: &Node, op_at: usize, op: CompareOp) -> Result<(), ParseError> {
    if matches!(l, Node::Null) || matches!(r, Node::Null) {
        return Err(ParseError {
            position: op_at,
            message: format!(
                "NULL cannot be compared with '{}'; use IS NULL",
                op.symbol()
            ),
        });
    }
    let constant = |n: &Node| matches!(n, Node::Str(_) | Node::Long(_) | Node::Double(_));
    if matches!(l, Node::Bool(_)) && constant(r) {
        return Err(ParseError {
            position: op_at,
            message: format!("{l} cannot be compared with {r}"),
        });
    }
    Ok(())
}

fn kind(n: &Node) -> String {
    match n {
        Node::Str(s) => format!("the string {}", Node::Str(s.clone())),
        Node::Bool(_) | Node::Null => format!("{n}"),
        _ => format!("a condition ({n})"),
    }
}
