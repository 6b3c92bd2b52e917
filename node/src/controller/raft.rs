//! The controllers' Raft group on openraft: the type configuration, openraft's async runtime
//! on this node's event loop (`crate::io::rt`, so it also runs on the simulator's virtual
//! time), the Raft log and snapshots on disk through the node's disk layer
//! (`crate::io::node_disk`), and Raft messages as CONTROLLER_RAFT requests between
//! controllers over persistent native connections.
//!
//! On disk (`controllerStorePath/n<id>/`):
//! - `raft.log`: an append-only file of records (`u32` length, `u32` CRC32 of the JSON,
//!   JSON of a [`LogRecord`]); each append is fdatasynced before openraft hears it is
//!   durable. A torn or corrupt tail is cut at open. Rewritten compactly (temp file, sync,
//!   rename, directory sync) once purged records make up most of it.
//! - `snapshot.json`: the newest snapshot (state, last applied log id, membership), replaced
//!   the same way.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::io::{self, Cursor};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftLogReader, RaftNetwork,
    RaftNetworkFactory, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, Vote,
};
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{raft_kind, ControllerRaftRequest};
use serde::{Deserialize, Serialize};

use super::link::Link;
use super::state::{Applied, Command, ControllerState};
use crate::io::clock;
use crate::io::node_disk::{NodeDisk, NodeFile};
use crate::io::rt;
use crate::store::disk::Disk;

openraft::declare_raft_types!(
    /// The controllers' Raft types: commands of [`super::state`], node ids `u64`, nodes by
    /// address, on [`RtRuntime`].
    pub Tc:
        D = Command,
        R = Applied,
        AsyncRuntime = RtRuntime,
);

pub type Raft = openraft::Raft<Tc>;
type Sid = StorageError<u64>;

// ---- The async runtime -----------------------------------------------------------------

/// openraft's runtime on this thread's event loop (or the simulator's executor).
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub struct RtRuntime;

/// A spawned task's result; dropping it leaves the task running (as tokio's does).
pub struct RtJoin<T>(RtOneshotReceiver<T>);

impl<T> Future for RtJoin<T> {
    type Output = Result<T, Gone>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|r| r.map_err(|_| Gone))
    }
}

/// A task ended without a result (it panicked or its loop stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the task ended without a result")
    }
}

impl std::error::Error for Gone {}

/// A deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

/// A future bounded by a sleep.
pub struct RtTimeout<T> {
    fut: Pin<Box<T>>,
    sleep: Pin<Box<dyn Future<Output = ()>>>,
}

impl<R, T: Future<Output = R>> Future for RtTimeout<T> {
    type Output = Result<R, Elapsed>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        self.sleep.as_mut().poll(cx).map(|_| Err(Elapsed))
    }
}

/// A one-shot channel's shared slot (single-threaded: openraft runs on one loop here).
struct Slot<T> {
    value: Option<T>,
    waker: Option<std::task::Waker>,
    sender_gone: bool,
}

/// The sending half of a one-shot channel.
pub struct RtOneshotSender<T>(Rc<RefCell<Slot<T>>>);

impl<T> Debug for RtOneshotSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RtOneshotSender")
    }
}

