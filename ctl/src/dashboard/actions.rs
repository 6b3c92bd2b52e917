//! What the dashboard changes: each `POST /api/...` action below is a ringmq-ctl command run
//! with the request's account ([`Ctx`]), its JSON body read into that command's arguments,
//! so the page and the command line do the same thing and are refused the same way (a
//! broker's NO_PERMISSION is 403 with `"not_allowed": true`). And the two views an action
//! needs first: a broker's configuration and a group's connections.
//!
//! | route | command |
//! |---|---|
//! | `POST /api/topic/create` `{"topic", "queues"?, "read_queues"?, "write_queues"?, "perm"?, "cluster"?, "broker"?}` | `topic create` |
//! | `POST /api/topic/update` (the same fields) | `topic update` |
//! | `POST /api/topic/delete` `{"topic", "cluster"?}` | `topic delete` |
//! | `POST /api/group/update` `{"group", "retry_max_times"?, "orderly"?}` | `group update -r N -o BOOL` (creates the group's settings) |
//! | `POST /api/group/delete` `{"group"}` | `group update --reset` (drops its settings; offsets stay) |
//! | `POST /api/group/reset` `{"group", "topic", "to"}` or `{"group", "topic", "offset", "queue", "broker"?}` | `group reset-offset` |
//! | `GET /api/group/connections?group=` | `group connections` |
//! | `GET /api/broker/config?name=` | `broker config` |
//! | `POST /api/broker/config` `{"broker", "set": {"key": "value", ...}}` | `broker config --set` |
//! | `GET /api/msg/trace?id=` | `msg trace` |

use serde_json::{Map, Value};

use super::answer::{group_arg, param, report, Answer};
use super::http::{Params, Refusal};
use super::state::Ctx;
use crate::cli::{
    BrokerArgs, BrokerConfigArgs, GroupUpdateArgs, MsgTraceArgs, ResetOffsetArgs, TopicArgs,
    TopicDeleteArgs, TopicPutArgs,
};
use crate::cmd::topic::PutMode;
use crate::cmd::{broker, group, topic, trace};
use crate::parse::parse_perm;

/// Most keys one configuration change sets.
pub const CONFIG_KEYS_MAX: usize = 64;

/// A POST body: a JSON object.
fn object(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err(Refusal::new(400, "send a JSON object")),
    }
}

/// A string field that must be given and not empty.
fn text<'a>(o: &'a Map<String, Value>, k: &str) -> Result<&'a str, Refusal> {
    match o.get(k) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim()),
        _ => Err(Refusal::new(400, &format!("give \"{k}\""))),
    }
}

/// An optional string field (absent, null or empty: none).
fn opt_text(o: &Map<String, Value>, k: &str) -> Result<Option<String>, Refusal> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(Refusal::new(400, &format!("\"{k}\" must be a string"))),
    }
}

/// An optional whole number field, also accepted as a string of digits (what a form sends);
/// absent, null or empty: none.
fn opt_u64(o: &Map<String, Value>, k: &str) -> Result<Option<u64>, Refusal> {
    let bad = || Refusal::new(400, &format!("\"{k}\" must be a whole number ≥ 0"));
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

fn opt_u32(o: &Map<String, Value>, k: &str) -> Result<Option<u32>, Refusal> {
    match opt_u64(o, k)? {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| Refusal::new(400, &format!("\"{k}\" is too large"))),
    }
}

fn topic_arg(t: &str) -> TopicArgs {
    TopicArgs {
        topic: Some(t.to_string()),
        topic_opt: None,
    }
}

fn broker_arg(b: &str) -> BrokerArgs {
    BrokerArgs {
        broker: Some(b.to_string()),
        broker_opt: None,
    }
}

/// `topic create` / `topic update`.
pub async fn topic_put(ctx: &Ctx, body: &[u8], mode: PutMode) -> Answer {
    let o = object(body)?;
    let perm = match opt_text(&o, "perm")? {
        None => None,
        Some(p) => Some(parse_perm(&p).map_err(|e| Refusal::new(400, &format!("perm {e}")))?),
    };
    let a = TopicPutArgs {
        topic: topic_arg(text(&o, "topic")?),
        queues: opt_u32(&o, "queues")?,
        read_queues: opt_u32(&o, "read_queues")?,
        write_queues: opt_u32(&o, "write_queues")?,
        perm,
        cluster: opt_text(&o, "cluster")?,
        broker: opt_text(&o, "broker")?,
    };
    if a.cluster.is_some() && a.broker.is_some() {
        return Err(Refusal::new(400, "give cluster or broker, not both"));
    }
    report(topic::put(&ctx.admin, &a, mode).await)
}

/// `topic delete`.
pub async fn topic_delete(ctx: &Ctx, body: &[u8]) -> Answer {
    let o = object(body)?;
    let a = TopicDeleteArgs {
        topic: topic_arg(text(&o, "topic")?),
        cluster: opt_text(&o, "cluster")?,
    };
    report(topic::delete(&ctx.admin, &a).await)
}

