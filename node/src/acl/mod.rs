//! Access control: who a request comes from (authentication, per protocol) and whether that
//! caller may do what the request asks (authorization, one table for both protocols).
//!
//! - The accounts are RocketMQ's `plain_acl.yml` ([`file`]), read at start and again when the
//!   file changes on disk; a file that does not parse keeps the last good one and says why.
//! - Native requests carry a MAC trailer (`ringmq_wire::auth`); each connection keeps its
//!   nonce and last sequence number ([`ConnGuard`]), and a nonce seen on any connection
//!   within the replay window is refused on another. Remoting requests are signed as
//!   RocketMQ's `AclClientRPCHook` does.
//! - [`table::need`] maps every request to what it needs; [`Acl::authorize`] checks it
//!   against the caller's account. A permission the account does not hold is refused, a
//!   DENY wins over any grant, and a request the table marks admin needs `admin: true`.
//! - Refusals are counted by [`Reason`] for operators ([`Acl::refusal_counts`]).
//!
//! - ACL 2.0 ([`v2`], RocketMQ 5's users and policies) replaces the file when
//!   `authenticationEnabled` or `authorizationEnabled` is on ([`Acl::with_v2`]): the same
//!   signatures (native, remoting, and gRPC through [`Acl::authenticate_with`]) are checked
//!   against users' passwords, and [`Acl::authorize`] / [`Acl::authorize_need`] ask the
//!   policies; callers are then [`Caller::User`].
//!
//! Secrets stay in [`ringmq_wire::auth::Secret`], whose `Debug` is redacted; no message
//! here prints one.

pub mod addr;
pub mod file;
pub mod table;
pub mod v2;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use ringmq_wire::auth::{self, Signed, NONCE_BYTES};
use ringmq_wire::command::Request;

use file::AclFile;
use table::{Need, Res};

/// Default replay window: a signed native request older or newer than this is refused.
pub const REPLAY_WINDOW_MS_DEFAULT: u64 = 300_000;
/// Most connection nonces remembered at once; past it new signed connections are refused
/// (SYSTEM_BUSY) until older nonces leave the window.
pub const NONCES_MAX: usize = 1 << 20;
/// A connection refused this many times in a row is closed.
pub const CONSECUTIVE_REFUSALS_MAX: u32 = 16;
/// How often the file is checked for changes.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Why a request was refused (one counter each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    MissingCredentials,
    UnknownAccessKey,
    AddressNotAllowed,
    BadSignature,
    MalformedTrailer,
    StaleTimestamp,
    Replayed,
    NoPermission,
    NotAdmin,
    TlsRequired,
}

impl Reason {
    pub const ALL: [Reason; 10] = [
        Reason::MissingCredentials,
        Reason::UnknownAccessKey,
        Reason::AddressNotAllowed,
        Reason::BadSignature,
        Reason::MalformedTrailer,
        Reason::StaleTimestamp,
        Reason::Replayed,
        Reason::NoPermission,
        Reason::NotAdmin,
        Reason::TlsRequired,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::MissingCredentials => "missing_credentials",
            Reason::UnknownAccessKey => "unknown_access_key",
            Reason::AddressNotAllowed => "address_not_allowed",
            Reason::BadSignature => "bad_signature",
            Reason::MalformedTrailer => "malformed_trailer",
            Reason::StaleTimestamp => "stale_timestamp",
            Reason::Replayed => "replayed",
            Reason::NoPermission => "no_permission",
            Reason::NotAdmin => "not_admin",
            Reason::TlsRequired => "tls_required",
        }
    }

    fn index(self) -> usize {
        Reason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// A refused request: the reason (counted) and the remark the client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub remark: String,
}

impl Refusal {
    fn new(reason: Reason, remark: impl Into<String>) -> Self {
        Refusal {
            reason,
            remark: remark.into(),
        }
    }
}

/// Who a request comes from, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// ACL is off: everything is allowed.
    Open,
    /// No credentials, from an address on `globalWhiteRemoteAddresses`.
    Anonymous,
    /// A signed request of this account.
    Account(Arc<str>),
    /// ACL 2.0: a signed request of this user, from this address.
    User { name: Arc<str>, ip: IpAddr },
}

/// Settings of the ACL (from the node's config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclSettings {
    pub file: PathBuf,
    pub replay_window_ms: u64,
}

