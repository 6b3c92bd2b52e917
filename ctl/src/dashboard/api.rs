//! The dashboard's routes: the page's three files, and a JSON API under `/api/` whose every
//! answer comes from the command functions of `ringmq-ctl` ([`crate::cmd`]) rendered with
//! [`Report::to_json`], plus what the [`sampler`](super::sampler) computed. Errors are
//! `{"error": "..."}` with a 4xx/5xx status; a broker's NO_PERMISSION is 403 with
//! `"not_allowed": true`. Only `POST` changes anything (login, logout, resending dead
//! letters); a `POST` whose `Origin` is not this server is refused.
//!
//! With ACL on, every `/api/` route but `config` and `login` needs a session
//! ([`super::session`]) and runs with its `Admin`; lists keep only what that account's
//! requests are answered for (the brokers refuse the rest).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringmq_client::wire::code::Status;
use ringmq_client::{Admin, ClientConfig, Credentials, Error as ClientError};
use serde_json::{json, Map, Value};

use super::http::{Request, Response};
use super::sampler::{queue_offsets, rows, Samples};
use super::session::{self, Sessions};
use crate::cli::{
    AclTargetArgs, ClusterListArgs, DelayStatusArgs, DlqArgs, GroupArg, MsgIdArgs, MsgKeyArgs,
    MsgTimeArgs, ResendDlqArgs,
};
use crate::cmd::{acl, broker, cluster, delay, dlq, group, msg, topic, txn};
use crate::error::CtlError;
use crate::output::Report;

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");

/// Topics `/api/topics` reads (each one `topic status`).
pub const TOPICS_LISTED_MAX: usize = 500;
/// Groups `/api/groups` reads (each one `group progress`).
pub const GROUPS_LISTED_MAX: usize = 200;
/// Messages a lookup returns (per broker for keys).
pub const LOOKUP_MAX: u32 = 100;
/// Dead letters `/api/dlq` lists.
pub const DLQ_SHOWN_MAX: u32 = 100;
/// Dead letters one resend request sends at most.
pub const RESEND_MAX: u32 = 1000;

/// The routes and their methods (a known path with another method is 405).
const ROUTES: &[(&str, &str)] = &[
    ("/", "GET"),
    ("/index.html", "GET"),
    ("/app.js", "GET"),
    ("/style.css", "GET"),
    ("/api/config", "GET"),
    ("/api/login", "POST"),
    ("/api/logout", "POST"),
    ("/api/whoami", "GET"),
    ("/api/cluster", "GET"),
    ("/api/broker", "GET"),
    ("/api/topics", "GET"),
    ("/api/topic", "GET"),
    ("/api/groups", "GET"),
    ("/api/group", "GET"),
    ("/api/lag-history", "GET"),
    ("/api/dlq", "GET"),
    ("/api/dlq/resend", "POST"),
    ("/api/msg/id", "GET"),
    ("/api/msg/key", "GET"),
    ("/api/msg/time", "GET"),
    ("/api/delay", "GET"),
    ("/api/txn", "GET"),
];

/// What every request shares.
pub struct State {
    /// Built with the credentials ringmq-ctl was started with (the sampler's too).
    pub admin: Admin,
    pub cfg: ClientConfig,
    pub sessions: RefCell<Sessions>,
    pub samples: Rc<RefCell<Samples>>,
    pub refresh: Duration,
    pub history: Duration,
}

/// Who a request runs as.
struct Ctx {
    admin: Admin,
    cfg: ClientConfig,
    /// The session's access key; `None` without ACL.
    access_key: Option<String>,
}

type Answer = Result<Value, Response>;

