//! `ringmq`: args -> config -> start. Nothing else.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use ringmq_node::broker::node as run;
use ringmq_node::broker::shard::start::StartOptions;
use ringmq_node::config::{
    BrokerConfig, FlushDiskType, IgnoredKey, MetricsConfig, NamesrvConfig, TlsConfig, TlsMode,
};
use ringmq_node::metrics::{self, Sources};
use ringmq_node::net::namesrv;

/// ringmq: a RocketMQ-architecture message broker (io_uring, thread-per-core).
///
/// Start with `ringmq standalone`: a name server and one broker in one process, data in
/// ./ringmq-data. Logs go to stderr; set RUST_LOG (error, warn, info, debug, trace, or
/// target=level lists) to change how much. RINGMQ_IO=epoll runs without io_uring.
/// RINGMQ_INNER_SECRET_KEY gives a broker's innerSecretKey (ACL) when its config does not,
/// so the secret stays off the command line.
#[derive(Parser, Debug)]
#[command(name = "ringmq", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Name server and one master broker in one process (the embedded default). Ready once
    /// the broker is registered with the name server; exits 1 when it cannot register.
    Standalone(StandaloneArgs),
    /// A name server.
    Namesrv(NamesrvArgs),
    /// A broker configured by a RocketMQ-style broker.properties (or .toml) file.
    Broker(BrokerArgs),
}

#[derive(clap::Args, Debug)]
struct StandaloneArgs {
    /// Data directory (the store root; one process at a time, locked by its `lock` file).
    #[arg(long, default_value = "./ringmq-data")]
    data: PathBuf,
    /// Address to listen on and publish.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Name server port (0 = any free port, printed at start).
    #[arg(long, default_value_t = 9876)]
    namesrv_port: u16,
    /// Broker port (0 = any free port, printed at start).
    #[arg(long, default_value_t = 10911)]
    broker_port: u16,
    /// RocketMQ 5 gRPC port (grpcServerPort; 0 = any free port, printed at start). Default
    /// 8081; when the default port is taken, the node starts without the gRPC listener
    /// (logged); a port asked for here or by grpcServerPort must bind.
    #[arg(long)]
    grpc_port: Option<u16>,
    /// Shards (event-loop threads); default one per core.
    #[arg(long)]
    shards: Option<usize>,
    /// When a send is acknowledged: async = from the page cache (fdatasync every
    /// flushIntervalCommitLog ms), sync = after the fdatasync that covers it.
    #[arg(long, value_enum, default_value_t = Flush::Async)]
    flush: Flush,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args, Debug)]
struct NamesrvArgs {
    /// Address to listen on (default: the config file's bindAddress, else 0.0.0.0).
    #[arg(long)]
    host: Option<IpAddr>,
    /// Port; 0 = any free port, printed at start (default: the config file's listenPort,
    /// else 9876).
    #[arg(long)]
    port: Option<u16>,
    /// Optional config file (namesrv.properties or .toml).
    #[arg(short = 'c', long)]
    config: Option<PathBuf>,
    /// Milliseconds between scans for silent brokers (scanNotActiveBrokerInterval).
    #[arg(long)]
    scan_interval_ms: Option<u64>,
    /// Milliseconds of silence after which a broker is dropped (default 120000).
    #[arg(long)]
    broker_expiry_ms: Option<u64>,
    /// Set a name server config key, RocketMQ spelling (repeatable): --set tls.server.mode=enforcing
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run the event loop on epoll instead of io_uring.
    #[arg(long)]
    no_io_uring: bool,
}

#[derive(clap::Args, Debug)]
struct BrokerArgs {
    /// broker.properties (RocketMQ keys) or broker.toml.
    #[arg(short = 'c', long)]
    config: PathBuf,
    /// Name servers, "h1:9876;h2:9876" (overrides namesrvAddr).
    #[arg(short = 'n', long)]
    namesrv: Option<String>,
    /// Address to listen on (default: brokerIP1, else 0.0.0.0).
    #[arg(long)]
    host: Option<IpAddr>,
    /// Shards (overrides the `shards` key).
    #[arg(long)]
    shards: Option<usize>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args, Debug)]
