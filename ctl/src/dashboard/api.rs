//! The dashboard's routes (an axum `Router`; `server.rs` puts its limits around it): the
//! page's three files, and a JSON API under `/api/` whose every
//! answer comes from the command functions of `ringmq-ctl` ([`crate::cmd`]) rendered with
//! [`Report::to_json`](crate::output::Report::to_json), plus what the
//! [`sampler`](super::sampler) computed. Errors are
//! `{"error": "..."}` with a 4xx/5xx status; a broker's NO_PERMISSION is 403 with
//! `"not_allowed": true`. Only `POST` changes anything (login, logout, resending dead
//! letters, and the administration in [`actions`]: topics, groups, offsets, broker
//! configuration); a `POST` whose `Origin` is not this server is refused.
//!
//! With ACL on, every `/api/` route but `config` and `login` needs a session
//! ([`super::session`]) and runs with its `Admin` (the [`Ctx`] extractor); lists keep only
//! what that account's requests are answered for (the brokers refuse the rest). Each route
//! has one method; another is 405 with `Allow` (HEAD included: axum would otherwise answer
//! it with the GET handler).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Query, State as Shared};
use axum::http::header::{HeaderMap, ALLOW, HOST, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use ringmq_client::{Admin, ClientConfig, Credentials};
use serde_json::{json, Value};

use super::actions;
use super::answer::{group_arg, param, report, Answer};
use super::http::{self, Params, Refusal};
use super::sampler::rows;
use super::session;
pub use super::state::{Ctx, State};
use super::views;
use crate::cli::{AclTargetArgs, DelayStatusArgs, DlqArgs, MsgIdArgs, MsgKeyArgs, MsgTimeArgs};
use crate::cmd::topic::PutMode;
use crate::cmd::{acl, broker, delay, dlq, msg, txn};

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");

/// Messages a lookup returns (per broker for keys).
pub const LOOKUP_MAX: u32 = 100;
/// Dead letters `/api/dlq` lists.
pub const DLQ_SHOWN_MAX: u32 = 100;

type App = Arc<State>;

/// Every route with its one method (another method is 405, an unknown path 404).
pub fn router(state: App) -> Router {
    Router::new()
        .route("/", only_get(page))
        .route("/index.html", only_get(page))
        .route("/app.js", only_get(app_js))
        .route("/style.css", only_get(style_css))
        .route("/api/config", only_get(config))
        .route("/api/login", only_post(login))
        .route("/api/logout", only_post(logout))
        .route("/api/whoami", only_get(whoami))
        .route("/api/cluster", only_get(cluster))
        .route("/api/broker", only_get(broker_status))
        .route("/api/topics", only_get(topics))
        .route("/api/topic", only_get(topic))
        .route("/api/groups", only_get(groups))
        .route("/api/group", only_get(group))
        .route("/api/lag-history", only_get(lag_history))
        .route("/api/dlq", only_get(dlq_list))
        .route("/api/dlq/resend", only_post(dlq_resend))
        .route("/api/msg/id", only_get(msg_id))
        .route("/api/msg/key", only_get(msg_key))
        .route("/api/msg/time", only_get(msg_time))
        .route("/api/delay", only_get(delay_status))
        .route("/api/txn", only_get(txn_status))
        .route("/api/msg/trace", only_get(msg_trace))
        .route("/api/topic/create", only_post(topic_create))
        .route("/api/topic/update", only_post(topic_update))
        .route("/api/topic/delete", only_post(topic_delete))
        .route("/api/group/update", only_post(group_update))
        .route("/api/group/delete", only_post(group_delete))
        .route("/api/group/reset", only_post(group_reset))
        .route("/api/group/connections", only_get(group_connections))
        .route(
            "/api/broker/config",
            get(broker_config)
                .post(broker_config_set)
                .head(|uri: Uri| async move { wrong_method(&uri, "GET, POST") })
                .fallback(|uri: Uri| async move { wrong_method(&uri, "GET, POST") }),
        )
        .fallback(
            |uri: Uri| async move { http::error(404, &format!("no such page: {}", uri.path())) },
        )
        .with_state(state)
}

/// `handler` for GET; HEAD and every other method 405.
fn only_get<H, T>(handler: H) -> MethodRouter<App>
where
    H: axum::handler::Handler<T, App>,
    T: 'static,
{
    // axum answers HEAD with the GET handler unless HEAD has its own.
    get(handler)
        .head(|uri: Uri| async move { wrong_method(&uri, "GET") })
        .fallback(|uri: Uri| async move { wrong_method(&uri, "GET") })
}

/// `handler` for POST; every other method 405.
fn only_post<H, T>(handler: H) -> MethodRouter<App>
where
    H: axum::handler::Handler<T, App>,
    T: 'static,
{
    post(handler).fallback(|uri: Uri| async move { wrong_method(&uri, "POST") })
}

fn wrong_method(uri: &Uri, method: &str) -> Response {
    http::with_header(
        http::error(405, &format!("{} takes {method} only", uri.path())),
        ALLOW,
        method,
    )
}

async fn page() -> Response {
    http::answer(200, "text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    http::answer(200, "text/javascript; charset=utf-8", APP_JS)
}

async fn style_css() -> Response {
    http::answer(200, "text/css; charset=utf-8", STYLE_CSS)
}

/// The session's `Admin` with ACL on, ringmq-ctl's otherwise; without a session under ACL,
/// 401 with `"login": true`.
impl FromRequestParts<App> for Ctx {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Ctx, Refusal> {
        context(state, &parts.headers)
    }
}

/// A handler's answer: its JSON (with the session's access key) or its error.
fn done(ctx: &Ctx, answer: Answer) -> Response {
    match answer {
        Ok(mut v) => {
            if let (Some(o), Some(k)) = (v.as_object_mut(), &ctx.access_key) {
                o.insert("access_key".into(), json!(k));
            }
            http::json(200, &v)
        }
        Err(r) => r.into_response(),
    }
}

async fn whoami(ctx: Ctx) -> Response {
    done(&ctx, report(acl::whoami(&ctx.admin, &all_masters()).await))
}

async fn cluster(Shared(state): Shared<App>, ctx: Ctx) -> Response {
    done(&ctx, views::cluster_view(&state, &ctx).await)
}

async fn broker_status(ctx: Ctx, Query(p): Query<Params>) -> Response {
    let answer = match param(&p, "name") {
        Ok(b) => report(broker::status(&ctx.admin, b).await),
        Err(r) => Err(r),
    };
    done(&ctx, answer)
}

async fn topics(Shared(state): Shared<App>, ctx: Ctx) -> Response {
    done(&ctx, views::topics(&state, &ctx).await)
}

async fn topic(Shared(state): Shared<App>, ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, views::topic_view(&state, &ctx, &p).await)
}

async fn groups(Shared(state): Shared<App>, ctx: Ctx) -> Response {
    done(&ctx, views::groups(&state, &ctx).await)
}

async fn group(Shared(state): Shared<App>, ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, views::group_view(&state, &ctx, &p, true).await)
}