impl<T> openraft::async_runtime::AsyncOneshotSendExt<T> for RtOneshotSender<T> {
    fn send(self, t: T) -> Result<(), T> {
        let mut slot = self.0.borrow_mut();
        slot.value = Some(t);
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Drop for RtOneshotSender<T> {
    fn drop(&mut self) {
        let mut slot = self.0.borrow_mut();
        slot.sender_gone = true;
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

/// The sending half was dropped without a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the sender was dropped")
    }
}

impl std::error::Error for Closed {}

/// The receiving half of a one-shot channel.
pub struct RtOneshotReceiver<T>(Rc<RefCell<Slot<T>>>);

impl<T> Future for RtOneshotReceiver<T> {
    type Output = Result<T, Closed>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.0.borrow_mut();
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Ok(v));
        }
        if slot.sender_gone {
            return Poll::Ready(Err(Closed));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

fn oneshot<T>() -> (RtOneshotSender<T>, RtOneshotReceiver<T>) {
    let slot = Rc::new(RefCell::new(Slot {
        value: None,
        waker: None,
        sender_gone: false,
    }));
    (RtOneshotSender(Rc::clone(&slot)), RtOneshotReceiver(slot))
}

fn sleep_box(d: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
    Box::pin(rt::sleep(d))
}

impl openraft::Instant for clock::Instant {
    fn now() -> Self {
        clock::Instant::now()
    }
}

thread_local! {
    static RNG_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl openraft::AsyncRuntime for RtRuntime {
    type JoinError = Gone;
    type JoinHandle<T: 'static> = RtJoin<T>;
    type Sleep = Pin<Box<dyn Future<Output = ()>>>;
    type Instant = clock::Instant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R>> = RtTimeout<T>;
    type ThreadLocalRng = rand08::rngs::SmallRng;
    type OneshotSender<T> = RtOneshotSender<T>;
    type OneshotReceiverError = Closed;
    type OneshotReceiver<T> = RtOneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + 'static,
        T::Output: 'static,
    {
        use openraft::async_runtime::AsyncOneshotSendExt;
        let (tx, rx) = oneshot();
        rt::spawn(async move {
            let _ = tx.send(future.await);
        });
        RtJoin(rx)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        sleep_box(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        sleep_box(deadline.duration_since(clock::Instant::now()))
    }

    fn timeout<R, F: Future<Output = R>>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        RtTimeout {
            fut: Box::pin(future),
            sleep: sleep_box(duration),
        }
    }

    fn timeout_at<R, F: Future<Output = R>>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Self::timeout(deadline.duration_since(clock::Instant::now()), future)
    }

    fn is_panic(_: &Self::JoinError) -> bool {
        true
    }

    /// Seeded from the monotonic clock and a per-thread count: random enough for election
    /// timeouts; in the simulator from the world's seeded PRNG.
    fn thread_rng() -> Self::ThreadLocalRng {
        use rand08::SeedableRng;
        if let Some(world) = crate::io::sim::current() {
            // The simulated world's own PRNG: a run stays a function of its seed (a
            // per-thread count would carry over from one run to the next).
            return rand08::rngs::SmallRng::seed_from_u64(world.with_rng(|r| r.next_u64()));
        }
        let n = RNG_CALLS.with(|c| {
            let v = c.get().wrapping_add(1);
            c.set(v);
            v
        });
        let t = clock::Instant::now()
            .duration_since(clock::Instant::zero())
            .as_nanos() as u64;
        let id = crate::io::sim::current()
            .and_then(|w| w.current_node())
            .map_or(u64::from(std::process::id()), u64::from);
        rand08::rngs::SmallRng::seed_from_u64(t ^ n.rotate_left(32) ^ id.rotate_left(16))
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        oneshot()
    }
}

// ---- Storage ---------------------------------------------------------------------------

/// One record of `raft.log`.
#[derive(Debug, Serialize, Deserialize)]
enum LogRecord {
    Vote(Vote<u64>),
    Entries(Vec<Entry<Tc>>),
    /// Entries from this index on were removed (a conflict with the leader).
    Truncate(u64),
    /// Entries up to and including this log id are in a snapshot.
    Purge(LogId<u64>),
    Committed(Option<LogId<u64>>),
}

const LOG_FILE: &str = "raft.log";
const SNAPSHOT_FILE: &str = "snapshot.json";
/// A log file this large with most of its entries purged is rewritten.
const COMPACT_BYTES: u64 = 1 << 20;

fn io_err(e: impl std::fmt::Display) -> Sid {
    StorageIOError::write(AnyError::error(e.to_string())).into()
}

struct LogInner {
    disk: NodeDisk,
    dir: PathBuf,
    file: NodeFile,
    len: u64,
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
    last_purged: Option<LogId<u64>>,
    entries: BTreeMap<u64, Entry<Tc>>,
}

impl LogInner {
    fn write(&mut self, rec: &LogRecord) -> io::Result<()> {
        let json = serde_json::to_vec(rec).map_err(io::Error::other)?;
        let mut buf = Vec::with_capacity(8 + json.len());
        buf.extend_from_slice(&(json.len() as u32).to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        buf.extend_from_slice(&json);
        self.disk.write_at(&self.file, self.len, &buf)?;
        self.disk.sync_data(&self.file)?;
        self.len += buf.len() as u64;
        Ok(())
    }

    fn replay(&mut self, rec: LogRecord) {
        match rec {
            LogRecord::Vote(v) => self.vote = Some(v),
            LogRecord::Entries(es) => {
                for e in es {
                    self.entries.insert(e.log_id.index, e);
                }
            }
            LogRecord::Truncate(from) => {
                self.entries.split_off(&from);
            }
            LogRecord::Purge(id) => {
                self.entries = self.entries.split_off(&(id.index + 1));
                self.last_purged = Some(id);
            }
            LogRecord::Committed(c) => self.committed = c,
        }
    }

    /// Rewrites the file with only what it still needs.
    fn compact(&mut self) -> io::Result<()> {
        let tmp = self.dir.join(format!("{LOG_FILE}.tmp"));
        let _ = self.disk.remove_file(&tmp);
        let file = self.disk.open(&tmp, true)?;
        let mut fresh = LogInner {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            file,
            len: 0,
            vote: None,
            committed: None,
            last_purged: None,
            entries: BTreeMap::new(),
        };
        if let Some(v) = self.vote {
            fresh.write(&LogRecord::Vote(v))?;
        }
        if let Some(p) = self.last_purged {
            fresh.write(&LogRecord::Purge(p))?;
        }
        fresh.write(&LogRecord::Committed(self.committed))?;
        let es: Vec<Entry<Tc>> = self.entries.values().cloned().collect();
        if !es.is_empty() {
            fresh.write(&LogRecord::Entries(es))?;
        }
        let path = self.dir.join(LOG_FILE);
        self.disk.rename(&tmp, &path)?;
        self.disk.sync_dir(&self.dir)?;
        self.file = self.disk.open(&path, false)?;
        self.len = fresh.len;
        Ok(())
    }
}

/// Reads every whole, intact record of a log file; the offset where they end.
fn read_records(disk: &NodeDisk, file: &NodeFile) -> io::Result<(Vec<LogRecord>, u64)> {
    let len = disk.file_len(file)?;
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos + 8 <= len {
        let mut head = [0u8; 8];
        disk.read_at(file, pos, &mut head)?;
        let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if n == 0 || pos + 8 + n > len {
            break;
        }
        let mut json = vec![0u8; n as usize];
        disk.read_at(file, pos + 8, &mut json)?;
        if crc32fast::hash(&json) != crc {
            break;
        }
        match serde_json::from_slice(&json) {
            Ok(r) => out.push(r),
            Err(_) => break,
        }
        pos += 8 + n;
    }
    Ok((out, pos))
}

/// The Raft log (and vote) of one controller.
#[derive(Clone)]
pub struct LogStore(Rc<RefCell<LogInner>>);

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting a torn tail.
    pub fn open(disk: NodeDisk, dir: &Path) -> io::Result<Self> {
        disk.create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let created = !disk.exists(&path);
        let file = disk.open(&path, true)?;
        if created {
            // A new file's name is durable only once its directory is synced: without this,
            // a power loss took the whole log (votes and entries openraft was told were
            // durable) and the controller came back empty (found by the simulator).
            disk.sync_dir(dir)?;
            if let Some(parent) = dir.parent() {
                disk.sync_dir(parent)?;
            }
        }
        let (records, end) = read_records(&disk, &file)?;
        let total = disk.file_len(&file)?;
        if end < total {
            log::warn!(
                "controller log {}: cutting {} bytes of torn or corrupt tail",
                path.display(),
                total - end
            );
            disk.set_len(&file, end)?;
            disk.sync_data(&file)?;
        }
        let mut inner = LogInner {
            disk,
            dir: dir.to_path_buf(),
            file,
            len: end,
            vote: None,
            committed: None,
            last_purged: None,
            entries: BTreeMap::new(),
        };
        for r in records {
            inner.replay(r);
        }
        Ok(LogStore(Rc::new(RefCell::new(inner))))
    }

    /// Index of the last entry (0 when empty).
    pub fn last_index(&self) -> u64 {
        let i = self.0.borrow();
        i.entries
            .keys()
            .next_back()
            .copied()
            .or(i.last_purged.map(|p| p.index))
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        let i = self.0.borrow();
        i.entries.is_empty() && i.last_purged.is_none() && i.vote.is_none()
    }
}

impl RaftLogReader<Tc> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<Tc>>, Sid> {
        Ok(self
            .0
            .borrow()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<Tc> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<Tc>, Sid> {
        let i = self.0.borrow();
        let last = i
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(i.last_purged);
        Ok(LogState {
            last_purged_log_id: i.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Sid> {
        let mut i = self.0.borrow_mut();
        i.write(&LogRecord::Vote(*vote)).map_err(io_err)?;
        i.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Sid> {
        Ok(self.0.borrow().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), Sid> {
        let mut i = self.0.borrow_mut();
        if i.committed != committed {
            i.write(&LogRecord::Committed(committed)).map_err(io_err)?;
            i.committed = committed;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Sid> {
        Ok(self.0.borrow().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<Tc>) -> Result<(), Sid>
    where
        I: IntoIterator<Item = Entry<Tc>>,
    {
        let es: Vec<Entry<Tc>> = entries.into_iter().collect();
        let mut i = self.0.borrow_mut();
        let res = i.write(&LogRecord::Entries(es.clone()));
        match res {
            Ok(()) => {
                for e in es {
                    i.entries.insert(e.log_id.index, e);
                }
                drop(i);
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(e));
                Err(io_err(msg))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Sid> {
        let mut i = self.0.borrow_mut();
        i.write(&LogRecord::Truncate(log_id.index))
            .map_err(io_err)?;
        i.entries.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Sid> {
        let mut i = self.0.borrow_mut();
        i.write(&LogRecord::Purge(log_id)).map_err(io_err)?;
        i.replay(LogRecord::Purge(log_id));
        if i.len > COMPACT_BYTES {
            i.compact().map_err(io_err)?;
        }
        Ok(())
    }
}

/// What a snapshot holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<u64, BasicNode>,
    state: ControllerState,
}

pub struct SmInner {
    disk: NodeDisk,
    dir: PathBuf,
    pub state: ControllerState,
    pub last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshot_count: u64,
    /// Called after every applied batch (the controller wakes its waiters).
    pub on_apply: Option<Box<dyn Fn()>>,
}

impl SmInner {
    fn save_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        data: &[u8],
    ) -> io::Result<()> {
        let tmp = self.dir.join(format!("{SNAPSHOT_FILE}.tmp"));
        let _ = self.disk.remove_file(&tmp);
        let f = self.disk.open(&tmp, true)?;
        self.disk.write_at(&f, 0, data)?;
        self.disk.sync_data(&f)?;
        self.disk.rename(&tmp, &self.dir.join(SNAPSHOT_FILE))?;
        self.disk.sync_dir(&self.dir)?;
        self.snapshot = Some((meta.clone(), data.to_vec()));
        Ok(())
    }
}

/// The controllers' state machine: [`ControllerState`] plus Raft's bookkeeping.
#[derive(Clone)]
pub struct StateMachine(pub Rc<RefCell<SmInner>>);

impl StateMachine {
    /// Opens the state machine in `dir`: the newest snapshot, if any.
    pub fn open(disk: NodeDisk, dir: &Path) -> io::Result<Self> {
        disk.create_dir_all(dir)?;
        let path = dir.join(SNAPSHOT_FILE);
        let mut inner = SmInner {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            state: ControllerState::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
            snapshot_count: 0,
            on_apply: None,
        };
        if disk.exists(&path) {
            let f = disk.open(&path, false)?;
            let mut data = vec![0u8; disk.file_len(&f)? as usize];
            disk.read_at(&f, 0, &mut data)?;
            let snap: SnapshotFile = serde_json::from_slice(&data)
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
            inner.state = snap.state;
            inner.last_applied = snap.meta.last_log_id;
            inner.membership = snap.meta.last_membership.clone();
            inner.snapshot = Some((snap.meta, data));
        }
        Ok(StateMachine(Rc::new(RefCell::new(inner))))
    }

    // openraft's storage error type is its own; the trait methods return it anyway.
    #[allow(clippy::result_large_err)]
    fn build(&self) -> Result<Snapshot<Tc>, Sid> {
        let mut i = self.0.borrow_mut();
        i.snapshot_count += 1;
        let last = i.last_applied;
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: i.membership.clone(),
            snapshot_id: format!("{}-{}", last.map_or(0, |l| l.index), i.snapshot_count),
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            state: i.state.clone(),
        };
        let data = serde_json::to_vec(&file).map_err(io_err)?;
        i.save_snapshot(&meta, &data).map_err(io_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftSnapshotBuilder<Tc> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Tc>, Sid> {
        self.build()
    }
}

impl RaftStateMachine<Tc> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), Sid> {
        let i = self.0.borrow();
        Ok((i.last_applied, i.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, Sid>
    where
        I: IntoIterator<Item = Entry<Tc>>,
    {
        let mut out = Vec::new();
        let mut i = self.0.borrow_mut();
        for e in entries {
            i.last_applied = Some(e.log_id);
            let r = match e.payload {
                EntryPayload::Blank => Applied::Done,
                EntryPayload::Normal(cmd) => i.state.apply(&cmd),
                EntryPayload::Membership(m) => {
                    i.membership = StoredMembership::new(Some(e.log_id), m);
                    Applied::Done
                }
            };
            out.push(r);
        }
        drop(i);
        if let Some(f) = &self.0.borrow().on_apply {
            f();
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, Sid> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), Sid> {
        let data = snapshot.into_inner();
        let file: SnapshotFile = serde_json::from_slice(&data).map_err(io_err)?;
        let mut i = self.0.borrow_mut();
        i.state = file.state;
        i.last_applied = meta.last_log_id;
        i.membership = meta.last_membership.clone();
        i.save_snapshot(meta, &data).map_err(io_err)?;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<Tc>>, Sid> {
        Ok(self
            .0
            .borrow()
            .snapshot
            .as_ref()
            .map(|(meta, data)| Snapshot {
                meta: meta.clone(),
                snapshot: Box::new(Cursor::new(data.clone())),
            }))
    }
}

// ---- Network ---------------------------------------------------------------------------

/// Makes a [`Peer`] per target controller.
pub struct Network {
    pub self_id: u64,
}

impl RaftNetworkFactory<Tc> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            from: self.self_id,
            target,
            link: node
                .addr
                .parse()
                .ok()
                .map(|a| Link::new(a, "ringmq-controller")),
            addr: node.addr.clone(),
        }
    }
}

/// The link to one other controller.
pub struct Peer {
    from: u64,
    target: u64,
    addr: String,
    link: Option<Link>,
}

type RpcErr<E = RaftError<u64>> = RPCError<u64, BasicNode, E>;

impl Peer {
    async fn call<Req: Serialize, Resp: for<'de> Deserialize<'de>, E>(
        &mut self,
        kind: u8,
        req: &Req,
        ttl: Duration,
    ) -> Result<Resp, RpcErr<RaftError<u64, E>>>
    where
        E: std::error::Error + for<'de> Deserialize<'de>,
        RaftError<u64, E>: std::error::Error + for<'de> Deserialize<'de>,
    {
        let Some(link) = &self.link else {
            let e = io::Error::other(format!(
                "controller {} address {} is invalid",
                self.target, self.addr
            ));
            return Err(RPCError::Unreachable(Unreachable::new(&e)));
        };
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let header = ControllerRaftRequest {
            kind,
            from: self.from,
        };
        let (status, header, body) = link
            .call(RequestCode::ControllerRaft, &header, &body, ttl)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&io::Error::other(e))))?;
        if status != Status::Success {
            let remark = ringmq_wire::command::read_remark(&header)
                .map(|(r, _)| r.to_string())
                .unwrap_or_default();
            let e = io::Error::other(format!("{}: {remark}", status.name()));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let answer: Result<Resp, RaftError<u64, E>> =
            serde_json::from_slice(&body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<Tc> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Tc>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        self.call(raft_kind::APPEND, &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Tc>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<RaftError<u64, InstallSnapshotError>>> {
        self.call(raft_kind::SNAPSHOT, &rpc, option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        self.call(raft_kind::VOTE, &rpc, option.hard_ttl()).await
    }
}

/// Serves one CONTROLLER_RAFT request on `raft`: the JSON answer (a `Result` of openraft's
/// response or its error), or why the request could not be read.
pub async fn serve_rpc(raft: &Raft, kind: u8, body: &[u8]) -> Result<Vec<u8>, String> {
    fn json<T: Serialize>(v: &T) -> Result<Vec<u8>, String> {
        serde_json::to_vec(v).map_err(|e| e.to_string())
    }
    match kind {
        raft_kind::APPEND => {
            let req: AppendEntriesRequest<Tc> =
                serde_json::from_slice(body).map_err(|e| e.to_string())?;
            json(&raft.append_entries(req).await)
        }
        raft_kind::VOTE => {
            let req: VoteRequest<u64> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            json(&raft.vote(req).await)
        }
        raft_kind::SNAPSHOT => {
            let req: InstallSnapshotRequest<Tc> =
                serde_json::from_slice(body).map_err(|e| e.to_string())?;
            json(&raft.install_snapshot(req).await)
        }
        other => Err(format!("unknown Raft message kind {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::node_disk::SimDisk;
    use crate::store::fault_disk::{Crash, FaultDisk};

    /// The log's I/O completes in one poll (its disk calls are synchronous).
    fn now<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        match f
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
        {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the log's I/O is synchronous"),
        }
    }

    fn sim(disk: &FaultDisk) -> NodeDisk {
        NodeDisk::Sim(SimDisk {
            disk: disk.clone(),
            sync_us: Rc::default(),
        })
    }

    #[test]
    fn a_new_log_survives_a_power_loss() {
        let disk = FaultDisk::new();
        let dir = Path::new("/controller/n0");
        let mut log = LogStore::open(sim(&disk), dir).expect("open");
        let vote = Vote::new(3, 1);
        now(log.save_vote(&vote)).expect("save the vote");
        let after = FaultDisk::from_image(&disk.image(Crash::DropUnsynced));
        let mut log = LogStore::open(sim(&after), dir).expect("reopen");
        assert_eq!(now(log.read_vote()).expect("read the vote"), Some(vote));
    }
}
