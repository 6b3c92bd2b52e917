//! The listener: binds the port on the caller's thread (so a taken port fails the start
//! at once and port 0 reports the port it got), then serves on a thread of its own
//! (`ringmq-grpc`) with its own single-threaded tokio runtime, away from the broker's
//! io_uring shards. [`GrpcServer::stop`] ends the listener, lets requests in flight finish
//! for at most [`SHUTDOWN_GRACE`], cuts what is still open (Telemetry streams, long polls)
//! and joins the thread.
//!
//! Limits per connection: [`STREAMS_PER_CONNECTION_MAX`] concurrent HTTP/2 streams (long
//! polls and Telemetry streams count), requests of at most [`REQUEST_BYTES_MAX`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ringmq_client::consumer::EdgeConsumer;
use ringmq_client::{Admin, ClientConfig, Credentials, InProcess, Producer, TlsOptions};
use tokio::sync::oneshot;

use crate::auth::Authority;
use crate::clients::Clients;
use crate::entries::EntryCap;
use crate::gate::Gate;
use crate::groups::Groups;
use crate::pb::{self, messaging_service_server::MessagingServiceServer, AddressScheme};
use crate::renew::{self, Renewals};
use crate::service::Edge;
use crate::tls::{self, GrpcTls};
use crate::transaction::Transactions;

/// Concurrent HTTP/2 streams per connection.
pub const STREAMS_PER_CONNECTION_MAX: u32 = 1024;
/// Largest request message (a SendMessage of a few 4 MiB bodies).
pub const REQUEST_BYTES_MAX: usize = 16 * 1024 * 1024;
/// How long a stop waits for requests in flight (and the transaction producers'
/// unregistering) before it cuts what is still open.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long a start waits for the edge's native clients.
const START_WAIT: Duration = Duration::from_secs(10);
/// The native producer's group (the edge's sends carry no transaction, so no check-back
/// ever looks for it).
const PRODUCER_GROUP: &str = "RINGMQ_GRPC_EDGE";

/// What the gRPC edge listens on and whom it talks to.
#[derive(Clone)]
pub struct GrpcOptions {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Host routes name as this edge's address (clients connect to it).
    pub advertise_host: IpAddr,
    /// Name servers of the brokers the edge serves (`host:port`).
    pub name_servers: Vec<String>,
    /// Credentials the edge's native clients sign with (a broker with ACL on).
    pub credentials: Option<Credentials>,
    /// TLS of the edge's native clients (brokers and name servers that require it).
    pub tls: TlsOptions,
    /// Who judges gRPC callers (the node's ACL); `None`: every request is served.
    pub authority: Option<Arc<dyn Authority>>,
    /// TLS on the gRPC port; `None`: plaintext only.
    pub listener_tls: Option<GrpcTls>,
    /// The broker of this process, reached without a socket (its shards serve the edge's
    /// native connections in process); `None`: every broker over TCP.
    pub in_process: Option<InProcess>,
}

