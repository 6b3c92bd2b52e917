//! `broker status|config|readonly`: one broker, by address or by name.

use std::collections::{BTreeMap, BTreeSet};

use ringmq_client::admin::{
    published_rates, BROKER_PERMISSION_READ_ONLY, BROKER_PERMISSION_READ_WRITE,
};
use ringmq_client::Admin;
use serde_json::{json, Value};

use super::{broker_of, usage};
use crate::cli::{BrokerConfigArgs, ReadonlyArgs};
use crate::error::{Context, Result};
use crate::output::{float, int, text, Report, Section};

/// Per-shard runtime keys (`shard.N.<key>`) that `broker status` shows as shard columns;
/// any other key is listed in the `extra` section.
const SHARD_KEYS: &[&str] = &[
    "msgs_in_per_s",
    "msgs_out_per_s",
    "ha_lag_bytes",
    "ha_lag_ms",
    "ha_slaves",
];

/// Runtime keys shown in the `broker` section.
const SUMMARY_KEYS: &[&str] = &[
    "version",
    "role",
    "flushDiskType",
    "uptime_ms",
    "disk_used_percent",
    "connections",
];

pub async fn status(admin: &Admin, broker: &str) -> Result<Report> {
    let addr = admin
        .broker_addr(broker)
        .await
        .doing(|| format!("finding broker {broker}"))?;
    let info = admin
        .runtime_info(addr)
        .await
        .doing(|| format!("reading the runtime info of {addr}"))?;
    let x = |k: &str| info.extra.get(k).cloned();
    let num = |k: &str| -> Value {
        x(k).and_then(|v| v.parse::<f64>().ok())
            .map_or(Value::Null, |f| json!(f))
    };
    let rates = published_rates(&info);
    let summary = Section::record(
        "broker",
        vec![
            text("BROKER", "broker"),
            int("ID", "id"),
            text("ADDRESS", "address"),
            text("ROLE", "role"),
            text("VERSION", "version"),
            text("FLUSH", "flush_disk_type"),
            int("UPTIME[ms]", "uptime_ms"),
            float("DISK_USED[%]", "disk_used_percent"),
            int("CONNECTIONS", "connections"),
            int("SHARDS", "shards"),
            float("IN[msg/s]", "msgs_in_per_s"),
            float("OUT[msg/s]", "msgs_out_per_s"),
        ],
        vec![
            json!(info.broker_name),
            json!(info.broker_id),
            json!(addr.to_string()),
            json!(x("role")),
            json!(x("version")),
            json!(x("flushDiskType")),
            x("uptime_ms")
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(Value::Null, |v| json!(v)),
            num("disk_used_percent"),
            x("connections")
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(Value::Null, |v| json!(v)),
            json!(info.shards.len()),
            json!(rates.map(|r| r.0)),
            json!(rates.map(|r| r.1)),
        ],
    );
    let mut shards = Section::list(
        "shards",
        vec![
            int("SHARD", "shard"),
            int("QUEUES", "queues"),
            int("CONNECTIONS", "connections"),
            int("PARKED_PULLS", "parked_pulls"),
            int("IN[msg]", "msgs_in"),
            int("OUT[msg]", "msgs_out"),
            int("IN[B]", "bytes_in"),
            int("OUT[B]", "bytes_out"),
            float("IN[msg/s]", "msgs_in_per_s"),
            float("OUT[msg/s]", "msgs_out_per_s"),
            int("STORE[B]", "store_bytes"),
            int("LOG_MIN[B]", "commitlog_min_offset"),
            int("LOG_MAX[B]", "commitlog_max_offset"),
            int("REPL_LAG[B]", "ha_lag_bytes"),
            int("REPL_LAG[ms]", "ha_lag_ms"),
            int("SLAVES", "ha_slaves"),
        ],
    );
    let mut used: BTreeSet<String> = SUMMARY_KEYS.iter().map(|k| k.to_string()).collect();
    for s in &info.shards {
        let mut row = vec![
            json!(s.shard_id),
            json!(s.queues),
            json!(s.connections),
            json!(s.parked_pulls),
            json!(s.msgs_in),
            json!(s.msgs_out),
            json!(s.bytes_in),
            json!(s.bytes_out),
        ];
        let shard_key = |k: &str| format!("shard.{}.{k}", s.shard_id);
        let per_shard = |k: &str| -> Value {
            info.extra
                .get(&shard_key(k))
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(Value::Null, |f| json!(f))
        };
        row.push(per_shard("msgs_in_per_s"));
        row.push(per_shard("msgs_out_per_s"));
        row.push(json!(s.store_bytes));
        row.push(json!(s.commitlog_min_offset));
        row.push(json!(s.commitlog_max_offset));
        for k in ["ha_lag_bytes", "ha_lag_ms", "ha_slaves"] {
            row.push(
                info.extra
                    .get(&shard_key(k))
                    .and_then(|v| v.parse::<u64>().ok())
                    .map_or(Value::Null, |v| json!(v)),
            );
        }
        for k in SHARD_KEYS {
            used.insert(shard_key(k));
        }
        shards.push(row);
    }
    let mut extra = Section::list("extra", vec![text("KEY", "key"), text("VALUE", "value")]);
    for (k, v) in &info.extra {
        if !used.contains(k) {
            extra.push(vec![json!(k), json!(v)]);
        }
    }
    Ok(Report::one(summary).with(shards).with(extra))
}

