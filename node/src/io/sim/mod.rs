//! The simulated world: a deterministic, single-threaded executor on virtual time that
//! stands in for the shards' event loops, their clocks and their sockets. Installed on a
//! thread with [`World::enter`]; while it is, [`super::rt`], [`super::clock`] and
//! [`super::net`] route to it instead of compio, the wall clock and TCP. Nothing else in the
//! node knows whether it runs here or for real.
//!
//! Determinism: every choice (which ready task runs next, network latency, which fault
//! happens) comes from one seeded PRNG; tasks, timers and connections live in ordered maps;
//! time moves only when no task is ready (to the earliest timer). The same seed gives the
//! same sequence of polls, so the same trace.
//!
//! Nodes: every task belongs to a node (a broker, a name server, the clients); a task spawned
//! by another inherits its node. [`World::kill_node`] drops every task of a node at once, the
//! way `kill -9` ends a process: no destructor of the node's state runs code that awaits.
//! A node's wall clock may be offset (clock jumps); timers use the monotonic virtual time.
//!
//! Fail-stop in the simulator: [`crate::fail_stop`] panics with [`FailStop`] instead of
//! exiting; the executor catches it and kills the node. Any other panic is recorded as a bug.
//!
//! The world owns its network ([`net`]: simulated TCP): it resets a node's connections when the
//! node dies or a partition cuts them, and keeps the listeners' backlogs; so the network is a
//! child of this module, not a file beside it.

pub mod net;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Identifies a simulated process.
pub type NodeId = u32;

/// Unix time (ms) of virtual time zero: a fixed date, so record timestamps are realistic and
/// the same in every run.
pub const EPOCH_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// The payload of a fail-stop inside the simulator (see the module doc).
#[derive(Debug, Clone)]
pub struct FailStop(pub String);

/// A seeded PRNG (SplitMix64: small, fast, and every seed is good).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

struct TaskSlot {
    node: NodeId,
    /// `None` while the task is being polled.
    fut: Option<LocalFuture>,
}

/// Woken task ids. A `Mutex` only because `Waker` must be `Send`; one thread uses it.
type WakeQueue = Arc<Mutex<Vec<u64>>>;

struct TaskWaker {
    id: u64,
    queue: WakeQueue,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.id);
    }
}

/// Network conditions between nodes (see [`super::net`]'s simulated connections).
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// One-way latency range of a chunk, microseconds.
    pub latency_us: (u64, u64),
    /// Chance that a write resets its connection (the bytes in flight are lost both ways).
    pub reset_chance: f64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency_us: (20, 200),
            reset_chance: 0.0,
        }
    }
}

struct WorldInner {
    now_ns: u64,
    next_task: u64,
    tasks: BTreeMap<u64, TaskSlot>,
    ready: BTreeSet<u64>,
    timers: BTreeMap<(u64, u64), Waker>,
    timer_seq: u64,
    rng: Rng,
    current: Option<NodeId>,
    dead: BTreeSet<NodeId>,
    wall_offset_ms: BTreeMap<NodeId, i64>,
    /// Listening sockets: address -> (node, backlog of accepted server ends, acceptor).
    listeners: BTreeMap<SocketAddr, Listening>,
    /// Pairs of nodes that cannot reach each other.
    partitions: BTreeSet<(NodeId, NodeId)>,
    pipes: Vec<std::rc::Weak<net::SimPipe>>,
    net: NetConfig,
    /// Tasks polled so far.
    polls: u64,
    /// Order-sensitive hash of what ran (task ids, times): the run's trace digest.
    trace: u64,
    /// Panics that were not fail-stops: (node, message).
    panics: Vec<(NodeId, String)>,
    /// Fail-stops: (node, reason).
    fail_stops: Vec<(NodeId, String)>,
}

pub(crate) struct Listening {
    pub node: NodeId,
    pub backlog: VecDeque<net::SimConn>,
    pub waker: Option<Waker>,
}