async fn lag_history(Shared(state): Shared<App>, ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, views::group_view(&state, &ctx, &p, false).await)
}

async fn dlq_list(ctx: Ctx, Query(p): Query<Params>) -> Response {
    let answer = match param(&p, "group") {
        Ok(g) => {
            let a = DlqArgs {
                group: group_arg(g),
                max: DLQ_SHOWN_MAX,
            };
            report(dlq::list(&ctx.admin, &a).await)
        }
        Err(r) => Err(r),
    };
    done(&ctx, answer)
}

/// `POST /api/dlq/resend {"group", "id"?}`; the origin is checked before the session.
async fn dlq_resend(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    if !same_origin(&headers) {
        return cross_origin();
    }
    match context(&state, &headers) {
        Ok(ctx) => done(&ctx, views::resend(&ctx, &body).await),
        Err(r) => r.into_response(),
    }
}

/// A `POST` that changes something: its origin is checked before its session, then
/// `action` runs with the session's account.
async fn act<F>(state: &App, headers: &HeaderMap, action: F) -> Response
where
    F: AsyncFnOnce(&Ctx) -> Answer,
{
    if !same_origin(headers) {
        return cross_origin();
    }
    match context(state, headers) {
        Ok(ctx) => {
            let answer = action(&ctx).await;
            done(&ctx, answer)
        }
        Err(r) => r.into_response(),
    }
}

async fn topic_create(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::topic_put(ctx, &body, PutMode::Create).await
    })
    .await
}

async fn topic_update(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::topic_put(ctx, &body, PutMode::Update).await
    })
    .await
}

async fn topic_delete(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::topic_delete(ctx, &body).await
    })
    .await
}

async fn group_update(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::group_update(ctx, &body, false).await
    })
    .await
}

async fn group_delete(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::group_update(ctx, &body, true).await
    })
    .await
}

async fn group_reset(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, async |ctx| {
        actions::group_reset(ctx, &body).await
    })
    .await
}

async fn group_connections(ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, actions::group_connections(&ctx, &p).await)
}

async fn broker_config(ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, actions::broker_config(&ctx, &p).await)
}

async fn broker_config_set(
    Shared(state): Shared<App>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, async |ctx| {
        actions::broker_config_set(ctx, &body).await
    })
    .await
}

async fn msg_trace(ctx: Ctx, Query(p): Query<Params>) -> Response {
    done(&ctx, actions::msg_trace(&ctx, &p).await)
}

async fn msg_id(ctx: Ctx, Query(p): Query<Params>) -> Response {
    let answer = match param(&p, "id") {
        Ok(id) => {
            let a = MsgIdArgs {
                id: Some(id.to_string()),
                id_opt: None,
            };
            report(msg::by_id(&ctx.admin, &a).await)
        }
        Err(r) => Err(r),
    };
    done(&ctx, answer)
}

async fn msg_key(ctx: Ctx, Query(p): Query<Params>) -> Response {
    let answer = match (param(&p, "topic"), param(&p, "key")) {
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
    };
    done(&ctx, answer)
}

