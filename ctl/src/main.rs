//! `ringmq-ctl`: cluster operations, the `mqadmin` of ringmq. Command line ([`cli`]) ->
//! admin calls (`ringmq_client::admin`, through [`cmd`]) -> a [`output::Report`] printed as
//! tables or JSON. Flag values are parsed by [`parse`]. A failure prints one line
//! `ringmq-ctl: <reason>` on stderr and exits non-zero ([`error`]).
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod dashboard;
mod error;
mod output;
mod parse;
mod security;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use ringmq_client::admin::split_name_servers;
use ringmq_client::security::Security;
use ringmq_client::{Admin, ClientConfig};

use crate::cli::{Cli, Command};
use crate::error::{Context, CtlError};
use crate::output::Report;

/// Longest a TCP connect may take, whatever `--timeout` says: an unreachable address
/// should fail within seconds.
const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(3);

fn main() {
    let cli = Cli::parse();
    let name_servers: Vec<SocketAddr> = split_name_servers(&cli.namesrv)
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    if let Command::Dashboard(args) = &cli.command {
        let code = match dashboard::serve(&cli, args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ringmq-ctl: {}", e.line(&name_servers));
                e.exit_code()
            }
        };
        std::process::exit(code);
    }
    let code = match run(&cli) {
        Ok(report) => print(&report, cli.json),
        Err(e) => {
            eprintln!("ringmq-ctl: {}", e.line(&name_servers));
            e.exit_code()
        }
    };
    std::process::exit(code);
}

fn run(cli: &Cli) -> Result<Report, CtlError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CtlError::Refused(format!("starting the runtime: {e}")))?;
    let cfg = client_config(cli)?;
    rt.block_on(async {
        let admin = Admin::with_config(cfg.clone())
            .await
            .doing(|| format!("name servers {:?}", cli.namesrv))?;
        let report = cmd::run(&admin, &cfg, &cli.command).await;
        admin.close();
        report
    })
}

/// The client settings of the command line: name servers, timeouts, TLS, credentials.
pub fn client_config(cli: &Cli) -> Result<ClientConfig, CtlError> {
    let (tls, credentials) = cli.security.client().map_err(CtlError::Usage)?;
    // The TLS files are read here, so a bad one is reported as itself, not as a failed
    // connection to the name servers.
    Security::load(&tls, credentials.as_ref()).map_err(|e| CtlError::Refused(e.to_string()))?;
    Ok(ClientConfig {
        name_servers: split_name_servers(&cli.namesrv),
        request_timeout: cli.timeout,
        connect_timeout: cli.timeout.min(CONNECT_TIMEOUT_MAX),
        tls,
        credentials,
        ..ClientConfig::default()
    })
}

/// Prints the report; the exit code (0, or 1 when stdout is gone).
fn print(report: &Report, json: bool) -> i32 {
    for n in &report.notes {
        eprintln!("ringmq-ctl: {n}");
    }
    let text = if json {
        let mut s = report.to_json().to_string();
        s.push('\n');
        s
    } else {
        report.to_table()
    };
    let mut out = std::io::stdout().lock();
    let written = match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("ringmq-ctl: writing the output: {e}");
            1
        }
    };
    match &report.failed {
        Some(why) => {
            eprintln!("ringmq-ctl: {why}");
            1
        }
        None => written,
    }
}
