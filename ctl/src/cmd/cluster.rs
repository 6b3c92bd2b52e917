//! `cluster list`: one row per broker process.

use ringmq_client::Admin;
use serde_json::json;

use crate::cli::ClusterListArgs;
use crate::error::{Context, CtlError, Result};
use crate::output::{float, int, json_only, text, Report, Section};

pub async fn list(admin: &Admin, a: &ClusterListArgs) -> Result<Report> {
    let statuses = admin
        .cluster_status(a.sample)
        .await
        .doing(|| "reading the cluster".into())?;
    let mut s = Section::list(
        "brokers",
        vec![
            text("CLUSTER", "cluster"),
            text("BROKER", "broker"),
            int("ID", "id"),
            text("ADDRESS", "address"),
            text("ROLE", "role"),
            int("SHARDS", "shards"),
            text("VERSION", "version"),
            float("IN[msg/s]", "msgs_in_per_s"),
            float("OUT[msg/s]", "msgs_out_per_s"),
            float("DISK_USED[%]", "disk_used_percent"),
            int("REPL_LAG[B]", "repl_lag_bytes"),
            int("REPL_LAG[ms]", "repl_lag_ms"),
            json_only("error"),
        ],
    );
    let mut report = Report::default();
    for st in statuses {
        let b = &st.broker;
        if a.cluster.as_ref().is_some_and(|c| c != &b.cluster) {
            continue;
        }
        let version = st
            .runtime
            .as_ref()
            .and_then(|r| r.extra.get("version").cloned())
            .unwrap_or_else(|| b.version.clone());
        if let Some(e) = &st.error {
            report.notes.push(format!(
                "broker {} ({}) did not answer: {e}",
                b.name, b.addr
            ));
        }
        s.push(vec![
            json!(b.cluster),
            json!(b.name),
            json!(b.id),
            json!(b.addr.to_string()),
            json!(b.role.name()),
            json!(b.shard_count),
            json!(version),
            json!(st.msgs_in_per_s),
            json!(st.msgs_out_per_s),
            json!(st.disk_used_percent),
            json!(st.repl_lag_bytes),
            json!(st.repl_lag_ms),
            json!(st.error),
        ]);
    }
    if let (Some(c), true) = (&a.cluster, s.rows.is_empty()) {
        return Err(CtlError::Refused(format!(
            "no broker of cluster {c} is registered"
        )));
    }
    report.sections.push(s);
    Ok(report)
}
