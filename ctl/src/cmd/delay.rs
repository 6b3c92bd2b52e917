//! `delay status`: what the brokers hold scheduled (GET_SCHEDULE_STATUS), every master by
//! default. The JSON nests each broker's delay levels in its row (`brokers`); the tables
//! show the same values flat instead: one row per level plus a `timer` row (`levels`), and
//! one summary row per broker (`schedule`). A broker that does not answer, is still
//! indexing its schedule, or does not deliver (a slave) gets a note on stderr.

use ringmq_client::admin::{BrokerSchedule, TopicTarget};
use ringmq_client::wire::command::ScheduleStatus;
use ringmq_client::Admin;
use serde_json::{json, Value};

use super::now_ms;
use crate::cli::DelayStatusArgs;
use crate::error::{Context, Result};
use crate::output::{int, json_only, text, time, Report, Section};
use crate::parse::format_delay_ms;

/// What the LEVEL column says on the row of messages sent with a delivery time or delay
/// (`--deliver-at`, `--delay`) rather than a level.
const TIMER_ROW: &str = "timer";

pub async fn status(admin: &Admin, a: &DelayStatusArgs) -> Result<Report> {
    let target = match (&a.cluster, &a.broker) {
        (Some(c), _) => TopicTarget::Cluster(c.clone()),
        (None, Some(b)) => TopicTarget::Broker(b.clone()),
        (None, None) => TopicTarget::AllMasters,
    };
    let answers = admin
        .schedule_statuses(&target)
        .await
        .doing(|| "finding the brokers to ask".into())?;
    // When nobody answered there is nothing to show: fail with the first reason.
    if answers.iter().all(|b| b.status.is_err()) {
        if let Some(BrokerSchedule {
            broker,
            status: Err(e),
        }) = answers.into_iter().next()
        {
            return Err(e)
                .doing(|| format!("reading the schedule of {} ({})", broker.name, broker.addr));
        }
        return Ok(report(&[], now_ms()));
    }
    Ok(report(&answers, now_ms()))
}

/// The report for these answers, with due times relative to `now_ms`.
fn report(answers: &[BrokerSchedule], now_ms: i64) -> Report {
    let mut brokers = Section::list(
        "brokers",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            json_only("levels"),
            int("TIMER_PENDING[msg]", "timer_pending"),
            time("NEXT_DUE[UTC]", "next_due_ms"),
            int("DELIVERED[msg]", "delivered"),
            int("INDEXING[shards]", "shards_indexing"),
            text("DELIVERING", "delivering"),
            json_only("error"),
        ],
    )
    .json_only();
    let mut levels = Section::list(
        "levels",
        vec![
            text("BROKER", "broker"),
            text("LEVEL", "level"),
            text("DELAY", "delay"),
            int("PENDING[msg]", "pending"),
        ],
    )
    .table_only();
    let mut summary = Section::list(
        "schedule",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            time("NEXT_DUE[UTC]", "next_due_ms"),
            text("NEXT_DUE_IN", "next_due_in"),
            int("DELIVERED[msg]", "delivered"),
            int("INDEXING[shards]", "shards_indexing"),
            text("DELIVERING", "delivering"),
        ],
    )
    .table_only();
    let mut notes = Vec::new();
    for answer in answers {
        let b = &answer.broker;
        let (name, addr) = (b.name.as_str(), b.addr.to_string());
        let s = match &answer.status {
            Ok(s) => s,
            Err(e) => {
                notes.push(format!("broker {name} ({addr}) did not answer: {e}"));
                let mut row = vec![json!(name), json!(addr)];
                row.extend(std::iter::repeat_n(Value::Null, 6));
                row.push(json!(e.to_string()));
                brokers.push(row);
                let mut row = vec![json!(name), json!(addr)];
                row.extend(std::iter::repeat_n(Value::Null, 5));
                summary.push(row);
                continue;
            }
        };
        let next_due = (s.next_due_ms != 0).then_some(s.next_due_ms);
        brokers.push(vec![
            json!(name),
            json!(addr),
            json!(s
                .levels
                .iter()
                .map(|l| json!({"level": l.level, "delay_ms": l.delay_ms, "pending": l.pending}))
                .collect::<Vec<_>>()),
            json!(s.timer_pending),
            json!(s.next_due_ms),
            json!(s.delivered),
            json!(s.shards_indexing),
            json!(s.delivering),
            Value::Null,
        ]);
        for l in &s.levels {
            levels.push(vec![
                json!(name),
                json!(l.level.to_string()),
                json!(format_delay_ms(l.delay_ms)),
                json!(l.pending),
            ]);
        }
        levels.push(vec![
            json!(name),
            json!(TIMER_ROW),
            json!("delivery times"),
            json!(s.timer_pending),
        ]);
        summary.push(vec![
            json!(name),
            json!(addr),
            json!(next_due),
            json!(next_due.map(|due| due_in(due, now_ms))),
            json!(s.delivered),
            json!(s.shards_indexing),
            json!(if s.delivering { "yes" } else { "no" }),
        ]);
        notes.extend(status_notes(answer, s));
    }
    let mut report = Report::one(brokers).with(levels).with(summary);
    report.notes = notes;
    report
}

