//! What a command prints: a [`Report`] of named sections, each a list of rows with fixed
//! columns, rendered either as aligned text tables (the default) or as one JSON object
//! (`--json`). Both come from the same cells, so they cannot disagree:
//!
//! - JSON: `{"<section>": [ {"<key>": value, ...}, ... ], ...}`; a *record* section (one
//!   item, e.g. `broker status`'s summary) is an object instead of a list. Values are raw:
//!   numbers as numbers, times as milliseconds since the epoch (keys end in `_ms`), absent
//!   values as `null`.
//! - Table: a header line, then one line per row, columns separated by two spaces, numbers
//!   right-aligned; a record section prints one `HEADER  value` line per column. Every
//!   quantity's unit is in its header (`[msg]`, `[msg/s]`, `[B]`, `[ms]`, `[s]`, `[%]`);
//!   times print as RFC 3339 UTC; absent values as `-`. Sections are separated by a blank
//!   line.
//!
//! Where nested JSON (a list inside each row) would print badly as a table, a command gives
//! the JSON shape and the table shape as separate sections, one marked
//! [`Section::json_only`], the others [`Section::table_only`]; both are filled from the same
//! values in one place.
//!
//! Notes (warnings, hints) go to stderr so stdout stays parseable.

use serde_json::{Map, Value};

/// How a column's cells print in a table (JSON always prints the raw value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// An integer, right-aligned.
    Int,
    /// A float with one decimal, right-aligned.
    Float,
    /// Milliseconds since the epoch, printed as RFC 3339 UTC with milliseconds.
    TimeMs,
    /// Permission bits printed as `rw`, `r`, `w`, `-`.
    Perm,
    /// A message body: control characters escaped, cut at [`BODY_CHARS_MAX`] in lists.
    Body,
}

/// Characters of a body shown in a list table (records show it whole).
pub const BODY_CHARS_MAX: usize = 64;

/// One column: its table header (with the unit), its JSON key and how it prints.
#[derive(Debug, Clone)]
pub struct Column {
    pub header: &'static str,
    pub key: &'static str,
    pub kind: Kind,
    /// Shown in the table (all columns are in the JSON).
    pub in_table: bool,
}

pub fn text(header: &'static str, key: &'static str) -> Column {
    Column {
        header,
        key,
        kind: Kind::Text,
        in_table: true,
    }
}

pub fn int(header: &'static str, key: &'static str) -> Column {
    Column {
        kind: Kind::Int,
        ..text(header, key)
    }
}

pub fn float(header: &'static str, key: &'static str) -> Column {
    Column {
        kind: Kind::Float,
        ..text(header, key)
    }
}

pub fn time(header: &'static str, key: &'static str) -> Column {
    Column {
        kind: Kind::TimeMs,
        ..text(header, key)
    }
}

pub fn perm(header: &'static str, key: &'static str) -> Column {
    Column {
        kind: Kind::Perm,
        ..text(header, key)
    }
}

pub fn body(header: &'static str, key: &'static str) -> Column {
    Column {
        kind: Kind::Body,
        ..text(header, key)
    }
}

/// A column that only the JSON shows.
pub fn json_only(key: &'static str) -> Column {
    Column {
        in_table: false,
        ..text("", key)
    }
}

impl Column {
    /// This column, shown in the table only when `yes`.
    pub fn shown(mut self, yes: bool) -> Self {
        self.in_table = yes;
        self
    }
}

/// A named list of rows.
#[derive(Debug, Clone)]
pub struct Section {
    /// The JSON key.
    pub name: &'static str,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
    /// One item: a JSON object and a vertical table.
    pub record: bool,
    /// Printed as a table (without `--json`).
    pub in_table: bool,
    /// Printed in the JSON (with `--json`).
    pub in_json: bool,
}

impl Section {
    pub fn list(name: &'static str, columns: Vec<Column>) -> Self {
        Section {
            name,
            columns,
            rows: Vec::new(),
            record: false,
            in_table: true,
            in_json: true,
        }
    }

    /// A one-item section holding `row`.
    pub fn record(name: &'static str, columns: Vec<Column>, row: Vec<Value>) -> Self {
        Section {
            name,
            columns,
            rows: vec![row],
            record: true,
            in_table: true,
            in_json: true,
        }
    }

    /// This section, left out of the tables.
    pub fn json_only(mut self) -> Self {
        self.in_table = false;
        self
    }

