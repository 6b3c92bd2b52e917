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

/// Work a loop does in steps when it would otherwise wait (see [`set_idle_work`]).
struct IdleWork {
    pending: Box<dyn Fn() -> bool>,
    step: Box<dyn FnMut()>,
}

thread_local! {
    static IDLE_WORK: std::cell::RefCell<Option<IdleWork>> = const { std::cell::RefCell::new(None) };
}

/// Gives the calling thread's loop work to do when it has nothing else to run: before it
/// waits for I/O, after submitting what its tasks queued (a reply's send goes out first), it
/// runs `step` if `pending` says there is work, then looks for completions again before it
/// waits. At most one step per wait, and only once the loop has waited, in one wait since
/// its last step, at least as long as a step usually takes (a moving average): a request
/// that arrives during a step waits for it, so a loop too busy to sleep that long skips them. Replaces earlier work. Only an [`EventLoop`]
/// runs it (the simulator's executor does not).
pub fn set_idle_work(pending: impl Fn() -> bool + 'static, step: impl FnMut() + 'static) {
    IDLE_WORK.with(|w| {
        *w.borrow_mut() = Some(IdleWork {
            pending: Box::new(pending),
            step: Box::new(step),
        })
    });
}

/// Removes the calling thread's idle work.
pub fn clear_idle_work() {
    IDLE_WORK.with(|w| w.borrow_mut().take());
}

/// Whether the calling thread has idle work pending.
fn idle_pending() -> bool {
    IDLE_WORK.with(|w| w.borrow().as_ref().is_some_and(|w| (w.pending)()))
}

/// Runs one step of the calling thread's idle work.
fn idle_step() {
    IDLE_WORK.with(|w| {
        if let Some(w) = w.borrow_mut().as_mut() {
            (w.step)();
        }
    });
}

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
    /// per request and reply (three while [`set_idle_work`] has work: its step runs after a
    /// non-waiting one that submits the reply).
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let rt = &self.rt;
        rt.enter(|| {
            let waker = rt.waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let mut fut = std::pin::pin!(fut);
            // One idle step per wait, and only after a wait at least as long as a step
            // usually takes (see `set_idle_work`).
            let mut idle_ran = false;
            let mut longest_wait = Duration::ZERO;
            let mut usual_step = Duration::ZERO;
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
                } else if !idle_ran && longest_wait >= usual_step && idle_pending() {
                    rt.poll_with(Some(Duration::ZERO));
                    let started = std::time::Instant::now();
                    idle_step();
                    // A moving average (weight 1/8): one slow step does not stop the others.
                    usual_step = (usual_step * 7 + started.elapsed()) / 8;
                    longest_wait = Duration::ZERO;
                    idle_ran = true;
                } else {
                    let started = std::time::Instant::now();
                    rt.poll();
                    longest_wait = longest_wait.max(started.elapsed());
                    idle_ran = false;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Runs `body` on `lp` with idle work whose `pending` is `pending(steps so far)`;
    /// returns the steps run.
    fn steps_while<F: Future<Output = ()>>(
        lp: &EventLoop,
        pending: impl Fn(u32) -> bool + 'static,
        body: F,
    ) -> u32 {
        let steps = Rc::new(Cell::new(0u32));
        let (seen, done) = (Rc::clone(&steps), Rc::clone(&steps));
        lp.block_on(async move {
            set_idle_work(
                move || pending(seen.get()),
                move || done.set(done.get() + 1),
            );
            body.await;
            clear_idle_work();
        });
        steps.get()
    }

    async fn waits(n: u32) {
        for _ in 0..n {
            sleep(Duration::from_millis(2)).await;
        }
    }

    /// Idle work runs while the loop waits, one step per wait, until it says it is done;
    /// a loop whose tasks never leave it idle runs none.
    #[test]
    fn idle_work_runs_in_steps_while_the_loop_waits() {
        let lp = EventLoop::new(None, false).unwrap();
        let n = steps_while(&lp, |done| done < 5, waits(20));
        assert_eq!(n, 5, "stops when nothing is pending");
        let n = steps_while(&lp, |_| true, waits(20));
        assert!(
            (1..=21).contains(&n),
            "at most one step per wait: {n} steps for 20 waits"
        );
        // Busy: a task that yields but never waits for I/O or time.
        let n = steps_while(&lp, |_| true, async {
            spawn_joinable(async {
                for _ in 0..1000 {
                    yield_now().await;
                }
            })
            .join()
            .await;
        });
        // 1000 turns with a ready task: none idle, except the one after it ends.
        assert!(n <= 1, "{n} idle steps while a task was ready");
    }
}
