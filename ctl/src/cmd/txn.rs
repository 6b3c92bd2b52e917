//! `txn status`: what the brokers hold of transactional messages (GET_TRANSACTION_STATUS),
//! every master by default: one row per broker and producer group with undecided halves
//! (`groups`), one row per broker with its check-back counters and settings (`brokers`). A
//! broker that does not answer, or does not check back (a slave), gets a note on stderr.

use ringmq_client::admin::{BrokerTransactions, TopicTarget};
use ringmq_client::Admin;
use serde_json::{json, Value};

use super::now_ms;
use crate::cli::TxnStatusArgs;
use crate::error::{Context, Result};
use crate::output::{int, json_only, text, time, Report, Section};

pub async fn status(admin: &Admin, a: &TxnStatusArgs) -> Result<Report> {
    let target = match (&a.cluster, &a.broker) {
        (Some(c), _) => TopicTarget::Cluster(c.clone()),
        (None, Some(b)) => TopicTarget::Broker(b.clone()),
        (None, None) => TopicTarget::AllMasters,
    };
    let answers = admin
        .transaction_statuses(&target)
        .await
        .doing(|| "finding the brokers to ask".into())?;
    if answers.iter().all(|b| b.status.is_err()) {
        if let Some(BrokerTransactions {
            broker,
            status: Err(e),
        }) = answers.into_iter().next()
        {
            return Err(e).doing(|| {
                format!(
                    "reading the transactions of {} ({})",
                    broker.name, broker.addr
                )
            });
        }
        return Ok(report(&[], now_ms()));
    }
    Ok(report(&answers, now_ms()))
}

/// The report for these answers, with ages relative to `now_ms`.
fn report(answers: &[BrokerTransactions], now_ms: i64) -> Report {
    let mut groups = Section::list(
        "groups",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            text("PRODUCER_GROUP", "producer_group"),
            int("PENDING[msg]", "pending"),
            time("OLDEST_STORED[UTC]", "oldest_stored_ms"),
            int("OLDEST_AGE[ms]", "oldest_age_ms"),
        ],
    );
    let mut brokers = Section::list(
        "brokers",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            int("PENDING[msg]", "pending"),
            int("CHECKS_SENT[checks]", "checks_sent"),
            int("UNANSWERABLE[checks]", "checks_unanswerable"),
            int("MOVED_TO_CHECK_MAX[msg]", "moved_to_check_max"),
            int("REDONE[msg]", "redone"),
            int("TIMEOUT[ms]", "timeout_ms"),
            int("CHECK_INTERVAL[ms]", "check_interval_ms"),
            int("CHECK_MAX[checks]", "check_max"),
            text("CHECKING", "checking"),
            int("INDEXING[shards]", "shards_indexing"),
            json_only("error"),
        ],
    );
    let mut notes = Vec::new();
    for answer in answers {
        let b = &answer.broker;
        let (name, addr) = (b.name.as_str(), b.addr.to_string());
        let s = match &answer.status {
            Ok(s) => s,
            Err(e) => {
                notes.push(format!("broker {name} ({addr}) did not answer: {e}"));
                let mut row = vec![json!(name), json!(addr)];
                row.extend(std::iter::repeat_n(Value::Null, 10));
                row.push(json!(e.to_string()));
                brokers.push(row);
                continue;
            }
        };
        for g in &s.groups {
            groups.push(vec![
                json!(name),
                json!(addr),
                json!(g.producer_group),
                json!(g.pending),
                json!(g.oldest_stored_ms),
                json!(now_ms.saturating_sub(g.oldest_stored_ms).max(0)),
            ]);
        }
        brokers.push(vec![
            json!(name),
            json!(addr),
            json!(s.groups.iter().map(|g| g.pending).sum::<u64>()),
            json!(s.checks_sent),
            json!(s.checks_unanswerable),
            json!(s.moved_to_check_max),
            json!(s.redone),
            json!(s.timeout_ms),
            json!(s.check_interval_ms),
            json!(s.check_max),
            json!(s.checking),
            json!(s.shards_indexing),
            Value::Null,
        ]);
        if s.shards_indexing > 0 {
            notes.push(format!(
                "broker {name} ({addr}): {} shard(s) still indexing after a start; their \
                 pending halves are not counted yet",
                s.shards_indexing
            ));
        }
        if !s.checking {
            notes.push(format!(
                "broker {name} ({addr}) does not check back (a slave: its master does)"
            ));
        }
    }
    let mut report = Report::one(groups).with(brokers);
    report.notes = notes;
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::admin::BrokerRef;
    use ringmq_client::wire::command::route::BrokerRole;
    use ringmq_client::wire::command::{TransactionGroupPending, TransactionStatus};

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

    fn sample(checking: bool) -> TransactionStatus {
        TransactionStatus {
            groups: vec![
                TransactionGroupPending {
                    producer_group: "pg-a".into(),
                    pending: 3,
                    oldest_stored_ms: 1_700_000_000_000,
                },
                TransactionGroupPending {
                    producer_group: "pg-b".into(),
                    pending: 1,
                    oldest_stored_ms: 1_700_000_004_000,
                },
            ],
            checks_sent: 7,
            checks_unanswerable: 2,
            moved_to_check_max: 1,
            redone: 0,
            timeout_ms: 6000,
            check_interval_ms: 30000,
            check_max: 15,
            checking,
            shards_indexing: 0,
        }
    }

    #[test]
    fn groups_with_ages_and_brokers_with_counters() {
        let answers = [
            BrokerTransactions {
                broker: broker(0),
                status: Ok(sample(true)),
            },
            BrokerTransactions {
                broker: broker(1),
                status: Ok(sample(false)),
            },
            BrokerTransactions {
                broker: broker(2),
                status: Err(ringmq_client::Error::Shutdown),
            },
        ];
        let r = report(&answers, 1_700_000_005_000);
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(r.notes[0].contains("does not check back"));
        assert!(r.notes[1].contains("did not answer"));
        let j = r.to_json();
        let g = &j["groups"][0];
        assert_eq!(g["producer_group"], "pg-a");
        assert_eq!(g["pending"], 3);
        assert_eq!(g["oldest_age_ms"], 5000);
        assert_eq!(j["groups"][1]["oldest_age_ms"], 1000);
        let b = &j["brokers"][0];
        assert_eq!(b["pending"], 4);
        assert_eq!(b["checks_sent"], 7);
        assert_eq!(b["checks_unanswerable"], 2);
        assert_eq!(b["moved_to_check_max"], 1);
        assert_eq!(b["check_max"], 15);
        assert_eq!(b["checking"], true);
        assert_eq!(j["brokers"][1]["checking"], false);
        assert!(j["brokers"][2]["error"].is_string());
        assert_eq!(j["brokers"][2]["pending"], Value::Null);
        let t = r.to_table();
        assert!(t.contains("OLDEST_AGE[ms]"), "{t}");
        assert!(t.contains("2023-11-14T22:13:20.000Z"), "{t}");
    }
}