    /// This section, left out of the JSON.
    pub fn table_only(mut self) -> Self {
        self.in_json = false;
        self
    }

    /// Adds a row (one value per column, in column order).
    pub fn push(&mut self, row: Vec<Value>) {
        debug_assert_eq!(row.len(), self.columns.len(), "section {}", self.name);
        self.rows.push(row);
    }
}

/// What a command prints.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub sections: Vec<Section>,
    /// Lines for stderr (warnings, hints).
    pub notes: Vec<String>,
    /// The command did part of what was asked (the report says what): the one line why it
    /// exits non-zero after printing.
    pub failed: Option<String>,
}

impl Report {
    pub fn one(section: Section) -> Self {
        Report {
            sections: vec![section],
            notes: Vec::new(),
            failed: None,
        }
    }

    pub fn with(mut self, section: Section) -> Self {
        self.sections.push(section);
        self
    }

    /// The JSON document.
    pub fn to_json(&self) -> Value {
        let mut doc = Map::new();
        for s in self.sections.iter().filter(|s| s.in_json) {
            let objects: Vec<Value> = s
                .rows
                .iter()
                .map(|row| {
                    Value::Object(
                        s.columns
                            .iter()
                            .zip(row)
                            .map(|(c, v)| (c.key.to_string(), v.clone()))
                            .collect(),
                    )
                })
                .collect();
            let value = if s.record {
                objects.into_iter().next().unwrap_or(Value::Null)
            } else {
                Value::Array(objects)
            };
            doc.insert(s.name.to_string(), value);
        }
        Value::Object(doc)
    }

    /// The text tables.
    pub fn to_table(&self) -> String {
        let parts: Vec<String> = self
            .sections
            .iter()
            .filter(|s| s.in_table)
            .map(|s| {
                if s.record {
                    render_record(s)
                } else {
                    render_list(s)
                }
            })
            .collect();
        parts.join("\n")
    }
}