/// The shared ACL of a node: cheap to clone, read by every shard and connection.
#[derive(Clone)]
pub struct Acl {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Acl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acl")
            .field("file", &self.inner.settings.file)
            .finish_non_exhaustive()
    }
}

struct Inner {
    settings: AclSettings,
    current: ArcSwap<AclFile>,
    /// Modification time and length of the file last read (good or bad).
    seen: Mutex<Option<(SystemTime, u64)>>,
    nonces: Mutex<HashMap<[u8; NONCE_BYTES], u64>>,
    refusals: [AtomicU64; Reason::ALL.len()],
    reloads: AtomicU64,
    reload_errors: AtomicU64,
    /// ACL 2.0, when on: it decides instead of the file.
    v2: Option<Arc<v2::Auth>>,
}

impl Acl {
    /// Reads the file; a missing or broken file at start is an error (the node does not start
    /// with an ACL it cannot read).
    pub fn load(settings: AclSettings) -> Result<Acl, String> {
        let (file, stamp) = read(&settings.file)?;
        log::info!(
            "ACL on: {} account(s), {} global white address pattern(s) from {}",
            file.accounts.len(),
            file.global_white.len(),
            settings.file.display()
        );
        Ok(Acl {
            inner: Arc::new(Inner {
                settings,
                current: ArcSwap::from_pointee(file),
                seen: Mutex::new(stamp),
                nonces: Mutex::new(HashMap::new()),
                refusals: std::array::from_fn(|_| AtomicU64::new(0)),
                reloads: AtomicU64::new(0),
                reload_errors: AtomicU64::new(0),
                v2: None,
            }),
        })
    }

    /// ACL 2.0: users and policies from `auth` decide; no `plain_acl.yml` is read.
    pub fn with_v2(replay_window_ms: u64, auth: v2::Auth) -> Acl {
        Acl {
            inner: Arc::new(Inner {
                settings: AclSettings {
                    file: auth.settings().dir.join(v2::FILE_NAME),
                    replay_window_ms,
                },
                current: ArcSwap::from_pointee(AclFile::default()),
                seen: Mutex::new(None),
                nonces: Mutex::new(HashMap::new()),
                refusals: std::array::from_fn(|_| AtomicU64::new(0)),
                reloads: AtomicU64::new(0),
                reload_errors: AtomicU64::new(0),
                v2: Some(Arc::new(auth)),
            }),
        }
    }

    /// ACL 2.0's users and policies, when it is on.
    pub fn v2(&self) -> Option<&Arc<v2::Auth>> {
        self.inner.v2.as_ref()
    }

    /// The ACL of `settings.file` for this process: the one already open (the name server and
    /// broker of `ringmq standalone` share it, so a change through either is in force for both
    /// at once), or the file read now and watched for changes.
    pub fn open(settings: AclSettings) -> Result<Acl, String> {
        static OPEN: Mutex<Vec<std::sync::Weak<Inner>>> = Mutex::new(Vec::new());
        let mut open = lock(&OPEN);
        open.retain(|w| w.strong_count() > 0);
        let existing = open
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .find(|inner| inner.settings == settings);
        if let Some(inner) = existing {
            return Ok(Acl { inner });
        }
        let acl = Acl::load(settings)?;
        acl.spawn_watcher();
        open.push(Arc::downgrade(&acl.inner));
        Ok(acl)
    }

    pub fn path(&self) -> &Path {
        &self.inner.settings.file
    }

    /// The accounts in force now.
    pub fn current(&self) -> Arc<AclFile> {
        self.inner.current.load_full()
    }

