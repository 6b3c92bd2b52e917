//! The dashboard's routes: the page's three files, and a JSON API under `/api/` whose every
//! answer comes from the command functions of `ringmq-ctl` ([`crate::cmd`]) rendered with
//! [`Report::to_json`](crate::output::Report::to_json), plus what the
//! [`sampler`](super::sampler) computed. Errors are
//! `{"error": "..."}` with a 4xx/5xx status; a broker's NO_PERMISSION is 403 with
//! `"not_allowed": true`. Only `POST` changes anything (login, logout, resending dead
//! letters); a `POST` whose `Origin` is not this server is refused.
//!
//! With ACL on, every `/api/` route but `config` and `login` needs a session
//! ([`super::session`]) and runs with its `Admin`; lists keep only what that account's
//! requests are answered for (the brokers refuse the rest).

use std::time::Instant;

use ringmq_client::{Admin, ClientConfig, Credentials};
use serde_json::{json, Value};

use super::answer::{group_arg, param, report};
use super::http::{Request, Response};
use super::sampler::rows;
use super::session;
pub use super::state::{Ctx, State};
use super::views;
use crate::cli::{AclTargetArgs, DelayStatusArgs, DlqArgs, MsgIdArgs, MsgKeyArgs, MsgTimeArgs};
use crate::cmd::{acl, broker, delay, dlq, msg, txn};

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");

/// Messages a lookup returns (per broker for keys).
pub const LOOKUP_MAX: u32 = 100;
/// Dead letters `/api/dlq` lists.
pub const DLQ_SHOWN_MAX: u32 = 100;

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
        "/api/cluster" => views::cluster_view(state, &ctx).await,
        "/api/broker" => match param(req, "name") {
            Ok(b) => report(broker::status(&ctx.admin, b).await),
            Err(r) => Err(r),
        },
        "/api/topics" => views::topics(state, &ctx).await,
        "/api/topic" => views::topic_view(&ctx, req).await,
        "/api/groups" => views::groups(state, &ctx).await,
        "/api/group" => views::group_view(state, &ctx, req, true).await,
        "/api/lag-history" => views::group_view(state, &ctx, req, false).await,
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
        "/api/dlq/resend" => views::resend(&ctx, body).await,
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
}