async fn msg_time(ctx: Ctx, Query(p): Query<Params>) -> Response {
    let answer = match (param(&p, "topic"), param(&p, "begin")) {
        (Ok(t), Ok(b)) => {
            let a = MsgTimeArgs {
                topic: t.to_string(),
                begin: b.to_string(),
                end: http::param(&p, "end")
                    .filter(|e| !e.is_empty())
                    .map(String::from),
                max: LOOKUP_MAX,
            };
            report(msg::by_time(&ctx.admin, &a).await)
        }
        (Err(r), _) | (_, Err(r)) => Err(r),
    };
    done(&ctx, answer)
}

async fn delay_status(ctx: Ctx) -> Response {
    done(
        &ctx,
        report(delay::status(&ctx.admin, &all_brokers()).await),
    )
}

async fn txn_status(ctx: Ctx) -> Response {
    done(&ctx, report(txn::status(&ctx.admin, &all_brokers()).await))
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
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    match (headers.get(ORIGIN), text(HOST)) {
        (None, _) => true,
        (Some(o), Some(h)) => o.to_str().is_ok_and(|o| o == format!("http://{h}")),
        (Some(_), None) => false,
    }
}

fn cross_origin() -> Response {
    http::error(403, "cross-origin request refused")
}

/// The `Admin` a request runs with: the session's with ACL on, ringmq-ctl's otherwise.
fn context(state: &State, headers: &HeaderMap) -> Result<Ctx, Refusal> {
    if !state.samples().acl {
        return Ok(Ctx {
            admin: state.admin.clone(),
            cfg: state.cfg.clone(),
            access_key: None,
        });
    }
    let s = http::cookie(headers, session::COOKIE)
        .and_then(|t| state.sessions().get(t, Instant::now()));
    match s {
        Some(s) => Ok(Ctx {
            admin: s.admin.clone(),
            cfg: s.cfg.clone(),
            access_key: Some(s.access_key.clone()),
        }),
        None => Err(Refusal {
            status: 401,
            body: json!({ "error": "log in first: the brokers use ACL", "login": true }),
        }),
    }
}

async fn config(Shared(state): Shared<App>, headers: HeaderMap) -> Response {
    let acl = state.samples().acl;
    let session = if acl {
        http::cookie(&headers, session::COOKIE)
            .and_then(|t| state.sessions().get(t, Instant::now()))
    } else {
        None
    };
    let samples = state.samples();
    http::json(
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

async fn logout(Shared(state): Shared<App>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return cross_origin();
    }
    if let Some(t) = http::cookie(&headers, session::COOKIE) {
        state.sessions().close(t);
    }
    http::with_header(
        http::json(200, &json!({ "logged_in": false })),
        SET_COOKIE,
        &session::clear_cookie(),
    )
}

/// `POST /api/login {"access_key", "secret_key"}`: checks the keys with `acl whoami` on
/// every master and opens a session.
async fn login(Shared(state): Shared<App>, headers: HeaderMap, body: Bytes) -> Response {
    if !same_origin(&headers) {
        return cross_origin();
    }
    if !state.samples().acl {
        return http::error(400, "the brokers do not use ACL: no login needed");
    }
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return http::error(400, "send JSON {\"access_key\", \"secret_key\"}"),
    };
    let (Some(ak), Some(sk)) = (v["access_key"].as_str(), v["secret_key"].as_str()) else {
        return http::error(400, "give access_key and secret_key");
    };
    let creds = Credentials::new(ak, sk);
    if let Err(e) = creds.validate() {
        return http::error(400, &e.to_string());
    }
    let cfg = ClientConfig {
        credentials: Some(creds),
        ..state.cfg.clone()
    };
    let admin = match Admin::with_config(cfg.clone()).await {
        Ok(a) => a,
        Err(e) => return http::error(502, &format!("reaching the name servers: {e}")),
    };
    let who = match acl::whoami(&admin, &all_masters()).await {
        Ok(r) => r.to_json(),
        Err(e) => {
            admin.close();
            return http::json(
                401,
                &json!({ "error": format!("refused: {e}"), "login": true }),
            );
        }
    };
    let is_admin = rows(&who, "whoami").iter().any(|w| w["admin"] == true);
    let opened = state.sessions().open(admin, cfg, ak.to_string());
    let token = match opened {
        Ok(t) => t,
        Err(e) => return http::error(500, &format!("making a session token: {e}")),
    };
    http::with_header(
        http::json(
            200,
            &json!({ "logged_in": true, "access_key": ak, "admin": is_admin }),
        ),
        SET_COOKIE,
        &session::set_cookie(&token),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_no_other_host() {
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
    fn a_post_from_another_origin_is_refused() {
        let mut h = HeaderMap::new();
        assert!(
            same_origin(&h),
            "no Origin: not a browser's cross-site request"
        );
        h.insert(HOST, "127.0.0.1:8080".parse().unwrap());
        h.insert(ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert!(same_origin(&h));
        h.insert(ORIGIN, "http://evil.example".parse().unwrap());
        assert!(!same_origin(&h));
        h.remove(HOST);
        assert!(!same_origin(&h));
    }
}
