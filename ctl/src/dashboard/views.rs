//! The dashboard's composite answers: a command's report joined with what the sampler
//! computed (cluster, topics, groups, one group with its lag history), and the dead-letter
//! resend. Lists are read with the request's account, and what the brokers refuse it is
//! left out.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::answer::{failure, group_arg, not_allowed, param, report, Answer};
use super::http::{Params, Refusal};
use super::sampler::{queue_offsets, rows, Samples};
use super::state::{Ctx, State};
use crate::cli::{ClusterListArgs, ResendDlqArgs};
use crate::cmd::{cluster, dlq, group, topic};

/// Topics `/api/topics` reads (each one's queue offsets).
pub const TOPICS_LISTED_MAX: usize = 500;
/// Groups `/api/groups` reads (each one `group progress`).
pub const GROUPS_LISTED_MAX: usize = 200;
/// Dead letters one resend request sends at most.
pub const RESEND_MAX: u32 = 1000;

/// `cluster list` with the sampler's rates and store sizes per broker.
pub async fn cluster_view(state: &State, ctx: &Ctx) -> Answer {
    let args = ClusterListArgs {
        cluster: None,
        sample: Duration::ZERO,
    };
    let mut v = report(cluster::list(&ctx.admin, &args).await)?;
    let samples = state.samples();
    if let Some(brokers) = v["brokers"].as_array_mut() {
        for b in brokers {
            let s = b["address"].as_str().and_then(|a| samples.brokers.get(a));
            if let Some(o) = b.as_object_mut() {
                o.insert(
                    "sampled_in_per_s".into(),
                    json!(s.and_then(|s| s.msgs_in.per_s)),
                );
                o.insert(
                    "sampled_out_per_s".into(),
                    json!(s.and_then(|s| s.msgs_out.per_s)),
                );
                o.insert("msgs_in".into(), json!(s.map(|s| s.msgs_in.value)));
                o.insert("msgs_out".into(), json!(s.map(|s| s.msgs_out.value)));
                o.insert("store_bytes".into(), json!(s.map(|s| s.store_bytes)));
            }
        }
    }
    sampler_info(&mut v, &samples);
    Ok(v)
}

fn sampler_info(v: &mut Value, samples: &Samples) {
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "sampler".into(),
            json!({ "sampled_at_ms": samples.sampled_at_ms, "errors": samples.errors }),
        );
    }
}

/// Every topic this account may read: queues, stored messages, rates. (Offsets only: the
/// newest message's time is in `/api/topic`, which reads that message.)
pub async fn topics(state: &State, ctx: &Ctx) -> Answer {
    let list = report(topic::list(&ctx.admin).await)?;
    let mut out = Vec::new();
    let mut hidden = 0usize;
    for t in rows(&list, "topics")
        .iter()
        .filter(|t| t["kind"] != "system")
        .take(TOPICS_LISTED_MAX)
    {
        let Some(name) = t["topic"].as_str() else {
            continue;
        };
        let mut row = Map::new();
        row.insert("topic".into(), json!(name));
        row.insert("kind".into(), t["kind"].clone());
        match queue_offsets(&ctx.admin, name).await {
            Ok(qs) => {
                let stored: u64 = qs.iter().map(|(min, max)| max - min).sum();
                row.insert("queues".into(), json!(qs.len()));
                row.insert("stored_msgs".into(), json!(stored));
                let s = state.samples();
                row.insert(
                    "in_per_s".into(),
                    json!(s.topics_in.get(name).and_then(|c| c.per_s)),
                );
                row.insert("out_per_s".into(), json!(s.topic_out_per_s(name)));
            }
            // The brokers do not answer this account for it: not listed, but counted.
            Err(e) if not_allowed(&e) => {
                hidden += 1;
                continue;
            }
            Err(e) => {
                row.insert("error".into(), json!(e.to_string()));
            }
        }
        out.push(Value::Object(row));
    }
    let mut v = json!({ "topics": out, "hidden": hidden });
    sampler_info(&mut v, &state.samples());
    Ok(v)
}

/// One topic: per queue offsets (`topic status`), where it lives (`topic route`), and its
/// throughput history (messages stored and committed per second, one point per reading).
pub async fn topic_view(state: &State, ctx: &Ctx, params: &Params) -> Answer {
    let name = param(params, "name")?;
    let mut v = report(topic::status(&ctx.admin, name).await)?;
    let route = report(topic::route(&ctx.admin, name).await)?;
    let points: Vec<Value> = state
        .samples()
        .topic_history
        .get(name)
        .map(|h| {
            h.iter()
                .map(|(t, i, o)| json!({ "t_ms": t, "in_per_s": i, "out_per_s": o }))
                .collect()
        })
        .unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("topic".into(), json!(name));
        o.insert("brokers".into(), route["brokers"].clone());
        o.insert("route".into(), route["queues"].clone());
        o.insert(
            "history".into(),
            json!({
                "points": points,
                "refresh_ms": state.refresh.as_millis() as u64,
                "history_ms": state.history.as_millis() as u64,
            }),
        );
    }
    Ok(v)
}