/// The simulated world (see the module doc). Cheap to clone: clones share it.
#[derive(Clone)]
pub struct World {
    inner: Rc<RefCell<WorldInner>>,
    woken: WakeQueue,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("now_ns", &self.inner.borrow().now_ns)
            .finish()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<World>> = const { RefCell::new(None) };
    static QUIET_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// The world installed on this thread, if any.
pub fn current() -> Option<World> {
    CURRENT.with(|c| c.borrow().clone())
}

/// True when this thread runs inside a simulated world.
pub fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Keeps a world installed on this thread; dropping it uninstalls the world.
#[derive(Debug)]
pub struct Entered(());

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

impl World {
    pub fn new(seed: u64, net: NetConfig) -> Self {
        install_quiet_panic_hook();
        World {
            inner: Rc::new(RefCell::new(WorldInner {
                now_ns: 0,
                next_task: 0,
                tasks: BTreeMap::new(),
                ready: BTreeSet::new(),
                timers: BTreeMap::new(),
                timer_seq: 0,
                rng: Rng::new(seed),
                current: None,
                dead: BTreeSet::new(),
                wall_offset_ms: BTreeMap::new(),
                listeners: BTreeMap::new(),
                partitions: BTreeSet::new(),
                pipes: Vec::new(),
                net,
                polls: 0,
                trace: 0xcbf2_9ce4_8422_2325,
                panics: Vec::new(),
                fail_stops: Vec::new(),
            })),
            woken: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Installs this world on the calling thread until the guard is dropped.
    pub fn enter(&self) -> Entered {
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
        Entered(())
    }

    /// Virtual monotonic time in nanoseconds since the start of the run.
    pub fn now_ns(&self) -> u64 {
        self.inner.borrow().now_ns
    }

    /// Wall-clock Unix milliseconds as the current node sees it.
    pub fn wall_ms(&self) -> i64 {
        let inner = self.inner.borrow();
        let offset = inner
            .current
            .and_then(|n| inner.wall_offset_ms.get(&n).copied())
            .unwrap_or(0);
        EPOCH_MS + (inner.now_ns / 1_000_000) as i64 + offset
    }

    /// Moves a node's wall clock by `delta_ms` (a clock jump; timers are not affected).
    pub fn jump_clock(&self, node: NodeId, delta_ms: i64) {
        *self
            .inner
            .borrow_mut()
            .wall_offset_ms
            .entry(node)
            .or_insert(0) += delta_ms;
    }

    /// Draws from the world's PRNG.
    pub fn with_rng<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        f(&mut self.inner.borrow_mut().rng)
    }

    /// The node whose task is running (None: the simulator itself).
    pub fn current_node(&self) -> Option<NodeId> {
        self.inner.borrow().current
    }

    pub fn is_dead(&self, node: NodeId) -> bool {
        self.inner.borrow().dead.contains(&node)
    }

    /// Starts a task on `node`; returns its id.
    pub fn spawn_on(&self, node: NodeId, fut: impl Future<Output = ()> + 'static) -> u64 {
        let mut inner = self.inner.borrow_mut();
        if inner.dead.contains(&node) {
            return u64::MAX;
        }
        let id = inner.next_task;
        inner.next_task += 1;
        inner.tasks.insert(
            id,
            TaskSlot {
                node,
                fut: Some(Box::pin(fut)),
            },
        );
        inner.ready.insert(id);
        id
    }

    /// Starts a task on the running task's node.
    pub fn spawn(&self, fut: impl Future<Output = ()> + 'static) -> u64 {
        let node = self.inner.borrow().current.unwrap_or(0);
        self.spawn_on(node, fut)
    }

    /// Ends one task (its join handle was dropped: compio cancels such tasks too).
    fn cancel(&self, id: u64) {
        let slot = {
            let mut inner = self.inner.borrow_mut();
            inner.ready.remove(&id);
            inner.tasks.remove(&id)
        };
        drop(slot);
    }

    /// Runs `f` as node `node` (what it spawns belongs to that node).
    pub fn as_node<T>(&self, node: NodeId, f: impl FnOnce() -> T) -> T {
        let prev = self.set_current(Some(node));
        let out = f();
        self.set_current(prev);
        out
    }

    /// Revives a killed node id so it can be started again (a restart).
    pub fn revive(&self, node: NodeId) {
        self.inner.borrow_mut().dead.remove(&node);
    }

    /// Ends every task of `node` at once (a crash); its listeners close and its connections
    /// reset.
    pub fn kill_node(&self, node: NodeId) {
        let doomed: Vec<TaskSlot> = {
            let mut inner = self.inner.borrow_mut();
            inner.dead.insert(node);
            let ids: Vec<u64> = inner
                .tasks
                .iter()
                .filter(|(_, t)| t.node == node)
                .map(|(id, _)| *id)
                .collect();
            inner.listeners.retain(|_, l| l.node != node);
            ids.into_iter()
                .filter_map(|id| {
                    inner.ready.remove(&id);
                    inner.tasks.remove(&id)
                })
                .collect()
        };
        self.reset_pipes(|a, b| a == node || b == node);
        // Dropped with no borrow held: destructors may reach the world.
        let prev = self.set_current(Some(node));
        drop(doomed);
        self.set_current(prev);
    }

    /// Cuts `a` from `b` both ways: connections between them reset, new ones are refused.
    pub fn partition(&self, a: NodeId, b: NodeId) {
        self.inner
            .borrow_mut()
            .partitions
            .insert((a.min(b), a.max(b)));
        self.reset_pipes(|x, y| (x, y) == (a, b) || (x, y) == (b, a));
    }

    /// Ends every partition.
    pub fn heal(&self) {
        self.inner.borrow_mut().partitions.clear();
    }

    pub fn partitioned(&self, a: NodeId, b: NodeId) -> bool {
        self.inner
            .borrow()
            .partitions
            .contains(&(a.min(b), a.max(b)))
    }

    /// Sets the chance that a write resets its connection.
    pub fn set_reset_chance(&self, p: f64) {
        self.inner.borrow_mut().net.reset_chance = p;
    }

    pub(crate) fn net_config(&self) -> NetConfig {
        self.inner.borrow().net.clone()
    }

    fn reset_pipes(&self, hit: impl Fn(NodeId, NodeId) -> bool) {
        let pipes: Vec<Rc<net::SimPipe>> = {
            let mut inner = self.inner.borrow_mut();
            inner.pipes.retain(|p| p.strong_count() > 0);
            inner.pipes.iter().filter_map(|p| p.upgrade()).collect()
        };
        for p in pipes {
            let (a, b) = p.nodes();
            if hit(a, b) {
                p.reset();
            }
        }
    }

    pub(crate) fn register_pipe(&self, p: &Rc<net::SimPipe>) {
        self.inner.borrow_mut().pipes.push(Rc::downgrade(p));
    }

    pub(crate) fn listen(&self, addr: SocketAddr) -> io::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let node = inner.current.unwrap_or(0);
        if inner.listeners.contains_key(&addr) {
            return Err(io::Error::from(io::ErrorKind::AddrInUse));
        }
        inner.listeners.insert(
            addr,
            Listening {
                node,
                backlog: VecDeque::new(),
                waker: None,
            },
        );
        Ok(())
    }