/// Answers one request.
pub async fn handle(state: &State, req: &Request, body: &[u8]) -> Response {
    let Some(&(_, method)) = ROUTES.iter().find(|(p, _)| *p == req.path) else {
        return Response::error(404, &format!("no such page: {}", req.path));
    };
    if req.method != method {
        return Response::error(405, &format!("{} takes {method} only", req.path))
            .with_header("Allow", method.to_string());
    }
    if method == "POST" && !same_origin(req) {
        return Response::error(403, "cross-origin request refused");
    }
    match req.path.as_str() {
        "/" | "/index.html" => return Response::new(200, "text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => return Response::new(200, "text/javascript; charset=utf-8", APP_JS),
        "/style.css" => return Response::new(200, "text/css; charset=utf-8", STYLE_CSS),
        "/api/config" => return config(state, req),
        "/api/login" => return login(state, body).await,
        "/api/logout" => {
            if let Some(t) = req.cookie(session::COOKIE) {
                state.sessions.borrow_mut().close(t);
            }
            return Response::json(200, &json!({ "logged_in": false }))
                .with_header("Set-Cookie", session::clear_cookie());
        }
        _ => {}
    }
    let ctx = match context(state, req) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let answer = match req.path.as_str() {
        "/api/whoami" => report(acl::whoami(&ctx.admin, &all_masters()).await),
        "/api/cluster" => cluster_view(state, &ctx).await,
        "/api/broker" => match param(req, "name") {
            Ok(b) => report(broker::status(&ctx.admin, b).await),
            Err(r) => Err(r),
        },
        "/api/topics" => topics(state, &ctx).await,
        "/api/topic" => topic_view(&ctx, req).await,
        "/api/groups" => groups(state, &ctx).await,
        "/api/group" => group_view(state, &ctx, req, true).await,
        "/api/lag-history" => group_view(state, &ctx, req, false).await,
        "/api/dlq" => match param(req, "group") {
            Ok(g) => {
                let a = DlqArgs {
                    group: group_arg(g),
                    max: DLQ_SHOWN_MAX,
                };
                report(dlq::list(&ctx.admin, &a).await)
            }
            Err(r) => Err(r),
        },
        "/api/dlq/resend" => resend(&ctx, body).await,
        "/api/msg/id" => match param(req, "id") {
            Ok(id) => {
                let a = MsgIdArgs {
                    id: Some(id.to_string()),
                    id_opt: None,
                };
                report(msg::by_id(&ctx.admin, &a).await)
            }
            Err(r) => Err(r),
        },
        "/api/msg/key" => match (param(req, "topic"), param(req, "key")) {
            (Ok(t), Ok(k)) => {
                let a = MsgKeyArgs {
                    args: Vec::new(),
                    topic: Some(t.to_string()),
                    key: Some(k.to_string()),
                    max: LOOKUP_MAX,
                };
                report(msg::by_key(&ctx.admin, &a).await)
            }
            (Err(r), _) | (_, Err(r)) => Err(r),
        },
        "/api/msg/time" => match (param(req, "topic"), param(req, "begin")) {
            (Ok(t), Ok(b)) => {
                let a = MsgTimeArgs {
                    topic: t.to_string(),
                    begin: b.to_string(),
                    end: req.param("end").filter(|e| !e.is_empty()).map(String::from),
                    max: LOOKUP_MAX,
                };
                report(msg::by_time(&ctx.admin, &a).await)
            }
            (Err(r), _) | (_, Err(r)) => Err(r),
        },
        "/api/delay" => report(delay::status(&ctx.admin, &all_brokers()).await),
        "/api/txn" => report(txn::status(&ctx.admin, &all_brokers()).await),
        _ => Err(Response::error(404, "no such page")),
    };
    match answer {
        Ok(mut v) => {
            if let (Some(o), Some(k)) = (v.as_object_mut(), ctx.access_key) {
                o.insert("access_key".into(), json!(k));
            }
            Response::json(200, &v)
        }
        Err(r) => r,
    }
}

/// Whether a command's failure is the brokers refusing this account.
pub fn not_allowed(e: &CtlError) -> bool {
    match e {
        CtlError::Client {
            source: ClientError::Broker { status, .. },
            ..
        } => *status == Status::NoPermission,
        other => other.to_string().contains("NO_PERMISSION"),
    }
}

/// The answer for a failed command.
pub fn failure(e: &CtlError) -> Response {
    let text = e.to_string();
    if not_allowed(e) {
        return Response::json(
            403,
            &json!({ "error": format!("not allowed: {text}"), "not_allowed": true }),
        );
    }
    let status = match e {
        CtlError::Usage(_) => 400,
        CtlError::Refused(_) => 409,
        CtlError::Client { source, .. } => match source {
            ClientError::NotFound { .. } | ClientError::NoRoute { .. } => 404,
            ClientError::Broker { .. } | ClientError::UnknownStatus { .. } => 409,
            ClientError::InvalidMessage(_) | ClientError::Encode(_) => 400,
            _ => 502,
        },
    };
    Response::error(status, &text)
}

/// A report as JSON, with its notes.
fn report(r: Result<Report, CtlError>) -> Answer {
    let r = r.map_err(|e| failure(&e))?;
    let mut v = r.to_json();
    if let Some(o) = v.as_object_mut() {
        o.insert("notes".into(), json!(r.notes));
    }
    Ok(v)
}

fn param<'a>(req: &'a Request, name: &str) -> Result<&'a str, Response> {
    match req.param(name) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Response::error(400, &format!("give ?{name}=..."))),
    }
}