struct CommonArgs {
    /// Set a broker config key, RocketMQ spelling (repeatable): --set flushIntervalCommitLog=200
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run without io_uring (epoll event loops, pwrite store writes); also RINGMQ_IO=epoll.
    #[arg(long)]
    no_io_uring: bool,
    /// Copy record bytes into pull responses instead of splicing them from the log file or
    /// sending them from its mapping (the same as `--set transferMsgByHeap=true`).
    #[arg(long)]
    transfer_msg_by_heap: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Flush {
    Async,
    Sync,
}

fn main() {
    let cli = Cli::parse();
    init_logging();
    // Signals are taken by sigwait on this thread; every thread started later inherits the
    // block, so SIGTERM/SIGINT never interrupt a shard.
    let signals = ringmq_node::io::signal::block_termination();
    let result = match cli.command {
        Command::Standalone(a) => standalone(a, &signals),
        Command::Namesrv(a) => namesrv_cmd(a, &signals),
        Command::Broker(a) => broker_cmd(a, &signals),
    };
    if let Err(e) = result {
        log::error!("{e}");
        eprintln!("ringmq: {e}");
        std::process::exit(1);
    }
}

fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info");
    env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .format_target(false)
        .init();
}

fn force_fallback(flag: bool) -> bool {
    flag || std::env::var("RINGMQ_IO").is_ok_and(|v| v == "epoll" || v == "fallback")
}

/// Applies `--set` overrides as file lines are applied (what is ignored or adjusted is
/// logged the same way), then the environment's inner secret, then validates.
fn apply_sets(cfg: &mut BrokerConfig, sets: &[String]) -> Result<(), String> {
    let loaded = std::mem::take(cfg)
        .apply_overrides(sets, "--set")
        .map_err(|e| e.to_string())?;
    report(&loaded.ignored, &loaded.warnings);
    *cfg = loaded.config;
    // The inner secret may come from the environment, so it stays out of `ps` and the shell's
    // history; a key in the file or --set wins.
    if cfg.acl.inner_secret_key.is_none() {
        if let Ok(v) = std::env::var(INNER_SECRET_ENV) {
            if !v.is_empty() {
                cfg.acl.inner_secret_key = Some(ringmq_wire::auth::Secret::new(v));
            }
        }
    }
    cfg.validate().map_err(|e| e.to_string())
}

/// Logs what a config file or `--set` list carried that was not applied as written.
fn report(ignored: &[IgnoredKey], warnings: &[String]) {
    for ig in ignored {
        log::warn!("{ig}");
    }
    for w in warnings {
        log::warn!("{w}");
    }
}

/// How long a standalone node waits for its broker's registration with its own name server
/// before it gives up starting (a refusal ends the wait at once).
const STANDALONE_REGISTER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Environment variable read for `innerSecretKey` when the config does not set it.
const INNER_SECRET_ENV: &str = "RINGMQ_INNER_SECRET_KEY";