    pub(crate) fn with_listener<T>(
        &self,
        addr: &SocketAddr,
        f: impl FnOnce(&mut Listening) -> T,
    ) -> Option<T> {
        self.inner.borrow_mut().listeners.get_mut(addr).map(f)
    }

    /// Registers `waker` to run at virtual time `at_ns`.
    pub(crate) fn add_timer(&self, at_ns: u64, waker: Waker) -> (u64, u64) {
        let mut inner = self.inner.borrow_mut();
        inner.timer_seq += 1;
        let key = (at_ns, inner.timer_seq);
        inner.timers.insert(key, waker);
        key
    }

    pub(crate) fn remove_timer(&self, key: (u64, u64)) {
        self.inner.borrow_mut().timers.remove(&key);
    }

    fn set_current(&self, node: Option<NodeId>) -> Option<NodeId> {
        std::mem::replace(&mut self.inner.borrow_mut().current, node)
    }

    /// Tasks polled so far (the simulator's "events").
    pub fn polls(&self) -> u64 {
        self.inner.borrow().polls
    }

    /// The trace digest so far.
    pub fn trace_digest(&self) -> u64 {
        self.inner.borrow().trace
    }

    /// Mixes a value into the trace digest (the simulator records its own steps).
    pub fn trace(&self, v: u64) {
        let mut inner = self.inner.borrow_mut();
        inner.trace = (inner.trace ^ v).wrapping_mul(0x0100_0000_01b3);
    }

    /// Panics that were not fail-stops, taken.
    pub fn take_panics(&self) -> Vec<(NodeId, String)> {
        std::mem::take(&mut self.inner.borrow_mut().panics)
    }

    /// Fail-stops so far, taken.
    pub fn take_fail_stops(&self) -> Vec<(NodeId, String)> {
        std::mem::take(&mut self.inner.borrow_mut().fail_stops)
    }