fn group_arg(g: &str) -> GroupArg {
    GroupArg {
        group: Some(g.to_string()),
        group_opt: None,
    }
}

fn all_masters() -> AclTargetArgs {
    AclTargetArgs {
        cluster: None,
        broker: None,
    }
}

fn all_brokers() -> DelayStatusArgs {
    DelayStatusArgs {
        cluster: None,
        broker: None,
    }
}

/// A POST's `Origin`, when the browser sent one, names this server (`Host`).
fn same_origin(req: &Request) -> bool {
    match (req.header("origin"), req.header("host")) {
        (None, _) => true,
        (Some(o), Some(h)) => o == format!("http://{h}"),
        (Some(_), None) => false,
    }
}

/// The `Admin` a request runs with: the session's with ACL on, ringmq-ctl's otherwise.
fn context(state: &State, req: &Request) -> Result<Ctx, Response> {
    if !state.samples.borrow().acl {
        return Ok(Ctx {
            admin: state.admin.clone(),
            cfg: state.cfg.clone(),
            access_key: None,
        });
    }
    let s = req
        .cookie(session::COOKIE)
        .and_then(|t| state.sessions.borrow_mut().get(t, Instant::now()));
    match s {
        Some(s) => Ok(Ctx {
            admin: s.admin.clone(),
            cfg: s.cfg.clone(),
            access_key: Some(s.access_key.clone()),
        }),
        None => Err(Response::json(
            401,
            &json!({ "error": "log in first: the brokers use ACL", "login": true }),
        )),
    }
}

fn config(state: &State, req: &Request) -> Response {
    let samples = state.samples.borrow();
    let session = if samples.acl {
        req.cookie(session::COOKIE)
            .and_then(|t| state.sessions.borrow_mut().get(t, Instant::now()))
    } else {
        None
    };
    Response::json(
        200,
        &json!({
            "acl": samples.acl,
            "logged_in": session.is_some(),
            "access_key": session.map(|s| s.access_key.clone()),
            "refresh_ms": state.refresh.as_millis() as u64,
            "history_ms": state.history.as_millis() as u64,
            "sampled_at_ms": samples.sampled_at_ms,
        }),
    )
}

/// `POST /api/login {"access_key", "secret_key"}`: checks the keys with `acl whoami` on
/// every master and opens a session.
async fn login(state: &State, body: &[u8]) -> Response {
    if !state.samples.borrow().acl {
        return Response::error(400, "the brokers do not use ACL: no login needed");
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return Response::error(400, "send JSON {\"access_key\", \"secret_key\"}"),
    };
    let (Some(ak), Some(sk)) = (v["access_key"].as_str(), v["secret_key"].as_str()) else {
        return Response::error(400, "give access_key and secret_key");
    };
    let creds = Credentials::new(ak, sk);
    if let Err(e) = creds.validate() {
        return Response::error(400, &e.to_string());
    }
    let cfg = ClientConfig {
        credentials: Some(creds),
        ..state.cfg.clone()
    };
    let admin = match Admin::with_config(cfg.clone()).await {
        Ok(a) => a,
        Err(e) => return Response::error(502, &format!("reaching the name servers: {e}")),
    };
    let who = match acl::whoami(&admin, &all_masters()).await {
        Ok(r) => r.to_json(),
        Err(e) => {
            admin.close();
            return Response::json(
                401,
                &json!({ "error": format!("refused: {e}"), "login": true }),
            );
        }
    };
    let is_admin = rows(&who, "whoami").iter().any(|w| w["admin"] == true);
    let token = match state.sessions.borrow_mut().open(admin, cfg, ak.to_string()) {
        Ok(t) => t,
        Err(e) => return Response::error(500, &format!("making a session token: {e}")),
    };
    Response::json(
        200,
        &json!({ "logged_in": true, "access_key": ak, "admin": is_admin }),
    )
    .with_header("Set-Cookie", session::set_cookie(&token))
}