    /// Reads the file again if its modification time or length changed. A file that does not
    /// parse keeps the accounts in force and logs why. Returns whether new accounts are in
    /// force.
    pub fn reload_if_changed(&self) -> bool {
        let stamp = file_stamp(&self.inner.settings.file);
        {
            let mut seen = lock(&self.inner.seen);
            if *seen == stamp {
                return false;
            }
            *seen = stamp;
        }
        match read(&self.inner.settings.file) {
            Ok((file, _)) => {
                log::info!(
                    "ACL reloaded from {}: {} account(s), {} global white address pattern(s)",
                    self.inner.settings.file.display(),
                    file.accounts.len(),
                    file.global_white.len()
                );
                self.inner.current.store(Arc::new(file));
                self.inner.reloads.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                log::error!("ACL file changed but is not used, the last good one stays: {e}");
                self.inner.reload_errors.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Checks the file for changes every [`RELOAD_CHECK_INTERVAL`] on a thread of its own,
    /// until every handle of this ACL is dropped.
    pub fn spawn_watcher(&self) {
        let weak = Arc::downgrade(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("acl-watch".to_owned())
            .spawn(move || loop {
                std::thread::sleep(RELOAD_CHECK_INTERVAL);
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                Acl { inner }.reload_if_changed();
            });
        if let Err(e) = spawned {
            log::error!("ACL: cannot start the file watcher ({e}); changes need a restart");
        }
    }

    /// Replaces the file with `file` (written to a temporary file, synced, renamed) and puts
    /// it in force.
    pub fn write(&self, file: AclFile) -> Result<(), String> {
        let path = &self.inner.settings.file;
        let tmp = path.with_extension("yml.tmp");
        let text = file.to_yaml();
        let io = |e: std::io::Error| format!("writing {}: {e}", path.display());
        {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        *lock(&self.inner.seen) = file_stamp(path);
        self.inner.current.store(Arc::new(file));
        self.inner.reloads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Counts a refusal.
    pub fn count(&self, reason: Reason) {
        self.inner.refusals[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Refusals so far, by reason.
    pub fn refusal_counts(&self) -> Vec<(&'static str, u64)> {
        Reason::ALL
            .iter()
            .map(|r| {
                (
                    r.name(),
                    self.inner.refusals[r.index()].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// (reloads that took effect, changed files that did not parse).
    pub fn reload_counts(&self) -> (u64, u64) {
        (
            self.inner.reloads.load(Ordering::Relaxed),
            self.inner.reload_errors.load(Ordering::Relaxed),
        )
    }

    /// A guard for a new connection from `peer`, not over TLS ([`ConnGuard::over_tls`]).
    pub fn guard(&self, peer: IpAddr) -> ConnGuard {
        ConnGuard {
            acl: self.clone(),
            peer,
            nonce: None,
            last_seq: 0,
            refused_in_a_row: 0,
            tls: false,
            session: None,
            ended: false,
            conn_key: None,
        }
    }

    /// May `caller` do what `request` asks? The refusal is counted.
    pub fn authorize(
        &self,
        caller: &Caller,
        request: &Request,
        body: &[u8],
    ) -> Result<(), Refusal> {
        let r = self.check(caller, request, body);
        if let Err(refusal) = &r {
            self.count(refusal.reason);
        }
        r
    }

    fn check(&self, caller: &Caller, request: &Request, body: &[u8]) -> Result<(), Refusal> {
        let need = table::need(request, body);
        if let Some(auth) = &self.inner.v2 {
            return v2::check::check(
                auth,
                caller,
                Some(request.code()),
                request.code().name(),
                need,
            );
        }
        self.check_need(caller, request.code().name(), need)
    }

    /// May `caller` do `what` (a request another protocol's edge describes), which needs
    /// `need`? The refusal is counted. The same rules as [`Self::authorize`].
    pub fn authorize_need(&self, caller: &Caller, what: &str, need: Need) -> Result<(), Refusal> {
        let r = match &self.inner.v2 {
            Some(auth) => v2::check::check(auth, caller, None, what, need),
            None => self.check_need(caller, what, need),
        };
        if let Err(refusal) = &r {
            self.count(refusal.reason);
        }
        r
    }

    /// Authenticates a caller from `peer` whose protocol signs with the account's secret key
    /// in a way of its own (RocketMQ 5's gRPC): `verify` is asked whether the signature
    /// matches the secret of `access_key`'s account. No access key: the global white list.
    /// Address rules and refusal counting as for the native and remoting protocols.
    pub fn authenticate_with(
        &self,
        peer: IpAddr,
        access_key: Option<&str>,
        verify: impl FnOnce(&auth::Secret) -> bool,
    ) -> Result<Caller, Refusal> {
        let mut guard = self.guard(peer);
        let r = match access_key {
            None => guard.anonymous(),
            Some(key) if self.inner.v2.is_some() => {
                let user = self.inner.v2.as_ref().map(|auth| guard.user(auth, key));
                match user {
                    Some(Ok(u)) if verify(&u.password) => Ok(guard.caller_v2(&u.name)),
                    Some(Ok(_)) => Err(bad_signature(key)),
                    Some(Err(refusal)) => Err(refusal),
                    None => unreachable!("guarded by is_some"),
                }
            }
            Some(key) => {
                let file = self.inner.current.load();
                guard.account(&file, key).and_then(|account| {
                    if verify(&account.secret) {
                        Ok(Caller::Account(Arc::from(key)))
                    } else {
                        Err(bad_signature(key))
                    }
                })
            }
        };
        guard.settle(r)
    }

    fn check_need(&self, caller: &Caller, code: &str, need: Need) -> Result<(), Refusal> {
        let key = match caller {
            Caller::Open => return Ok(()),
            Caller::Anonymous => {
                return match need {
                    Need::Authenticated | Need::Access(_) => Ok(()),
                    Need::Admin => Err(Refusal::new(
                        Reason::NotAdmin,
                        format!(
                            "no permission: {code} needs an admin account's signature; \
                             the global white list admits only non-admin requests"
                        ),
                    )),
                    Need::Never => Err(never(code)),
                };
            }
            Caller::Account(k) => k,
            Caller::User { name, .. } => {
                return Err(Refusal::new(
                    Reason::UnknownAccessKey,
                    format!("no permission: ACL 2.0 is off here; user {name} is not in the ACL"),
                ))
            }
        };
        let file = self.inner.current.load();
        let Some(account) = file.accounts.get(&**key) else {
            // Deleted since the request was authenticated.
            return Err(Refusal::new(
                Reason::UnknownAccessKey,
                format!("no permission: access key {key} is not in the ACL"),
            ));
        };
        match need {
            Need::Authenticated => Ok(()),
            Need::Never => Err(never(code)),
            Need::Admin if account.admin => Ok(()),
            Need::Admin => Err(Refusal::new(
                Reason::NotAdmin,
                format!(
                    "no permission: {code} needs an admin account; access key {key} is not admin"
                ),
            )),
            Need::Access(list) => {
                for (res, want) in &list {
                    let held = match res {
                        Res::Topic(t) => account.topic_perm(t),
                        Res::Group(g) => account.group_perm(g),
                    };
                    if !held.grants(*want) {
                        return Err(Refusal::new(
                            Reason::NoPermission,
                            format!(
                                "no permission: {code} needs {} on {} {}; access key {key} holds {}",
                                want.name(),
                                res.kind(),
                                res.name(),
                                held.name()
                            ),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// What `caller` may do, for `whoami`: (access key, admin, default topic and group
    /// permissions, explicit topic and group permissions).
    pub fn describe(&self, caller: &Caller) -> Option<file::Account> {
        match caller {
            Caller::Account(k) => self.inner.current.load().accounts.get(&**k).cloned(),
            _ => None,
        }
    }

    fn remember_nonce(&self, nonce: [u8; NONCE_BYTES], now_ms: u64) -> Result<(), Refusal> {
        let window = self.inner.settings.replay_window_ms;
        let mut set = lock(&self.inner.nonces);
        if set.len() >= NONCES_MAX / 2 {
            set.retain(|_, expires| *expires > now_ms);
        }
        if set.contains_key(&nonce) {
            return Err(Refusal::new(
                Reason::Replayed,
                "no permission: replayed request (this connection nonce was already used)",
            ));
        }
        if set.len() >= NONCES_MAX {
            return Err(Refusal::new(
                Reason::Replayed,
                "no permission: too many signed connections within the replay window; retry later",
            ));
        }
        // Remembered for twice the window: a stamp may be `window` in the future.
        set.insert(nonce, now_ms.saturating_add(2 * window));
        Ok(())
    }
}

/// A signer for one new connection of this node's own (a fresh random nonce).
pub fn signer(credentials: &ringmq_wire::auth::Credentials) -> ringmq_wire::auth::Signer {
    ringmq_wire::auth::Signer::new(credentials.clone(), new_nonce())
}

/// 16 random bytes from the OS.
pub fn new_nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    if getrandom::fill(&mut n).is_err() {
        // No OS randomness: a nonce from the clock and a counter is unique, if guessable;
        // the MAC still needs the secret.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        n[..8].copy_from_slice(&t.to_be_bytes());
        n[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    }
    n
}

fn never(code: &str) -> Refusal {
    Refusal::new(
        Reason::NoPermission,
        format!("no permission: {code} is sent by brokers and never accepted from a client"),
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let md = std::fs::metadata(path).ok()?;
    Some((md.modified().ok()?, md.len()))
}

fn read(path: &Path) -> Result<(AclFile, Option<(SystemTime, u64)>), String> {
    let stamp = file_stamp(path);
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("ACL file {}: {e}", path.display()))?;
    let file = AclFile::parse(&text).map_err(|e| format!("ACL file {}: {e}", path.display()))?;
    Ok((file, stamp))
}

/// The authentication state of one connection.
///
/// **Sessions on TLS.** On a TLS connection the first signed native request that verifies
/// binds the connection to its account: TLS already keeps the bytes from being changed,
/// replayed or injected on the way, so the requests after it may come unsigned and are that
/// account's (a signed one is still checked as such). The binding ends, and the connection
/// is closed, when the account is removed, disabled, its secret changes or its address rules
/// stop admitting the peer. Plain TCP connections never bind: every request there carries
/// its MAC. Remoting requests are always signed (RocketMQ's clients sign each one).
pub struct ConnGuard {
    acl: Acl,
    peer: IpAddr,
    nonce: Option<[u8; NONCE_BYTES]>,
    last_seq: u64,
    refused_in_a_row: u32,
    tls: bool,
    session: Option<Session>,
    /// The session's account changed: close the connection.
    ended: bool,
    /// The MAC key of this connection's signer, derived at its first signed request and kept
    /// while the account's key, the access key and the nonce stay the same.
    conn_key: Option<auth::ConnKey>,
}

/// The account a TLS connection is bound to, and the secret it proved it held.
#[derive(Debug, Clone)]
pub struct Session {
    caller: Caller,
    access_key: Arc<str>,
    secret: auth::Secret,
}

/// What a connection's guard carries to another shard when the connection moves.
#[derive(Debug, Clone)]
pub struct GuardState {
    nonce: Option<[u8; NONCE_BYTES]>,
    last_seq: u64,
    session: Option<Session>,
}

impl ConnGuard {
    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// The state to resume on another shard, rewound to before the request with `seq`
    /// (the HELLO that is answered again there).
    pub fn handoff_state(&self, hello_seq: Option<u64>) -> GuardState {
        GuardState {
            nonce: self.nonce,
            last_seq: hello_seq.map_or(self.last_seq, |s| s.saturating_sub(1)),
            session: self.session.clone(),
        }
    }

    /// Resumes a guard moved from another shard.
    pub fn resume(&mut self, state: GuardState) {
        self.nonce = state.nonce;
        self.last_seq = state.last_seq;
        self.session = state.session;
    }

    /// The connection runs over TLS: it may be bound to an account (see [`ConnGuard`]).
    pub fn over_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// The account this connection is bound to, if it is.
    pub fn session(&self) -> Option<&Caller> {
        self.session.as_ref().map(|s| &s.caller)
    }

    /// The `seq` of a signed frame, without checking it (for [`Self::handoff_state`]).
    pub fn peek_seq(frame: &[u8]) -> Option<u64> {
        let mut f = frame.to_vec();
        auth::strip(&mut f).ok().flatten().map(|s| s.stamp.seq)
    }

    /// Authenticates a native request frame: strips its trailer (the frame is then what the
    /// handler reads) and checks the MAC, the clock window, the nonce and the sequence.
    pub fn native(&mut self, frame: &mut Vec<u8>, now_ms: u64) -> Result<Caller, Refusal> {
        let r = self.native_inner(frame, now_ms);
        self.settle(r)
    }

    fn native_inner(&mut self, frame: &mut Vec<u8>, now_ms: u64) -> Result<Caller, Refusal> {
        let signed = match auth::strip(frame) {
            Ok(s) => s,
            Err(e) => {
                return Err(Refusal::new(
                    Reason::MalformedTrailer,
                    format!("no permission: {e}"),
                ))
            }
        };
        let Some(signed) = signed else {
            if self.session.is_some() {
                return self.session_caller();
            }
            return self.anonymous();
        };
        if let Some(auth) = &self.acl.inner.v2 {
            let user = self.user(auth, &signed.access_key)?;
            if !self.verify(&user.native_key, &signed, frame) {
                return Err(bad_signature(&signed.access_key));
            }
            self.check_stamp(&signed, now_ms)?;
            let caller = self.caller_v2(&user.name);
            self.bind(&caller, &signed.access_key, &user.password);
            return Ok(caller);
        }
        let file = self.acl.inner.current.load();
        let account = self.account(&file, &signed.access_key)?;
        if !self.verify(&account.native_key, &signed, frame) {
            return Err(bad_signature(&signed.access_key));
        }
        let secret = account.secret.clone();
        self.check_stamp(&signed, now_ms)?;
        let caller = Caller::Account(Arc::from(signed.access_key.as_str()));
        self.bind(&caller, &signed.access_key, &secret);
        Ok(caller)
    }

    /// Checks `signed`'s MAC with the connection's kept key, derived again from the account's
    /// `root` key when it was made for another account key, access key or nonce.
    fn verify(&mut self, root: &auth::NativeKey, signed: &auth::Signed, frame: &[u8]) -> bool {
        let (access_key, nonce) = (&signed.access_key, &signed.stamp.nonce);
        let key = match self.conn_key.take() {
            Some(k) if k.is_for(root, access_key, nonce) => k,
            _ => root.connection(access_key, nonce),
        };
        let ok = signed.verify_with(&key, frame);
        self.conn_key = Some(key);
        ok
    }

    /// Binds a TLS connection to the account of its first verified signed request.
    fn bind(&mut self, caller: &Caller, access_key: &str, secret: &auth::Secret) {
        if self.tls && self.session.is_none() {
            self.session = Some(Session {
                caller: caller.clone(),
                access_key: Arc::from(access_key),
                secret: secret.clone(),
            });
        }
    }

    /// The caller of an unsigned request on a bound connection, while its account still
    /// holds the secret it proved and admits the peer; else the binding ends and the
    /// connection is to be closed.
    fn session_caller(&mut self) -> Result<Caller, Refusal> {
        let Some(s) = &self.session else {
            return self.anonymous();
        };
        let current = match &self.acl.inner.v2 {
            Some(auth) => auth.holds_password(&s.access_key, &s.secret),
            None => {
                let file = self.acl.inner.current.load();
                self.account(&file, &s.access_key)
                    .is_ok_and(|a| a.secret == s.secret)
            }
        };
        if current {
            return Ok(s.caller.clone());
        }
        let refusal = Refusal::new(
            Reason::UnknownAccessKey,
            format!(
                "no permission: access key {} was removed or changed since this connection \
                 signed in; the connection is closed, sign in again on a new one",
                s.access_key
            ),
        );
        self.session = None;
        self.ended = true;
        Err(refusal)
    }

    fn check_stamp(&mut self, signed: &Signed, now_ms: u64) -> Result<(), Refusal> {
        let window = self.acl.inner.settings.replay_window_ms;
        let ts = signed.stamp.timestamp_ms;
        if ts.abs_diff(now_ms) > window {
            return Err(Refusal::new(
                Reason::StaleTimestamp,
                format!(
                    "no permission: request timestamp is {} ms from the broker's clock, over the \
                     replay window of {window} ms (check the client's clock)",
                    ts.abs_diff(now_ms)
                ),
            ));
        }
        match self.nonce {
            None => {
                self.acl.remember_nonce(signed.stamp.nonce, now_ms)?;
                self.nonce = Some(signed.stamp.nonce);
            }
            Some(n) if n != signed.stamp.nonce => {
                return Err(Refusal::new(
                    Reason::Replayed,
                    "no permission: the connection nonce changed within one connection",
                ))
            }
            Some(_) => {}
        }
        if signed.stamp.seq <= self.last_seq {
            return Err(Refusal::new(
                Reason::Replayed,
                format!(
                    "no permission: replayed request (sequence {} after {})",
                    signed.stamp.seq, self.last_seq
                ),
            ));
        }
        self.last_seq = signed.stamp.seq;
        Ok(())
    }

    /// Authenticates a remoting request by its `AccessKey` and `Signature` fields.
    pub fn remoting(
        &mut self,
        ext_fields: &ringmq_wire::remoting::ext::ExtFields,
        body: &[u8],
    ) -> Result<Caller, Refusal> {
        let r = self.remoting_inner(ext_fields, body);
        self.settle(r)
    }

    fn remoting_inner(
        &mut self,
        ext_fields: &ringmq_wire::remoting::ext::ExtFields,
        body: &[u8],
    ) -> Result<Caller, Refusal> {
        let Some(key) = ext_fields.get(auth::ACCESS_KEY_FIELD) else {
            return self.anonymous();
        };
        let sig = ext_fields.get(auth::SIGNATURE_FIELD).unwrap_or("");
        if let Some(auth) = &self.acl.inner.v2 {
            let user = self.user(auth, key)?;
            if !user.remoting_key.verify(ext_fields, body, sig) {
                return Err(bad_signature(key));
            }
            return Ok(self.caller_v2(&user.name));
        }
        let file = self.acl.inner.current.load();
        let account = self.account(&file, key)?;
        if !account.remoting_key.verify(ext_fields, body, sig) {
            return Err(bad_signature(key));
        }
        Ok(Caller::Account(Arc::from(key)))
    }

    fn anonymous(&self) -> Result<Caller, Refusal> {
        if let Some(auth) = &self.acl.inner.v2 {
            // Unsigned: only the codes of `authenticationWhitelist` ([`v2::check`]).
            return if auth.settings().whitelist.is_empty() {
                Err(Refusal::new(
                    Reason::MissingCredentials,
                    "no permission: ACL 2.0 is on here (authenticationEnabled); sign requests \
                     with a username (access key) and password (secret key)",
                ))
            } else {
                Ok(Caller::Anonymous)
            };
        }
        let file = self.acl.inner.current.load();
        if file.global_white.iter().any(|p| p.matches(self.peer)) {
            Ok(Caller::Anonymous)
        } else {
            Err(Refusal::new(
                Reason::MissingCredentials,
                "no permission: ACL is on here (aclEnable=true); sign requests with an \
                 access key and secret key",
            ))
        }
    }

    fn account<'f>(&self, file: &'f AclFile, key: &str) -> Result<&'f file::Account, Refusal> {
        let Some(account) = file.accounts.get(key) else {
            return Err(Refusal::new(
                Reason::UnknownAccessKey,
                format!("no permission: access key {key} is not in the ACL"),
            ));
        };
        if let Some(w) = &account.white_remote_address {
            if !w.matches(self.peer) {
                return Err(Refusal::new(
                    Reason::AddressNotAllowed,
                    format!(
                        "no permission: access key {key} may not be used from {}",
                        self.peer
                    ),
                ));
            }
        }
        Ok(account)
    }

    fn user(&self, auth: &v2::Auth, name: &str) -> Result<v2::model::User, Refusal> {
        match auth.user(name) {
            None => Err(Refusal::new(
                Reason::UnknownAccessKey,
                format!("no permission: user {name} does not exist"),
            )),
            Some(u) if u.status == v2::model::UserStatus::Disable => Err(Refusal::new(
                Reason::UnknownAccessKey,
                format!("no permission: user {name} is disabled"),
            )),
            Some(u) => Ok(u),
        }
    }

    fn caller_v2(&self, name: &str) -> Caller {
        Caller::User {
            name: Arc::from(name),
            ip: self.peer,
        }
    }

    /// Counts a refusal made outside the guard (authorization) on this connection.
    pub fn note_refused(&mut self) {
        self.refused_in_a_row = self.refused_in_a_row.saturating_add(1);
    }

    /// A request of this connection was served: the run of refusals ends.
    pub fn note_served(&mut self) {
        self.refused_in_a_row = 0;
    }

    /// Has this connection been refused so often in a row that it should be closed?
    pub fn should_close(&self) -> bool {
        self.ended || self.refused_in_a_row >= CONSECUTIVE_REFUSALS_MAX
    }

    fn settle(&mut self, r: Result<Caller, Refusal>) -> Result<Caller, Refusal> {
        match &r {
            Ok(_) => {}
            Err(refusal) => {
                self.acl.count(refusal.reason);
                self.refused_in_a_row = self.refused_in_a_row.saturating_add(1);
            }
        }
        r
    }
}

fn bad_signature(key: &str) -> Refusal {
    Refusal::new(
        Reason::BadSignature,
        format!("no permission: the signature does not match access key {key}'s secret key"),
    )
}

#[cfg(test)]
mod tests;