pub async fn config(admin: &Admin, a: &BrokerConfigArgs) -> Result<Report> {
    let broker = broker_of(&a.broker);
    let mut changes = BTreeMap::new();
    for kv in &a.set {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(usage(format!("--set {kv:?}: use key=value")));
        };
        changes.insert(k.trim().to_string(), v.trim().to_string());
    }
    let addr = admin
        .broker_addr(&broker)
        .await
        .doing(|| format!("finding broker {broker}"))?;
    if !changes.is_empty() {
        admin
            .update_broker_config(addr, changes.clone())
            .await
            .doing(|| format!("changing the configuration of {addr}"))?;
    }
    let config = admin
        .broker_config(addr)
        .await
        .doing(|| format!("reading the configuration of {addr}"))?;
    let mut s = Section::list("config", vec![text("KEY", "key"), text("VALUE", "value")]);
    for (k, v) in &config {
        if changes.is_empty() || changes.contains_key(k) {
            s.push(vec![json!(k), json!(v)]);
        }
    }
    Ok(Report::one(s))
}

pub async fn readonly(admin: &Admin, a: &ReadonlyArgs) -> Result<Report> {
    let (broker, state) = match (&a.broker, a.args.as_slice()) {
        (Some(b), [state]) => (b.clone(), state.clone()),
        (None, [b, state]) => (b.clone(), state.clone()),
        _ => return Err(usage("give ADDR and on|off (or -b ADDR on|off)")),
    };
    let on = match state.as_str() {
        "on" | "true" | "yes" => true,
        "off" | "false" | "no" => false,
        other => return Err(usage(format!("{other:?}: use on or off"))),
    };
    let addr = admin
        .broker_addr(&broker)
        .await
        .doing(|| format!("finding broker {broker}"))?;
    admin
        .set_read_only(addr, on)
        .await
        .doing(|| format!("switching {addr} read-only {state}"))?;
    let permission = if on {
        BROKER_PERMISSION_READ_ONLY
    } else {
        BROKER_PERMISSION_READ_WRITE
    };
    Ok(Report::one(Section::record(
        "broker",
        vec![
            text("ADDRESS", "address"),
            text("READ_ONLY", "read_only"),
            int("BROKER_PERMISSION", "broker_permission"),
        ],
        vec![json!(addr.to_string()), json!(on), json!(permission)],
    )))
}