/// `group update -r N`, or with `"reset": true` / `delete`, `group update --reset`.
pub async fn group_update(ctx: &Ctx, body: &[u8], delete: bool) -> Answer {
    let o = object(body)?;
    let g = text(&o, "group")?;
    let (retry_max_times, orderly) = if delete {
        (None, None)
    } else {
        let orderly = match o.get("orderly") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(Refusal::new(400, "\"orderly\" must be true or false")),
        };
        let retry = opt_u32(&o, "retry_max_times")?;
        if retry.is_none() && orderly.is_none() {
            return Err(Refusal::new(
                400,
                "give \"retry_max_times\" (retries before the dead-letter topic) or \"orderly\"",
            ));
        }
        (retry, orderly)
    };
    let a = GroupUpdateArgs {
        group: group_arg(g),
        retry_max_times,
        orderly,
        reset: delete,
    };
    report(group::update(&ctx.admin, &a).await)
}

/// `group reset-offset`: `"to"` (earliest, latest, ms or RFC 3339), or one queue to an
/// `"offset"`.
pub async fn group_reset(ctx: &Ctx, body: &[u8]) -> Answer {
    let o = object(body)?;
    let offset = opt_u64(&o, "offset")?;
    let queue = opt_u32(&o, "queue")?;
    let to = opt_text(&o, "to")?;
    match (&to, offset, queue) {
        (Some(_), None, None) | (None, Some(_), Some(_)) => {}
        (None, Some(_), None) => return Err(Refusal::new(400, "give \"queue\" with \"offset\"")),
        _ => {
            return Err(Refusal::new(
                400,
                "give \"to\" (earliest, latest or a time), or \"offset\" with \"queue\"",
            ))
        }
    }
    let a = ResetOffsetArgs {
        group: group_arg(text(&o, "group")?),
        topic: text(&o, "topic")?.to_string(),
        to,
        timestamp: None,
        offset,
        queue,
        broker: opt_text(&o, "broker")?,
    };
    report(group::reset(&ctx.admin, &a).await)
}

/// `GET /api/group/connections?group=`.
pub async fn group_connections(ctx: &Ctx, p: &Params) -> Answer {
    let g = param(p, "group")?;
    let mut v = report(group::connections(&ctx.admin, g).await)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("group".into(), Value::from(g));
    }
    Ok(v)
}

/// `GET /api/broker/config?name=`.
pub async fn broker_config(ctx: &Ctx, p: &Params) -> Answer {
    let a = BrokerConfigArgs {
        broker: broker_arg(param(p, "name")?),
        set: Vec::new(),
    };
    report(broker::config(&ctx.admin, &a).await)
}

/// `POST /api/broker/config {"broker", "set": {...}}`: the broker judges each key as
/// `broker config --set` does (its allow-list of runtime keys).
pub async fn broker_config_set(ctx: &Ctx, body: &[u8]) -> Answer {
    let o = object(body)?;
    let b = text(&o, "broker")?;
    let Some(Value::Object(set)) = o.get("set") else {
        return Err(Refusal::new(400, "give \"set\": {\"key\": \"value\", ...}"));
    };
    if set.is_empty() || set.len() > CONFIG_KEYS_MAX {
        return Err(Refusal::new(
            400,
            &format!("\"set\" takes 1 to {CONFIG_KEYS_MAX} keys"),
        ));
    }
    let mut pairs = Vec::new();
    for (k, v) in set {
        let v = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(Refusal::new(400, &format!("{k}: give a string value"))),
        };
        if k.trim().is_empty() || k.contains('=') || v.contains('\n') || k.contains('\n') {
            return Err(Refusal::new(
                400,
                &format!("{k:?}: not a configuration key"),
            ));
        }
        pairs.push(format!("{}={v}", k.trim()));
    }
    let a = BrokerConfigArgs {
        broker: broker_arg(b),
        set: pairs,
    };
    report(broker::config(&ctx.admin, &a).await)
}

/// `GET /api/msg/trace?id=[&topic=]`.
pub async fn msg_trace(ctx: &Ctx, p: &Params) -> Answer {
    let a = MsgTraceArgs {
        id: Some(param(p, "id")?.to_string()),
        id_opt: None,
        trace_topic: super::http::param(p, "topic")
            .filter(|t| !t.is_empty())
            .map(String::from),
    };
    report(trace::trace(&ctx.admin, &a).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_judged_before_any_request() {
        let o = object(br#"{"topic":" T ","queues":"8","perm":"","n":-1,"s":3}"#).unwrap();
        assert_eq!(text(&o, "topic").unwrap(), "T");
        assert_eq!(opt_u32(&o, "queues").unwrap(), Some(8));
        assert_eq!(opt_text(&o, "perm").unwrap(), None);
        assert!(opt_u64(&o, "n").is_err());
        assert!(opt_text(&o, "s").is_err());
        assert!(text(&o, "missing").is_err());
        assert!(object(b"[1]").is_err());
        assert!(object(b"not json").is_err());
        let big = object(br#"{"q": 4294967296}"#).unwrap();
        assert!(opt_u32(&big, "q").is_err());
    }
}