fn standalone(a: StandaloneArgs, signals: &ringmq_node::io::signal::Signals) -> Result<(), String> {
    let fallback = force_fallback(a.common.no_io_uring);
    let mut cfg = BrokerConfig {
        broker_name: "broker-a".to_string(),
        store_path_root_dir: a.data.clone(),
        listen_port: a.broker_port,
        shards: a.shards,
        flush_disk_type: match a.flush {
            Flush::Async => FlushDiskType::AsyncFlush,
            Flush::Sync => FlushDiskType::SyncFlush,
        },
        auto_create_topic_enable: true,
        default_topic_queue_nums: 8,
        ..BrokerConfig::default()
    };
    apply_sets(&mut cfg, &a.common.set)?;
    cfg.acl.file_path = Some(cfg.acl.file_path(None));
    // One process, one ACL file: the name server checks with the broker's settings.
    // ... and the same TLS listener settings on both ports.
    let ns_cfg = NamesrvConfig {
        acl: cfg.acl.clone(),
        tls: cfg.tls.clone(),
        ..NamesrvConfig::default()
    };
    if cfg.tls.server_mode() == TlsMode::Enforcing && !cfg.tls.client_enable {
        return Err("tls.server.mode=enforcing: the name server of this standalone refuses plaintext, and its broker registers with it: set tls.enable=true and tls.client.trustCertPath (the CA that signed tls.server.certPath)".to_string());
    }
    let ns = namesrv::start(ns_cfg, SocketAddr::new(a.host, a.namesrv_port), fallback)?;
    cfg.namesrv_addr = vec![ns.addr.to_string()];
    let metrics_cfg = cfg.metrics.clone();
    // gRPC edge (ringmq-grpc): --grpc-port, else grpcServerPort, else 8081 if free.
    let mut grpc_cfg = GrpcStart {
        port: a.grpc_port.or(cfg.grpc_server_port),
        default_port: Some(GRPC_DEFAULT_PORT),
        host: a.host,
        name_servers: cfg.namesrv_addr.clone(),
        credentials: inner_credentials(&cfg),
        tls: native_tls(&cfg),
        acl: None,
        replay_window_ms: cfg.acl.replay_window_ms,
        listener_tls: cfg.tls.clone(),
        in_process: None,
    };
    log_start("standalone", &cfg, fallback);
    let opts = StartOptions {
        listen: SocketAddr::new(a.host, cfg.listen_port),
        publish_host: a.host,
        force_fallback: fallback,
        transfer_msg_by_heap: a.common.transfer_msg_by_heap,
    };
    let acl_hint = (cfg.acl.enable && cfg.acl.inner_access_key.is_none()).then(|| {
        format!(
            "; with aclEnable=true the broker signs its registration with innerAccessKey and \
             innerSecretKey (or {INNER_SECRET_ENV}): set them to an admin account of {}",
            cfg.acl.file_path(None).display()
        )
    });
    let broker = match run::start(cfg, opts) {
        Ok(b) => b,
        Err(e) => {
            ns.stop();
            return Err(e);
        }
    };
    // Ready means clients find the broker: its own name server must have its registration.
    if let Err(e) = broker.wait_registered(STANDALONE_REGISTER_WAIT) {
        broker.stop();
        ns.stop();
        return Err(format!(
            "the broker could not register with this standalone's name server: {e}{}",
            acl_hint.unwrap_or_default()
        ));
    }
    let sources = Sources {
        broker: Some(broker.broker.clone()),
        namesrv_acl: ns.acl.clone(),
        namesrv: Some(ns.counts.clone()),
    };
    let metrics = match start_metrics(&metrics_cfg, sources) {
        Ok(m) => m,
        Err(e) => {
            broker.stop();
            ns.stop();
            return Err(e);
        }
    };
    // The broker's own ACL (plain_acl.yml or ACL 2.0): gRPC callers meet the same one.
    grpc_cfg.acl = broker.broker.acl.clone();
    grpc_cfg.in_process = Some(ringmq_grpc::InProcess::new(
        ringmq_node::net::in_process::dialer(broker.broker.clone()),
    ));
    let grpc = match start_grpc(grpc_cfg) {
        Ok(g) => g,
        Err(e) => {
            stop_metrics(metrics);
            broker.stop();
            ns.stop();
            return Err(e);
        }
    };
    println!(
        "ringmq standalone ready: namesrv {} broker {} ({} shards)",
        ns.addr, broker.addr, broker.broker.shard_count
    );
    let sig = signals.wait();
    log::info!(
        "{sig}: stopping (finishing in-flight requests, flushing; a second signal exits at once)"
    );
    signals.exit_on_next();
    stop_grpc(grpc);
    stop_metrics(metrics);
    broker.stop();
    ns.stop();
    log::info!("stopped cleanly");
    Ok(())
}