impl std::fmt::Debug for GrpcOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcOptions")
            .field("listen", &self.listen)
            .field("advertise_host", &self.advertise_host)
            .field("name_servers", &self.name_servers)
            .field("authority", &self.authority.is_some())
            .field("listener_tls", &self.listener_tls)
            .field("in_process", &self.in_process.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the edge did not start.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("gRPC listener on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("gRPC edge runtime: {0}")]
    Runtime(std::io::Error),
    #[error("gRPC edge native clients: {0}")]
    Client(#[from] ringmq_client::Error),
    #[error("gRPC edge did not start within {0:?}")]
    StartTimeout(Duration),
}

/// A running gRPC edge.
#[derive(Debug)]
pub struct GrpcServer {
    /// The address it listens on (the bound port when asked for port 0).
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl GrpcServer {
    /// Stops listening, cuts open streams, and joins the edge's thread.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("the gRPC edge thread panicked");
            }
        }
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Binds `opts.listen` and starts serving (see the module docs).
pub fn start(opts: GrpcOptions) -> Result<GrpcServer, GrpcError> {
    let bind_err = |source| GrpcError::Bind {
        addr: opts.listen,
        source,
    };
    let std_listener = std::net::TcpListener::bind(opts.listen).map_err(bind_err)?;
    std_listener.set_nonblocking(true).map_err(bind_err)?;
    let addr = std_listener.local_addr().map_err(bind_err)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("ringmq-grpc")
        .build()
        .map_err(GrpcError::Runtime)?;
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let endpoints = pb::Endpoints {
        scheme: if opts.advertise_host.is_ipv6() {
            AddressScheme::IPv6
        } else {
            AddressScheme::IPv4
        } as i32,
        addresses: vec![pb::Address {
            host: opts.advertise_host.to_string(),
            port: i32::from(addr.port()),
        }],
    };
    let thread = std::thread::Builder::new()
        .name("ringmq-grpc".into())
        .spawn(move || {
            runtime.block_on(async move {
                let edge = match edge(&opts, endpoints).await {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(GrpcError::Runtime(e)));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let gate = Gate {
                    edge,
                    authority: opts.authority.clone(),
                };
                let incoming = tls::incoming(listener, opts.listener_tls.clone());
                serve(gate, incoming, shutdown_rx).await;
            });
        })
        .map_err(GrpcError::Runtime)?;
    match ready_rx.recv_timeout(START_WAIT) {
        Ok(Ok(())) => Ok(GrpcServer {
            addr,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = shutdown_tx.send(());
            Err(GrpcError::StartTimeout(START_WAIT))
        }
    }
}

/// The edge's native clients.
async fn edge(opts: &GrpcOptions, endpoints: pb::Endpoints) -> Result<Edge, GrpcError> {
    let cfg = ClientConfig {
        name_servers: opts.name_servers.clone(),
        instance_name: Some(format!("grpc-edge-{}", std::process::id())),
        credentials: opts.credentials.clone(),
        tls: opts.tls.clone(),
        in_process: opts.in_process.clone(),
        ..ClientConfig::default()
    };
    let mut producer = Producer::builder()
        .group(PRODUCER_GROUP)
        .name_servers(&opts.name_servers.join(";"))
        .tls(opts.tls.clone());
    if let Some(c) = &opts.credentials {
        producer = producer.credentials(c.clone());
    }
    if let Some(p) = &opts.in_process {
        producer = producer.in_process(p.clone());
    }
    let admin = Admin::with_config(cfg.clone()).await?;
    let groups = Arc::new(Groups::new(admin.clone()));
    let clients = Arc::new(Clients::with_groups(Arc::clone(&groups)));
    let consumer = EdgeConsumer::start(cfg.clone()).await?;
    let renewals = Arc::new(Renewals::default());
    tokio::spawn(renew::run(
        Arc::clone(&renewals),
        Arc::clone(&clients),
        consumer.clone(),
    ));
    Ok(Edge {
        producer: producer.start().await?,
        consumer,
        renewals,
        admin,
        groups,
        transactions: Arc::new(Transactions::new(cfg, Arc::clone(&clients))),
        clients,
        endpoints,
    })
}

async fn serve(
    gate: Gate,
    incoming: tokio_stream::wrappers::ReceiverStream<std::io::Result<tls::Conn>>,
    shutdown: oneshot::Receiver<()>,
) {
    let transactions = Arc::clone(&gate.edge.transactions);
    let service = EntryCap {
        inner: MessagingServiceServer::new(gate).max_decoding_message_size(REQUEST_BYTES_MAX),
        request_bytes_max: REQUEST_BYTES_MAX,
    };
    let graceful = Arc::new(tokio::sync::Notify::new());
    let begin = Arc::clone(&graceful);
    let server = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(STREAMS_PER_CONNECTION_MAX))
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, async move {
            begin.notified().await;
        });
    tokio::pin!(server);
    let result = tokio::select! {
        r = &mut server => Some(r),
        _ = shutdown => {
            // Stop accepting; requests in flight may finish within the grace time. Telemetry
            // streams and long polls stay open as long as their clients keep them, so what is
            // still open then is cut (the runtime is dropped with it).
            graceful.notify_one();
            tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await.ok()
        }
    };
    match result {
        Some(Err(e)) => log::error!("gRPC edge: {e}"),
        Some(Ok(())) => {}
        None => log::info!("gRPC edge: streams still open after {SHUTDOWN_GRACE:?} are cut"),
    }
    if tokio::time::timeout(SHUTDOWN_GRACE, transactions.shutdown())
        .await
        .is_err()
    {
        log::info!(
            "gRPC edge: its transaction producers did not unregister within {SHUTDOWN_GRACE:?}"
        );
    }
}