fn render_list(s: &Section) -> String {
    let cols: Vec<&Column> = s.columns.iter().filter(|c| c.in_table).collect();
    let idx: Vec<usize> = s
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.in_table)
        .map(|(i, _)| i)
        .collect();
    let cells: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|row| {
            idx.iter()
                .map(|&i| cell(&row[i], s.columns[i].kind, true))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = cols.iter().map(|c| c.header.chars().count()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let headers: Vec<String> = cols.iter().map(|c| c.header.to_string()).collect();
    push_line(&mut out, &headers, &cols, &widths, true);
    for row in &cells {
        push_line(&mut out, row, &cols, &widths, false);
    }
    out
}

fn push_line(out: &mut String, cells: &[String], cols: &[&Column], widths: &[usize], header: bool) {
    let last = cells.len().saturating_sub(1);
    let mut line = String::new();
    for (i, c) in cells.iter().enumerate() {
        let pad = widths[i].saturating_sub(c.chars().count());
        let right = !header && matches!(cols[i].kind, Kind::Int | Kind::Float);
        if right {
            line.push_str(&" ".repeat(pad));
            line.push_str(c);
        } else {
            line.push_str(c);
            if i != last {
                line.push_str(&" ".repeat(pad));
            }
        }
        if i != last {
            line.push_str("  ");
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn render_record(s: &Section) -> String {
    let Some(row) = s.rows.first() else {
        return String::new();
    };
    let width = s
        .columns
        .iter()
        .filter(|c| c.in_table)
        .map(|c| c.header.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (c, v) in s.columns.iter().zip(row) {
        if !c.in_table {
            continue;
        }
        let value = cell(v, c.kind, false);
        let line = format!("{:width$}  {value}", c.header);
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// How one value prints in a table.
pub fn cell(v: &Value, kind: Kind, in_list: bool) -> String {
    match (v, kind) {
        (Value::Null, _) => "-".to_string(),
        (Value::Array(a), _) if a.is_empty() => "-".to_string(),
        (Value::Object(o), _) if o.is_empty() => "-".to_string(),
        (Value::Number(n), Kind::Float) => match n.as_f64() {
            Some(f) => format!("{f:.1}"),
            None => n.to_string(),
        },
        (Value::Number(n), Kind::TimeMs) => match n.as_i64() {
            Some(ms) => format_time_ms(ms),
            None => n.to_string(),
        },
        (Value::Number(n), Kind::Perm) => match n.as_u64() {
            Some(p) => perm_text(p),
            None => n.to_string(),
        },
        (Value::String(s), Kind::Body) => {
            let escaped = escape(s);
            if in_list && escaped.chars().count() > BODY_CHARS_MAX {
                let cut: String = escaped.chars().take(BODY_CHARS_MAX).collect();
                format!("{cut}…")
            } else {
                escaped
            }
        }
        (Value::String(s), _) => escape(s),
        (Value::Array(items), _) => items
            .iter()
            .map(|i| cell(i, kind, in_list))
            .collect::<Vec<_>>()
            .join(","),
        (Value::Object(map), _) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(v, Kind::Text, in_list)))
            .collect::<Vec<_>>()
            .join(","),
        (Value::Bool(b), _) => b.to_string(),
        (Value::Number(n), _) => n.to_string(),
    }
}

/// RFC 3339 UTC with milliseconds (`2025-01-31T12:00:00.123Z`).
pub fn format_time_ms(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => format!("{t:.3}"),
        Err(_) => ms.to_string(),
    }
}

/// `rw`, `r`, `w` or `-` for RocketMQ permission bits.
pub fn perm_text(p: u64) -> String {
    let r = if p & 4 != 0 { "r" } else { "" };
    let w = if p & 2 != 0 { "w" } else { "" };
    let s = format!("{r}{w}");
    if s.is_empty() {
        "-".to_string()
    } else {
        s
    }
}

/// Control characters (newlines, tabs, ...) as escapes, so a cell stays on its line.
fn escape(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Report {
        let mut s = Section::list(
            "queues",
            vec![
                text("BROKER", "broker"),
                int("MAX_OFFSET[msg]", "max_offset"),
                time("LAST_UPDATE[UTC]", "last_update_ms"),
                json_only("hidden"),
            ],
        );
        s.push(vec![json!("broker-a"), json!(12), json!(0), json!(1)]);
        s.push(vec![json!("b"), json!(3), Value::Null, json!(2)]);
        Report::one(s).with(Section::record(
            "summary",
            vec![float("LAG[msg/s]", "lag"), perm("PERM", "perm")],
            vec![json!(1.26), json!(6)],
        ))
    }

    #[test]
    fn table_is_aligned_with_units_and_dashes() {
        let t = sample().to_table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "BROKER    MAX_OFFSET[msg]  LAST_UPDATE[UTC]");
        assert_eq!(
            lines[1],
            "broker-a               12  1970-01-01T00:00:00.000Z"
        );
        assert_eq!(lines[2], "b                       3  -");
        assert_eq!(lines[3], "");
        assert_eq!(lines[4], "LAG[msg/s]  1.3");
        assert_eq!(lines[5], "PERM        rw");
    }

    #[test]
    fn json_has_raw_values_and_hidden_columns() {
        let j = sample().to_json();
        assert_eq!(j["queues"][0]["broker"], "broker-a");
        assert_eq!(j["queues"][0]["last_update_ms"], 0);
        assert_eq!(j["queues"][1]["last_update_ms"], Value::Null);
        assert_eq!(j["queues"][1]["hidden"], 2);
        assert_eq!(j["summary"]["perm"], 6);
    }

    #[test]
    fn sections_can_be_json_or_table_only() {
        let r = sample()
            .with(
                Section::record("nested", vec![json_only("list")], vec![json!([1, 2])]).json_only(),
            )
            .with(Section::record("flat", vec![int("N[msg]", "n")], vec![json!(7)]).table_only());
        let j = r.to_json();
        assert_eq!(j["nested"]["list"], json!([1, 2]));
        assert!(j.get("flat").is_none(), "{j}");
        let t = r.to_table();
        assert!(t.ends_with("\nN[msg]  7\n"), "{t}");
        assert!(!t.contains("list"), "{t}");
    }

    #[test]
    fn bodies_are_escaped_and_cut_in_lists() {
        let long = "x".repeat(100);
        let c = cell(&json!(long), Kind::Body, true);
        assert_eq!(c.chars().count(), BODY_CHARS_MAX + 1);
        assert_eq!(cell(&json!("a\nb"), Kind::Body, false), "a\\nb");
        assert_eq!(cell(&json!(["a", "b"]), Kind::Text, true), "a,b");
        assert_eq!(perm_text(4), "r");
    }
}