fn namesrv_cmd(a: NamesrvArgs, signals: &ringmq_node::io::signal::Signals) -> Result<(), String> {
    let mut cfg = match &a.config {
        Some(path) => {
            let loaded = NamesrvConfig::load(path).map_err(|e| e.to_string())?;
            report(&loaded.ignored, &loaded.warnings);
            loaded.config
        }
        None => NamesrvConfig::default(),
    };
    cfg.acl.file_path = Some(
        cfg.acl
            .file_path(a.config.as_deref().and_then(std::path::Path::parent)),
    );
    if let Some(ms) = a.scan_interval_ms {
        cfg.scan_not_active_broker_interval_ms = ms;
    }
    if let Some(ms) = a.broker_expiry_ms {
        cfg.broker_channel_expired_time_ms = ms;
    }
    let loaded = cfg
        .apply_overrides(&a.set, "--set")
        .map_err(|e| e.to_string())?;
    report(&loaded.ignored, &loaded.warnings);
    let cfg = loaded.config;
    cfg.validate().map_err(|e| e.to_string())?;
    log::info!(
        "ringmq {} name server; brokers silent for {} ms are dropped (scan every {} ms)",
        ringmq_node::VERSION,
        cfg.broker_channel_expired_time_ms,
        cfg.scan_not_active_broker_interval_ms
    );
    let host = match a.host {
        Some(h) => h,
        None => cfg
            .listen_host
            .parse()
            .map_err(|_| format!("bindAddress {} is not an IP address", cfg.listen_host))?,
    };
    let port = a.port.unwrap_or(cfg.listen_port);
    let metrics_cfg = cfg.metrics.clone();
    let ns = namesrv::start(
        cfg,
        SocketAddr::new(host, port),
        force_fallback(a.no_io_uring),
    )?;
    let sources = Sources {
        broker: None,
        namesrv_acl: ns.acl.clone(),
        namesrv: Some(ns.counts.clone()),
    };
    let metrics = match start_metrics(&metrics_cfg, sources) {
        Ok(m) => m,
        Err(e) => {
            ns.stop();
            return Err(e);
        }
    };
    println!("ringmq namesrv ready: {}", ns.addr);
    let sig = signals.wait();
    log::info!("{sig}: stopping");
    signals.exit_on_next();
    stop_metrics(metrics);
    ns.stop();
    Ok(())
}

fn broker_cmd(a: BrokerArgs, signals: &ringmq_node::io::signal::Signals) -> Result<(), String> {
    let loaded = BrokerConfig::load(&a.config).map_err(|e| e.to_string())?;
    report(&loaded.ignored, &loaded.warnings);
    let mut cfg = loaded.config;
    if let Some(ns) = &a.namesrv {
        cfg.set("namesrvAddr", ns, "--namesrv")
            .map_err(|e| e.to_string())?;
    }
    if a.shards.is_some() {
        cfg.shards = a.shards;
    }
    apply_sets(&mut cfg, &a.common.set)?;
    cfg.acl.file_path = Some(cfg.acl.file_path(a.config.parent()));
    let fallback = force_fallback(a.common.no_io_uring);
    let publish: IpAddr = match &cfg.broker_ip1 {
        Some(ip) => ip
            .parse()
            .map_err(|_| format!("brokerIP1 {ip} is not an IP address"))?,
        None => a.host.unwrap_or(IpAddr::from([127, 0, 0, 1])),
    };
    let listen_host = a.host.unwrap_or(if cfg.broker_ip1.is_some() {
        publish
    } else {
        IpAddr::from([0, 0, 0, 0])
    });
    let metrics_cfg = cfg.metrics.clone();
    // gRPC edge (ringmq-grpc) only when grpcServerPort is set.
    let mut grpc_cfg = GrpcStart {
        port: cfg.grpc_server_port,
        default_port: None,
        host: publish,
        name_servers: cfg.namesrv_addr.clone(),
        credentials: inner_credentials(&cfg),
        tls: native_tls(&cfg),
        acl: None,
        replay_window_ms: cfg.acl.replay_window_ms,
        listener_tls: cfg.tls.clone(),
        in_process: None,
    };
    log_start("broker", &cfg, fallback);
    let opts = StartOptions {
        listen: SocketAddr::new(listen_host, cfg.listen_port),
        publish_host: publish,
        force_fallback: fallback,
        transfer_msg_by_heap: a.common.transfer_msg_by_heap,
    };
    let broker = run::start(cfg, opts)?;
    let sources = Sources {
        broker: Some(broker.broker.clone()),
        namesrv_acl: None,
        namesrv: None,
    };
    let metrics = match start_metrics(&metrics_cfg, sources) {
        Ok(m) => m,
        Err(e) => {
            broker.stop();
            return Err(e);
        }
    };
    // The broker's own ACL (plain_acl.yml or ACL 2.0): gRPC callers meet the same one.
    grpc_cfg.acl = broker.broker.acl.clone();
    grpc_cfg.in_process = Some(ringmq_grpc::InProcess::new(
        ringmq_node::net::in_process::dialer(broker.broker.clone()),
    ));
    let grpc = match start_grpc(grpc_cfg) {
        Ok(g) => g,
        Err(e) => {
            stop_metrics(metrics);
            broker.stop();
            return Err(e);
        }
    };
    println!(
        "ringmq broker ready: {} ({} shards)",
        broker.addr, broker.broker.shard_count
    );
    let sig = signals.wait();
    log::info!("{sig}: stopping (finishing in-flight requests, flushing, unregistering; a second signal exits at once)");
    signals.exit_on_next();
    stop_grpc(grpc);
    stop_metrics(metrics);
    broker.stop();
    log::info!("stopped cleanly");
    Ok(())
}

