//! Simulated TCP between the nodes of a [`World`]: ordered, reliable byte streams with a
//! latency per write (drawn from the world's PRNG, never reordering bytes of one stream, as
//! TCP does not), that reset when a partition cuts them, when either node dies, or at random
//! (`NetConfig::reset_chance`: the simulator's "dropped message" — everything in flight on
//! that connection is lost both ways and both ends see ECONNRESET, as after a TCP reset).
//! Connections to an address nobody listens on, or across a partition, are refused.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};

use super::{NodeId, World};

/// Bytes handed out by one read at most (a socket read is bounded too).
pub const SIM_READ_BYTES_MAX: usize = 256 << 10;

#[derive(Default)]
struct Direction {
    /// (virtual delivery time, bytes), in order; delivery times never decrease.
    chunks: VecDeque<(u64, Vec<u8>)>,
    last_at_ns: u64,
    /// The writing end closed (EOF once drained).
    closed: bool,
    reader: Option<Waker>,
    timer: Option<(u64, u64)>,
}

/// Both directions of one connection.
pub struct SimPipe {
    world: World,
    /// (connecting node, listening node).
    nodes: (NodeId, NodeId),
    addrs: (SocketAddr, SocketAddr),
    dirs: [RefCell<Direction>; 2],
    reset: RefCell<bool>,
}

impl SimPipe {
    pub fn nodes(&self) -> (NodeId, NodeId) {
        self.nodes
    }

    /// Breaks the connection: both ends fail from now on.
    pub fn reset(&self) {
        *self.reset.borrow_mut() = true;
        for d in &self.dirs {
            if let Some(w) = d.borrow_mut().reader.take() {
                w.wake();
            }
        }
    }

    fn is_reset(&self) -> bool {
        *self.reset.borrow()
    }
}

/// One end of a simulated connection; dropping the last clone closes its writing side.
struct End {
    pipe: Rc<SimPipe>,
    /// 0: the connecting side, 1: the accepting side. Writes go to `dirs[side]`.
    side: usize,
}

impl Drop for End {
    fn drop(&mut self) {
        let mut d = self.pipe.dirs[self.side].borrow_mut();
        d.closed = true;
        if let Some(w) = d.reader.take() {
            w.wake();
        }
    }
}

/// A simulated connection end. Clones share it (one reader task, one writer task).
#[derive(Clone)]
pub struct SimConn(Rc<End>);

fn reset_error() -> io::Error {
    io::Error::from(io::ErrorKind::ConnectionReset)
}

impl SimConn {
    /// Connects the running node to `addr`.
    pub fn connect(world: &World, addr: SocketAddr) -> io::Result<SimConn> {
        let from = world.current_node().unwrap_or(0);
        let local = SocketAddr::from(([10, 0, (from % 250) as u8, 1], 40_000));
        let listener = world.with_listener(&addr, |l| l.node);
        let Some(to) = listener else {
            return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
        };
        if world.partitioned(from, to) || world.is_dead(to) {
            return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
        }
        let pipe = Rc::new(SimPipe {
            world: world.clone(),
            nodes: (from, to),
            addrs: (local, addr),
            dirs: [RefCell::default(), RefCell::default()],
            reset: RefCell::new(false),
        });
        world.register_pipe(&pipe);
        let server = SimConn(Rc::new(End {
            pipe: Rc::clone(&pipe),
            side: 1,
        }));
        world.with_listener(&addr, |l| {
            l.backlog.push_back(server);
            if let Some(w) = l.waker.take() {
                w.wake();
            }
        });
        Ok(SimConn(Rc::new(End { pipe, side: 0 })))
    }

    /// The other end's address.
    pub fn peer_addr(&self) -> SocketAddr {
        let p = &self.0.pipe;
        if self.0.side == 0 {
            p.addrs.1
        } else {
            p.addrs.0
        }
    }

    /// Sends all of `buf` (it arrives after a drawn latency, in order).
    pub fn write(&self, buf: &[u8]) -> io::Result<()> {
        let pipe = &self.0.pipe;
        if pipe.is_reset() {
            return Err(reset_error());
        }
        let world = &pipe.world;
        let net = world.net_config();
        if world.partitioned(pipe.nodes.0, pipe.nodes.1)
            || world.with_rng(|r| r.chance(net.reset_chance))
        {
            pipe.reset();
            return Err(reset_error());
        }
        let (lo, hi) = net.latency_us;
        let lat_ns = world.with_rng(|r| lo + r.below(hi.saturating_sub(lo) + 1)) * 1000;
        let mut d = pipe.dirs[self.0.side].borrow_mut();
        if d.closed {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        }
        let at = d.last_at_ns.max(world.now_ns() + lat_ns);
        d.last_at_ns = at;
        d.chunks.push_back((at, buf.to_vec()));
        if let Some(w) = d.reader.take() {
            w.wake();
        }
        Ok(())
    }

    /// Closes the writing side (the peer reads EOF after what is in flight).
    pub fn shutdown(&self) {
        let mut d = self.0.pipe.dirs[self.0.side].borrow_mut();
        d.closed = true;
        if let Some(w) = d.reader.take() {
            w.wake();
        }
    }

    /// Appends what has arrived to `buf`; 0 = the peer closed.
    pub async fn read_append(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            let pipe = &self.0.pipe;
            if pipe.is_reset() {
                return Poll::Ready(Err(reset_error()));
            }
            let now = pipe.world.now_ns();
            let mut d = pipe.dirs[1 - self.0.side].borrow_mut();
            if let Some(k) = d.timer.take() {
                pipe.world.remove_timer(k);
            }
            let mut n = 0;
            while let Some((at, chunk)) = d.chunks.front_mut() {
                if *at > now || n >= SIM_READ_BYTES_MAX {
                    break;
                }
                let take = chunk.len().min(SIM_READ_BYTES_MAX - n);
                buf.extend_from_slice(&chunk[..take]);
                n += take;
                if take == chunk.len() {
                    d.chunks.pop_front();
                } else {
                    chunk.drain(..take);
                }
            }
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if d.closed && d.chunks.is_empty() {
                return Poll::Ready(Ok(0));
            }
            d.reader = Some(cx.waker().clone());
            if let Some(&(at, _)) = d.chunks.front() {
                d.timer = Some(pipe.world.add_timer(at, cx.waker().clone()));
            }
            Poll::Pending
        })
        .await
    }
}

/// A simulated listening socket.
#[derive(Clone)]
pub struct SimListener {
    world: World,
    addr: SocketAddr,
}

impl SimListener {
    /// Listens on `addr` for the running node.
    pub fn bind(world: &World, addr: SocketAddr) -> io::Result<SimListener> {
        world.listen(addr)?;
        Ok(SimListener {
            world: world.clone(),
            addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub async fn accept(&self) -> io::Result<(SimConn, SocketAddr)> {
        std::future::poll_fn(|cx| {
            let got = self
                .world
                .with_listener(&self.addr, |l| match l.backlog.pop_front() {
                    Some(c) => Some(c),
                    None => {
                        l.waker = Some(cx.waker().clone());
                        None
                    }
                });
            match got {
                Some(Some(c)) => {
                    let peer = c.peer_addr();
                    Poll::Ready(Ok((c, peer)))
                }
                Some(None) => Poll::Pending,
                None => Poll::Ready(Err(io::Error::from(io::ErrorKind::NotConnected))),
            }
        })
        .await
    }
}