    /// Runs tasks and moves time until `done()` is true, `for_ns` of virtual time has passed,
    /// or nothing is left to run. Returns true if `done()` became true.
    pub fn run_until(&self, for_ns: u64, mut done: impl FnMut() -> bool) -> bool {
        let deadline = self.now_ns().saturating_add(for_ns);
        loop {
            if done() {
                return true;
            }
            if self.step() {
                continue;
            }
            // Nothing ready: jump to the earliest timer.
            let next = self.inner.borrow().timers.keys().next().copied();
            match next {
                Some((at, _)) if at <= deadline => self.fire_timers(at),
                _ => {
                    self.inner.borrow_mut().now_ns = deadline;
                    return done();
                }
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&self, d: Duration) {
        self.run_until(d.as_nanos() as u64, || false);
    }

    fn fire_timers(&self, at: u64) {
        let wakers: Vec<Waker> = {
            let mut inner = self.inner.borrow_mut();
            inner.now_ns = inner.now_ns.max(at);
            let now = inner.now_ns;
            let due: Vec<(u64, u64)> = inner
                .timers
                .range(..=(now, u64::MAX))
                .map(|(k, _)| *k)
                .collect();
            due.into_iter()
                .filter_map(|k| inner.timers.remove(&k))
                .collect()
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Polls one ready task (chosen by the PRNG); false when none is ready.
    fn step(&self) -> bool {
        let woken: Vec<u64> =
            std::mem::take(&mut *self.woken.lock().unwrap_or_else(|p| p.into_inner()));
        let (id, node, mut fut) = {
            let mut inner = self.inner.borrow_mut();
            for id in woken {
                if inner.tasks.contains_key(&id) {
                    inner.ready.insert(id);
                }
            }
            if inner.ready.is_empty() {
                return false;
            }
            let len = inner.ready.len() as u64;
            let pick = inner.rng.below(len) as usize;
            let id = *inner.ready.iter().nth(pick).expect("pick < len");
            inner.ready.remove(&id);
            let Some(slot) = inner.tasks.get_mut(&id) else {
                return true;
            };
            let Some(fut) = slot.fut.take() else {
                return true;
            };
            let node = slot.node;
            inner.polls += 1;
            let now = inner.now_ns;
            inner.trace = (inner.trace ^ id ^ now.rotate_left(17)).wrapping_mul(0x0100_0000_01b3);
            (id, node, fut)
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            queue: Arc::clone(&self.woken),
        }));
        let mut cx = Context::from_waker(&waker);
        let prev = self.set_current(Some(node));
        let res = std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
        self.set_current(prev);
        match res {
            Ok(Poll::Ready(())) => {
                self.inner.borrow_mut().tasks.remove(&id);
            }
            Ok(Poll::Pending) => {
                let mut inner = self.inner.borrow_mut();
                match inner.tasks.get_mut(&id) {
                    Some(slot) => slot.fut = Some(fut),
                    None => {
                        drop(inner);
                        drop(fut);
                    }
                }
            }
            Err(payload) => {
                drop(fut);
                let msg = panic_message(&payload);
                {
                    let mut inner = self.inner.borrow_mut();
                    inner.tasks.remove(&id);
                    if payload.downcast_ref::<FailStop>().is_some() {
                        inner.fail_stops.push((node, msg));
                    } else {
                        inner.panics.push((node, msg));
                    }
                }
                self.kill_node(node);
            }
        }
        true
    }
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(f) = payload.downcast_ref::<FailStop>() {
        f.0.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// Fail-stops are expected in the simulator: do not print them as panics.
fn install_quiet_panic_hook() {
    if QUIET_HOOK.with(|q| q.replace(true)) {
        return;
    }
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<FailStop>().is_some() {
            return;
        }
        prev(info);
    }));
}

/// Sleeps until virtual time `at_ns`.
pub struct Sleep {
    world: World,
    at_ns: u64,
    key: Option<(u64, u64)>,
}

impl Sleep {
    pub fn new(world: World, d: Duration) -> Self {
        let at_ns = world.now_ns().saturating_add(d.as_nanos() as u64);
        Sleep {
            world,
            at_ns,
            key: None,
        }
    }

    pub fn until(world: World, at_ns: u64) -> Self {
        Sleep {
            world,
            at_ns,
            key: None,
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(k) = self.key.take() {
            self.world.remove_timer(k);
        }
        if self.world.now_ns() >= self.at_ns {
            return Poll::Ready(());
        }
        let key = self.world.add_timer(self.at_ns, cx.waker().clone());
        self.key = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            self.world.remove_timer(k);
        }
    }
}

/// A task's result slot (the simulator's join handle). Dropping it cancels the task, as
/// dropping a compio join handle does.
pub struct JoinSlot<T> {
    state: Rc<RefCell<JoinState<T>>>,
    world: World,
    id: u64,
}

impl<T> Drop for JoinSlot<T> {
    fn drop(&mut self) {
        if !self.state.borrow().finished {
            self.world.cancel(self.id);
        }
    }
}

struct JoinState<T> {
    value: Option<T>,
    finished: bool,
    waker: Option<Waker>,
}

/// Marks the slot finished when the task ends or is dropped (killed).
struct JoinGuard<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

impl<T> Drop for JoinGuard<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.state.borrow_mut();
            s.finished = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl World {
    /// Starts a task whose result can be awaited.
    pub fn spawn_joinable<T: 'static>(
        &self,
        fut: impl Future<Output = T> + 'static,
    ) -> JoinSlot<T> {
        let state = Rc::new(RefCell::new(JoinState {
            value: None,
            finished: false,
            waker: None,
        }));
        let guard = JoinGuard {
            state: Rc::clone(&state),
        };
        let id = self.spawn(async move {
            let v = fut.await;
            guard.state.borrow_mut().value = Some(v);
            drop(guard);
        });
        JoinSlot {
            state,
            world: self.clone(),
            id,
        }
    }
}

impl<T> Future for JoinSlot<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.state.borrow_mut();
        if s.finished {
            return Poll::Ready(s.value.take());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