/// `cluster list` with the sampler's rates and store sizes per broker.
async fn cluster_view(state: &State, ctx: &Ctx) -> Answer {
    let args = ClusterListArgs {
        cluster: None,
        sample: Duration::ZERO,
    };
    let mut v = report(cluster::list(&ctx.admin, &args).await)?;
    let samples = state.samples.borrow();
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
async fn topics(state: &State, ctx: &Ctx) -> Answer {
    let list = report(topic::list(&ctx.admin).await)?;
    let mut out = Vec::new();
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
                let s = state.samples.borrow();
                row.insert(
                    "in_per_s".into(),
                    json!(s.topics_in.get(name).and_then(|c| c.per_s)),
                );
                row.insert("out_per_s".into(), json!(s.topic_out_per_s(name)));
            }
            // The brokers do not answer this account for it: not listed.
            Err(e) if not_allowed(&e) => continue,
            Err(e) => {
                row.insert("error".into(), json!(e.to_string()));
            }
        }
        out.push(Value::Object(row));
    }
    let mut v = json!({ "topics": out });
    sampler_info(&mut v, &state.samples.borrow());
    Ok(v)
}

/// One topic: per queue offsets (`topic status`) and where it lives (`topic route`).
async fn topic_view(ctx: &Ctx, req: &Request) -> Answer {
    let name = param(req, "name")?;
    let mut v = report(topic::status(&ctx.admin, name).await)?;
    let route = report(topic::route(&ctx.admin, name).await)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("topic".into(), json!(name));
        o.insert("brokers".into(), route["brokers"].clone());
        o.insert("route".into(), route["queues"].clone());
    }
    Ok(v)
}

/// Every group this account may read: members, lags, consume rate.
async fn groups(state: &State, ctx: &Ctx) -> Answer {
    // `group list` is an admin request; other accounts get the names the sampler saw,
    // each then read (or refused) with this account.
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
        Err(e) if not_allowed(&e) => (state.samples.borrow().group_names.clone(), Vec::new()),
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
                for k in ["member_count", "total_lag", "retry_lag", "dlq_lag"] {
                    row.insert(k.into(), s[k].clone());
                }
                let topics: Vec<&str> = rows(&p, "queues")
                    .iter()
                    .filter_map(|q| q["topic"].as_str())
                    .filter(|t| topic::topic_kind(t) == "normal")
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                row.insert("topics".into(), json!(topics));
                let samples = state.samples.borrow();
                let g = samples.groups.get(name);
                row.insert(
                    "consume_per_s".into(),
                    json!(g.and_then(|g| g.consume_per_s())),
                );
            }
            Err(e) if not_allowed(&e) => continue,
            Err(e) => {
                row.insert("error".into(), json!(e.to_string()));
            }
        }
        out.push(Value::Object(row));
    }
    let mut v = json!({ "groups": out });
    sampler_info(&mut v, &state.samples.borrow());
    Ok(v)
}

/// `/api/group`: `group progress` with the lag history; `/api/lag-history`: the history
/// alone. Both read the progress with the request's account first, so a history is shown
/// only to those who may read the group.
async fn group_view(state: &State, ctx: &Ctx, req: &Request, full: bool) -> Answer {
    let name = param(req, "group").or_else(|_| param(req, "name"))?;
    let mut v = report(group::progress(&ctx.admin, name, None).await)?;
    let samples = state.samples.borrow();
    let g = samples.groups.get(name);
    let points: Vec<Value> = g
        .map(|g| {
            g.history
                .iter()
                .map(|(t, lag)| json!({ "t_ms": t, "lag": lag }))
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
async fn resend(ctx: &Ctx, body: &[u8]) -> Answer {
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| Response::error(400, "send JSON {\"group\", \"id\"}"))?;
    let Some(group) = v["group"].as_str().filter(|g| !g.is_empty()) else {
        return Err(Response::error(400, "give group"));
    };
    let a = ResendDlqArgs {
        group: group_arg(group),
        id: v["id"].as_str().filter(|i| !i.is_empty()).map(String::from),
        max: RESEND_MAX,
    };
    report(dlq::resend(&ctx.admin, &ctx.cfg, &a).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_unique_and_the_page_names_no_other_host() {
        for (i, (p, _)) in ROUTES.iter().enumerate() {
            assert!(!ROUTES[i + 1..].iter().any(|(q, _)| q == p), "{p}");
        }
        for f in [INDEX_HTML, APP_JS, STYLE_CSS] {
            // The SVG namespace is a name, not a fetch.
            let f = f.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !f.contains("http://") && !f.contains("https://"),
                "external URL"
            );
        }
    }

    #[test]
    fn no_permission_is_403() {
        let e = CtlError::Refused("asking who this client is: NO_PERMISSION from x".into());
        assert!(not_allowed(&e));
        assert_eq!(failure(&e).status, 403);
        assert_eq!(failure(&CtlError::Usage("x".into())).status, 400);
    }
}
