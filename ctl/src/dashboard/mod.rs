//! `ringmq-ctl dashboard`: a web page of the cluster, served by this process.
//!
//! - [`server`]: the listener and every limit: connections, timeouts, sizes (hyper's HTTP/1
//!   server parses, axum routes, `server::guard` wraps every route).
//! - [`http`]: the answers (JSON, the headers every answer carries) and the size limits.
//! - [`api`]: the routes; every JSON answer comes from the same command functions as the
//!   other subcommands ([`crate::cmd`]); [`views`]: those joined with the sampler's figures;
//!   [`actions`]: what the page changes (topics, groups, offsets, broker configuration).
//! - [`sampler`]: rates and lag history, read every `--refresh` with ringmq-ctl's own
//!   credentials.
//! - [`session`]: logins when the brokers use ACL.
//! - `index.html`, `app.js`, `style.css`: the page, built into the binary; it fetches
//!   nothing from anywhere else and draws its charts as inline SVG.
//!
//! Everything runs on one thread (a current-thread runtime): the page's requests and the
//! sampler take turns. The shared state is behind `Arc`/`Mutex` because axum's handlers
//! must be `Send`; a lock is taken only between awaits, so it is never waited for.

mod actions;
mod answer;
mod api;
mod http;
mod sampler;
mod server;
mod session;
mod state;
mod views;

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringmq_client::Admin;

use crate::cli::{Cli, DashboardArgs};
use crate::error::{Context, CtlError, Result};
use sampler::{history_points, Samples, HISTORY_POINTS_MAX};

/// Shortest and longest `--refresh`.
const REFRESH_MIN: Duration = Duration::from_secs(1);
const REFRESH_MAX: Duration = Duration::from_secs(600);
/// Longest `--history`.
const HISTORY_MAX: Duration = Duration::from_secs(24 * 3600);

/// Serves the page until the process is stopped.
pub fn serve(cli: &Cli, a: &DashboardArgs) -> Result<()> {
    check(a)?;
    let cfg = crate::client_config(cli)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CtlError::Refused(format!("starting the runtime: {e}")))?;
    rt.block_on(async {
        let admin = Admin::with_config(cfg.clone())
            .await
            .doing(|| format!("name servers {:?}", cli.namesrv))?;
        let points = history_points(a.history, a.refresh);
        let samples = Arc::new(Mutex::new(Samples::default()));
        // One round before listening, so the first page already knows whether to ask for
        // a login.
        sample_once(&admin, &samples, points).await;
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .map_err(|e| CtlError::Refused(format!("listening on {}: {e}", a.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| CtlError::Refused(format!("listening on {}: {e}", a.listen)))?;
        println!("ringmq dashboard: http://{addr}/");
        let _ = std::io::stdout().flush();
        let state = Arc::new(api::State {
            admin: admin.clone(),
            cfg,
            sessions: Mutex::default(),
            samples: Arc::clone(&samples),
            refresh: a.refresh,
            history: a.history,
        });
        tokio::spawn(sample_loop(admin, samples, a.refresh, points));
        let app = api::router(state).layer(axum::middleware::from_fn(server::guard));
        server::run(listener, app).await;
        Ok(())
    })
}

/// The flags' ranges.
fn check(a: &DashboardArgs) -> Result<()> {
    if a.refresh < REFRESH_MIN || a.refresh > REFRESH_MAX {
        return Err(CtlError::Usage(format!(
            "--refresh {:?}: use 1s to 10m",
            a.refresh
        )));
    }
    if a.history < a.refresh || a.history > HISTORY_MAX {
        return Err(CtlError::Usage(format!(
            "--history {:?}: use --refresh to 24h",
            a.history
        )));
    }
    if a.history.as_secs_f64() / a.refresh.as_secs_f64() > HISTORY_POINTS_MAX as f64 {
        return Err(CtlError::Usage(format!(
            "--history / --refresh is more than {HISTORY_POINTS_MAX} readings"
        )));
    }
    Ok(())
}

async fn sample_loop(admin: Admin, samples: Arc<Mutex<Samples>>, every: Duration, points: usize) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        sample_once(&admin, &samples, points).await;
    }
}

/// One round into a copy, swapped in at the end, so no borrow is held across an await
/// (and requests meanwhile see the last round whole).
async fn sample_once(admin: &Admin, samples: &Mutex<Samples>, points: usize) {
    let mut s = state::lock(samples).clone();
    sampler::sample(admin, &mut s, points).await;
    *state::lock(samples) = s;
}
