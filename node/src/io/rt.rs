//! The event-loop runtime of a shard (compio: io_uring through its fusion driver, epoll
//! where io_uring is refused) behind a small surface: build a runtime on a pinned thread, spawn
//! tasks, sleep, time out, yield. Nothing outside `io` names compio. Inside a simulated world
//! ([`super::sim`]) the same calls run on the simulator's executor and virtual time.

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::time::Duration;

use compio::driver::{DriverType, ProactorBuilder};
use compio::runtime::{Runtime, RuntimeBuilder};

use super::sim;

/// Which event-loop driver a runtime ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopDriver {
    IoUring,
    Epoll,
}

impl std::fmt::Display for LoopDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopDriver::IoUring => write!(f, "io_uring"),
            LoopDriver::Epoll => write!(f, "epoll (fallback)"),
        }
    }
}

/// Rounds of woken tasks a loop runs before it looks at I/O again (see
/// [`EventLoop::block_on`]); bounded so tasks that keep waking each other cannot hold up
/// completions.
pub const TASK_ROUNDS_MAX: u32 = 4;

/// A shard's event loop.
pub struct EventLoop {
    rt: Runtime,
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop")
            .field("driver", &self.driver())
            .finish()
    }
}

impl EventLoop {
    /// Builds the loop for the calling thread, pinned to `core` when given. `force_fallback`
    /// skips io_uring (the `RINGMQ_IO=epoll` switch, and tests of the fallback path).
    pub fn new(core: Option<usize>, force_fallback: bool) -> io::Result<Self> {
        let mut proactor = ProactorBuilder::new();
        if force_fallback {
            proactor.driver_type(DriverType::Poll);
        }
        let mut builder = RuntimeBuilder::new();
        builder.with_proactor(proactor);
        if let Some(core) = core {
            builder.thread_affinity(HashSet::from([core]));
        }
        Ok(EventLoop {
            rt: builder.build()?,
        })
    }

    pub fn driver(&self) -> LoopDriver {
        if self.rt.driver_type().is_iouring() {
            LoopDriver::IoUring
        } else {
            LoopDriver::Epoll
        }
    }

    /// Runs `fut` to completion on this thread, with the tasks it spawns.
    ///
    /// compio's own `block_on` enters the kernel (a non-waiting `io_uring_enter`) after every
    /// round of tasks that woke another task, such as a request's reader waking the reply's
    /// writer: three `io_uring_enter`s per request and reply on a connection. Here the tasks
    /// woken that way run first (up to [`TASK_ROUNDS_MAX`] rounds), so the reply's send and
    /// the next receive go to the kernel in the one `io_uring_enter` that then waits: two
    /// per request and reply.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let rt = &self.rt;
        rt.enter(|| {
            let waker = rt.waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let mut fut = std::pin::pin!(fut);
            loop {
                if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    rt.run();
                    return out;
                }
                let mut hot = rt.run();
                let mut rounds = 1;
                while hot && rounds < TASK_ROUNDS_MAX {
                    hot = rt.run();
                    rounds += 1;
                }
                if hot {
                    rt.poll_with(Some(Duration::ZERO));
                } else {
                    rt.poll();
                }
            }
        })
    }
}

/// Starts a task on the current shard's loop; it runs until it finishes (detached).
pub fn spawn<F: Future<Output = ()> + 'static>(fut: F) {
    match sim::current() {
        Some(world) => {
            world.spawn(fut);
        }
        None => compio::runtime::spawn(fut).detach(),
    }
}

/// Starts a task and returns a handle to await its result. Dropping the handle cancels the
/// task.
pub fn spawn_joinable<T: 'static, F: Future<Output = T> + 'static>(fut: F) -> Task<T> {
    match sim::current() {
        Some(world) => Task::Sim(world.spawn_joinable(fut)),
        None => Task::Loop(compio::runtime::spawn(fut)),
    }
}

/// A spawned task's result.
pub enum Task<T> {
    Loop(compio::runtime::JoinHandle<T>),
    Sim(sim::JoinSlot<T>),
}

impl<T> Task<T> {
    /// Waits for the task; `None` if it panicked or was cancelled.
    pub async fn join(self) -> Option<T> {
        match self {
            Task::Loop(h) => h.await.ok(),
            Task::Sim(s) => s.await,
        }
    }
}

/// Runs `f` on a helper thread (for blocking file system work the loop must not wait for:
/// renames, directory syncs); `None` if `f` panicked. In the simulator `f` runs inline, so
/// the run stays deterministic.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if sim::active() {
        return Some(f());
    }
    compio::runtime::spawn_blocking(f).await.ok()
}

pub async fn sleep(d: Duration) {
    match sim::current() {
        Some(world) => sim::Sleep::new(world, d).await,
        None => compio::time::sleep(d).await,
    }
}

/// `Some(output)` if `fut` finishes within `d`.
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Option<F::Output> {
    match sim::current() {
        Some(world) => {
            let sleep = std::pin::pin!(sim::Sleep::new(world, d));
            let fut = std::pin::pin!(fut);
            first_of(fut, sleep).await
        }
        None => compio::time::timeout(d, fut).await.ok(),
    }
}

/// `Some(a's output)` if `a` finishes first (polled first), `None` if `b` does.
pub async fn first_of<A: Future, B: Future>(
    mut a: std::pin::Pin<&mut A>,
    mut b: std::pin::Pin<&mut B>,
) -> Option<A::Output> {
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(v));
        }
        if b.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        std::task::Poll::Pending
    })
    .await
}

/// Lets every other ready task of this loop run once (how appends that arrive together end
/// up sharing one fdatasync).
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}