/// Every group this account may read: members, lags, consume rate.
pub async fn groups(state: &State, ctx: &Ctx) -> Answer {
    // `group list` is an admin request; other accounts get the names the sampler saw,
    // each then read (or refused) with this account.
    let mut hidden = 0usize;
    let mut listed = true;
    let (names, members): (Vec<String>, Vec<Value>) = match group::list(&ctx.admin).await {
        Ok(r) => {
            let v = r.to_json();
            let g = rows(&v, "groups");
            (
                g.iter()
                    .filter_map(|x| x["group"].as_str().map(String::from))
                    .collect(),
                g.to_vec(),
            )
        }
        Err(e) if not_allowed(&e) => {
            listed = false;
            (state.samples().group_names.clone(), Vec::new())
        }
        Err(e) => return Err(failure(&e)),
    };
    let mut out = Vec::new();
    for name in names.iter().take(GROUPS_LISTED_MAX) {
        let mut row = Map::new();
        row.insert("group".into(), json!(name));
        if let Some(m) = members.iter().find(|m| m["group"] == name.as_str()) {
            row.insert("clients".into(), m["members"].clone());
            row.insert("subscriptions".into(), m["subscriptions"].clone());
        }
        match group::progress(&ctx.admin, name, None).await {
            Ok(r) => {
                let p = r.to_json();
                let s = &p["summary"];
                for k in [
                    "member_count",
                    "total_lag",
                    "retry_lag",
                    "dlq_lag",
                    "max_lag_age_s",
                ] {
                    row.insert(k.into(), s[k].clone());
                }
                let topics: Vec<&str> = rows(&p, "queues")
                    .iter()
                    .filter_map(|q| q["topic"].as_str())
                    .filter(|t| topic::topic_kind(t) == "normal")
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                row.insert("topics".into(), json!(topics));
                let samples = state.samples();
                let g = samples.groups.get(name);
                row.insert(
                    "consume_per_s".into(),
                    json!(g.and_then(|g| g.consume_per_s())),
                );
            }
            Err(e) if not_allowed(&e) => {
                hidden += 1;
                continue;
            }
            Err(e) => {
                row.insert("error".into(), json!(e.to_string()));
            }
        }
        out.push(Value::Object(row));
    }
    // Without `group list` (an admin request) the names are those the sampler saw with
    // ringmq-ctl's own account: the page says so.
    let mut v = json!({ "groups": out, "hidden": hidden, "names_from_sampler": !listed });
    sampler_info(&mut v, &state.samples());
    Ok(v)
}

/// `/api/group`: `group progress` with the lag history; `/api/lag-history`: the history
/// alone. Both read the progress with the request's account first, so a history is shown
/// only to those who may read the group.
pub async fn group_view(state: &State, ctx: &Ctx, params: &Params, full: bool) -> Answer {
    let name = param(params, "group").or_else(|_| param(params, "name"))?;
    let mut v = report(group::progress(&ctx.admin, name, None).await)?;
    let samples = state.samples();
    let g = samples.groups.get(name);
    let points: Vec<Value> = g
        .map(|g| {
            g.history
                .iter()
                .map(|(t, lag, rate)| json!({ "t_ms": t, "lag": lag, "consume_per_s": rate }))
                .collect()
        })
        .unwrap_or_default();
    let history = json!({
        "group": name,
        "points": points,
        "refresh_ms": state.refresh.as_millis() as u64,
        "history_ms": state.history.as_millis() as u64,
    });
    if !full {
        return Ok(history);
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("history".into(), history);
        o.insert(
            "consume_per_s".into(),
            json!(g.and_then(|g| g.consume_per_s())),
        );
    }
    Ok(v)
}

/// `POST /api/dlq/resend {"group", "id"?}`: `group resend-dlq`.
pub async fn resend(ctx: &Ctx, body: &[u8]) -> Answer {
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| Refusal::new(400, "send JSON {\"group\", \"id\"}"))?;
    let Some(group) = v["group"].as_str().filter(|g| !g.is_empty()) else {
        return Err(Refusal::new(400, "give group"));
    };
    let a = ResendDlqArgs {
        group: group_arg(group),
        id: v["id"].as_str().filter(|i| !i.is_empty()).map(String::from),
        max: RESEND_MAX,
    };
    report(dlq::resend(&ctx.admin, &ctx.cfg, &a).await)
}