/// Starts the Prometheus endpoint when `metricsExporterType=PROM`; prints where it listens
/// (`ringmq metrics: http://ADDR/metrics`) before the ready line.
fn start_metrics(
    cfg: &MetricsConfig,
    sources: Sources,
) -> Result<Option<metrics::http::MetricsServer>, String> {
    let Some(listen) = cfg.prom_listen() else {
        return Ok(None);
    };
    let server = metrics::http::start(listen, sources)?;
    log::info!("metrics endpoint: http://{}/metrics", server.addr);
    println!("ringmq metrics: http://{}/metrics", server.addr);
    Ok(Some(server))
}

fn stop_metrics(server: Option<metrics::http::MetricsServer>) {
    if let Some(s) = server {
        s.stop();
    }
}

// ---- RocketMQ 5's gRPC edge (ringmq-grpc, docs/grpc.md) ----

/// `ringmq standalone`'s gRPC port when neither `--grpc-port` nor `grpcServerPort` names one
/// (RocketMQ's proxy default).
const GRPC_DEFAULT_PORT: u16 = 8081;

/// Where and how to start the gRPC edge.
struct GrpcStart {
    /// A port asked for (must bind; 0 = any free port).
    port: Option<u16>,
    /// The port used when none was asked for (a taken one is logged, not fatal).
    default_port: Option<u16>,
    host: IpAddr,
    name_servers: Vec<String>,
    credentials: Option<ringmq_grpc::Credentials>,
    tls: ringmq_grpc::TlsOptions,
    /// The broker's ACL, which gRPC callers are judged by (ACL on).
    acl: Option<ringmq_node::acl::Acl>,
    /// `aclReplayWindowMs`: how far a signature's date may be from this node's clock.
    replay_window_ms: u64,
    /// The node's listener TLS keys (`tls.server.*`): the gRPC port serves them too.
    listener_tls: TlsConfig,
    /// This process's broker, which the edge reaches without a socket.
    in_process: Option<ringmq_grpc::InProcess>,
}

/// The gRPC port's TLS: the node's listener certificates, permissive or enforcing as
/// `tls.server.mode` says; `None` when it is disabled.
fn grpc_listener_tls(tls: &TlsConfig) -> Result<Option<ringmq_grpc::GrpcTls>, String> {
    let node = ringmq_node::net::tls_load::node_tls(tls, false, "gRPC")?;
    Ok(node.server.map(|s| ringmq_grpc::GrpcTls {
        config: s.rustls_config(),
        enforcing: s.enforcing,
    }))
}

/// The broker's own account when ACL (1.0 or 2.0) is on: the gRPC edge's native clients
/// sign with it.
fn inner_credentials(cfg: &BrokerConfig) -> Option<ringmq_grpc::Credentials> {
    if !cfg.acl.enable && !cfg.acl.v2() {
        return None;
    }
    // ACL 1.0's innerAccessKey/innerSecretKey, else ACL 2.0's
    // innerClientAuthenticationCredentials (the config check refused a half-set pair).
    let c = cfg.acl.inner_credentials().ok().flatten()?;
    Some(ringmq_grpc::Credentials::new(
        c.access_key(),
        c.secret().expose(),
    ))
}