/// Why a broker's schedule may not move as expected: still indexing, or not delivering.
fn status_notes(answer: &BrokerSchedule, s: &ScheduleStatus) -> Vec<String> {
    let b = &answer.broker;
    let mut notes = Vec::new();
    if s.shards_indexing > 0 {
        notes.push(format!(
            "broker {} ({}): {} shard(s) still indexing their schedule after a start; \
             messages due meanwhile are delivered late, never early",
            b.name, b.addr, s.shards_indexing
        ));
    }
    if !s.delivering {
        let why = if b.is_master() {
            "does not deliver scheduled messages"
        } else {
            "is a slave: it keeps a copy of the schedule, its master delivers"
        };
        notes.push(format!("broker {} ({}) {why}", b.name, b.addr));
    }
    notes
}

/// How far `due_ms` is from `now_ms` in whole seconds: `in 3s` (rounded up, so a time not
/// yet reached never reads `in 0s`), `due now` (less than 1 s late), or `5s overdue`.
fn due_in(due_ms: i64, now_ms: i64) -> String {
    let d_ms = due_ms.saturating_sub(now_ms);
    if d_ms > 0 {
        format!("in {}s", (d_ms - 1) / 1000 + 1)
    } else if d_ms > -1000 {
        "due now".to_string()
    } else {
        format!("{}s overdue", d_ms.unsigned_abs() / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::admin::BrokerRef;
    use ringmq_client::wire::command::route::BrokerRole;
    use ringmq_client::wire::command::ScheduleLevel;

    fn broker(id: u64) -> BrokerRef {
        BrokerRef {
            cluster: "C".into(),
            name: "broker-a".into(),
            id,
            addr: ([127, 0, 0, 1], 10911 + id as u16).into(),
            role: if id == 0 {
                BrokerRole::AsyncMaster
            } else {
                BrokerRole::Slave
            },
            shard_count: 2,
            version: "x".into(),
        }
    }

    fn sample(delivering: bool, shards_indexing: u32) -> ScheduleStatus {
        ScheduleStatus {
            levels: vec![
                ScheduleLevel {
                    level: 1,
                    delay_ms: 1_000,
                    pending: 2,
                },
                ScheduleLevel {
                    level: 2,
                    delay_ms: 120_000,
                    pending: 0,
                },
            ],
            timer_pending: 3,
            next_due_ms: 1_700_000_003_500,
            delivered: 9,
            shards_indexing,
            delivering,
        }
    }

    #[test]
    fn json_nests_levels_and_tables_are_flat() {
        let answers = [BrokerSchedule {
            broker: broker(0),
            status: Ok(sample(true, 0)),
        }];
        let r = report(&answers, 1_700_000_000_000);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
        let j = r.to_json();
        assert_eq!(
            j.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["brokers".to_string()])
        );
        let b = &j["brokers"][0];
        assert_eq!(b["broker"], "broker-a");
        assert_eq!(
            b["levels"][0],
            json!({"level": 1, "delay_ms": 1000, "pending": 2})
        );
        assert_eq!(b["timer_pending"], 3);
        assert_eq!(b["next_due_ms"], 1_700_000_003_500_i64);
        assert_eq!(b["delivered"], 9);
        assert_eq!(b["shards_indexing"], 0);
        assert_eq!(b["delivering"], true);
        let t = r.to_table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "BROKER    LEVEL  DELAY           PENDING[msg]");
        assert_eq!(lines[1], "broker-a  1      1s                         2");
        assert_eq!(lines[2], "broker-a  2      2m                         0");
        assert_eq!(lines[3], "broker-a  timer  delivery times             3");
        assert!(lines[6].contains("2023-11-14T22:13:23.500Z  in 4s"), "{t}");
    }

    #[test]
    fn notes_for_indexing_slaves_and_silence() {
        let answers = [
            BrokerSchedule {
                broker: broker(0),
                status: Ok(sample(true, 1)),
            },
            BrokerSchedule {
                broker: broker(1),
                status: Ok(sample(false, 0)),
            },
            BrokerSchedule {
                broker: broker(2),
                status: Err(ringmq_client::Error::Shutdown),
            },
        ];
        let r = report(&answers, 0);
        assert_eq!(r.notes.len(), 3, "{:?}", r.notes);
        assert!(r.notes[0].contains("1 shard(s) still indexing"));
        assert!(r.notes[1].contains("is a slave"));
        assert!(r.notes[2].contains("did not answer"));
        let j = r.to_json();
        assert_eq!(j["brokers"][2]["levels"], Value::Null);
        assert!(j["brokers"][2]["error"].is_string());
    }

    #[test]
    fn due_in_whole_seconds() {
        assert_eq!(due_in(10_001, 0), "in 11s");
        assert_eq!(due_in(10_000, 0), "in 10s");
        assert_eq!(due_in(1, 0), "in 1s");
        assert_eq!(due_in(0, 500), "due now");
        assert_eq!(due_in(0, 5_200), "5s overdue");
    }
}