/// The broker's client TLS settings (`tls.enable`, `tls.client.*`), for the gRPC edge's
/// native clients.
fn native_tls(cfg: &BrokerConfig) -> ringmq_grpc::TlsOptions {
    ringmq_grpc::TlsOptions {
        enabled: cfg.tls.client_enable,
        ca_path: cfg.tls.client_trust_cert_path.clone(),
        cert_path: cfg.tls.client_cert_path.clone(),
        key_path: cfg.tls.client_key_path.clone(),
        server_name: None,
    }
}

/// Starts the gRPC edge when a port is set; prints where it listens (`ringmq grpc: ADDR`)
/// before the ready line.
fn start_grpc(g: GrpcStart) -> Result<Option<ringmq_grpc::GrpcServer>, String> {
    let (port, must_bind) = match (g.port, g.default_port) {
        (Some(p), _) => (p, true),
        (None, Some(p)) => (p, false),
        (None, None) => return Ok(None),
    };
    let authority = g.acl.map(|acl| {
        let a: std::sync::Arc<dyn ringmq_grpc::auth::Authority> =
            ringmq_node::net::grpc_acl::GrpcAcl::new(acl, g.replay_window_ms);
        a
    });
    let opts = ringmq_grpc::GrpcOptions {
        listen: SocketAddr::new(g.host, port),
        advertise_host: g.host,
        name_servers: g.name_servers,
        credentials: g.credentials,
        tls: g.tls,
        authority,
        listener_tls: grpc_listener_tls(&g.listener_tls)?,
        in_process: g.in_process,
    };
    match ringmq_grpc::start(opts) {
        Ok(server) => {
            log::info!("RocketMQ 5 gRPC endpoint: {}", server.addr);
            println!("ringmq grpc: {}", server.addr);
            Ok(Some(server))
        }
        Err(e @ ringmq_grpc::GrpcError::Bind { .. }) if !must_bind => {
            log::warn!(
                "{e}: starting without the gRPC listener (set --grpc-port or grpcServerPort)"
            );
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn stop_grpc(server: Option<ringmq_grpc::GrpcServer>) {
    if let Some(s) = server {
        s.stop();
    }
}

fn log_start(mode: &str, cfg: &BrokerConfig, fallback: bool) {
    if let Some(n) = cfg
        .commit_log_prewrite_bytes
        .filter(|&n| n > 0 && cfg.prewrite_bytes() == 0)
    {
        log::warn!(
            "commitLogPrewriteBytes={n} is not used: it applies under ASYNC_FLUSH with fallocated segments (flush {}, warmMapedFileEnable={})",
            cfg.flush_disk_type.as_str(),
            cfg.warm_segments()
        );
    }
    log::info!(
        "ringmq {} {mode}: broker {} ({}/{} id {}), role {}, shards {}, data {}, flush {} ({} segments), I/O {}",
        ringmq_node::VERSION,
        cfg.broker_name,
        cfg.broker_cluster_name,
        cfg.broker_name,
        cfg.broker_id,
        cfg.broker_role.name(),
        cfg.shards
            .map_or("one per core".to_string(), |s| s.to_string()),
        cfg.store_path_root_dir.display(),
        cfg.flush_disk_type.as_str(),
        if cfg.warm_segments() {
            "pre-written".to_string()
        } else if cfg.prewrite_bytes() > 0 {
            format!("fallocated, zeros {} bytes ahead", cfg.prewrite_bytes())
        } else {
            "fallocated".to_string()
        },
        if fallback {
            "epoll + pwrite (io_uring off by request)"
        } else {
            "io_uring where the kernel allows (per-shard lines below)"
        },
    );
    let keep = cfg.cache_keep_bytes();
    let why = match cfg.commit_log_cache_keep_bytes {
        Some(_) => "as set",
        None if keep > 0 => {
            "not set; this machine hands freed memory back to its host (free page reporting), so a growing page cache would cost each append fresh pages"
        }
        None => "not set; freed memory stays with this machine, so the page cache is left to the kernel",
    };
    if keep == 0 {
        log::info!("commitLogCacheKeepBytes=0 ({why}): the log's pages stay in the page cache until the kernel reclaims them");
    } else {
        log::info!("commitLogCacheKeepBytes={keep} ({why}): each shard releases its durable log bytes from memory past {keep} bytes behind the durable end");
    }
}
