//! The one interface between the shard core and the features above it. The core (this
//! folder, the [`Broker`](crate::broker::Broker) and its shared tables) names no feature: a
//! broker is started with a [`Hooks`], the router and the list of rooms that the top floor
//! (`broker::node`) puts together, and the core calls them at fixed points of a shard's
//! life: when it starts, becomes or stops being a master, hands over a message in its
//! mailbox, loses a connection, saves consumer offsets and stops. A room keeps what it holds
//! per shard in a state the core creates with the shard and never looks into
//! ([`Room::shard_state`], read back with [`Shard::room`]).
//!
//! Features that need each other meet here too: a feature that must serve a request the way
//! a client's would goes through [`Router`] (`shard.broker.hooks.router`), never through
//! another feature's file.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::acl::Caller;
use crate::broker::groups::Channel;
use crate::broker::shard::route::Origin;
use crate::broker::shard::Shard;
use crate::broker::Topics;
use crate::config::BrokerConfig;
use crate::io::net::Listener;
use crate::io::rt::Task;
use crate::net::reply::Outcome;

/// Work a hook leaves for the core to await at the right moment (on the shard's loop).
pub type Later = Pin<Box<dyn Future<Output = ()>>>;

/// A message to a room through the shard's mailbox (`Mail::Room`): the room that made it
/// downcasts it back.
pub type RoomMail = Box<dyn Any + Send>;

/// Serves one request frame (the router: decodes it and calls the feature that owns it).
pub trait Router: Sync {
    fn dispatch(
        &self,
        shard: &Rc<Shard>,
        frame: Vec<u8>,
        origin: Origin,
        caller: Option<&Caller>,
    ) -> Outcome;
}

/// What a shard's loop hands the rooms when it starts.
#[derive(Default)]
pub struct Started {
    /// This shard's replication listener (masters, and every broker in controller mode),
    /// for the room that serves it to take.
    pub ha_listener: Option<Listener>,
    /// Tasks the loop keeps until it stops (dropped, so stopped, before the store closes).
    pub keep: Vec<Task<()>>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("ha_listener", &self.ha_listener.is_some())
            .field("keep", &self.keep.len())
            .finish()
    }
}

/// A feature's hooks. Every method has a default that does nothing.
pub trait Room: Sync {
    /// The feature's name, for errors and logs.
    fn name(&self) -> &'static str;

    /// Before any shard starts: topics the feature needs in the table.
    fn prepare(&self, _topics: &Topics, _config: &BrokerConfig) -> Result<(), String> {
        Ok(())
    }

    /// The per-shard state this room keeps, created with each shard.
    fn shard_state(&self) -> Option<Box<dyn Any>> {
        None
    }

    /// The shard's loop starts (every role): spawn the room's loops.
    fn start(&self, _shard: &Rc<Shard>, _started: &mut Started) {}

    /// The shard becomes a master's (a new `master_gen`): rebuild what a master keeps and
    /// start master-only loops, which run while [`Shard::master_running`] holds.
    fn become_master(&self, _shard: &Rc<Shard>) -> Result<(), String> {
        Ok(())
    }

    /// The shard stopped being a master's (controller mode): forget what only a master keeps.
    fn leave_master(&self, _shard: &Rc<Shard>) {}

    /// A message in the shard's mailbox for a room: the room that takes it returns `None`.
    fn mail(&self, _shard: &Rc<Shard>, mail: RoomMail) -> Option<RoomMail> {
        Some(mail)
    }

    /// A client connection of this shard closed.
    fn connection_closed(&self, _shard: &Shard, _channel: Channel) {}

    /// The consumer offsets are about to be snapshotted: what to do once they are saved
    /// (taken now, before the snapshot; awaited only when the save succeeded).
    fn offsets_saving(&self, _shard: &Rc<Shard>) -> Option<Later> {
        None
    }

    /// The shard stopped: store closed, offsets saved. What remains to do before the
    /// thread ends.
    fn stopped(&self, _shard: &Rc<Shard>) -> Option<Later> {
        None
    }
}

/// The router and the rooms a broker runs with.
#[derive(Clone, Copy)]
pub struct Hooks {
    pub router: &'static dyn Router,
    pub rooms: &'static [&'static dyn Room],
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.rooms.iter().map(|r| r.name()).collect();
        f.debug_struct("Hooks").field("rooms", &names).finish()
    }
}

/// Per-shard states of the rooms, in the order of [`Hooks::rooms`].
pub struct RoomStates(Vec<Box<dyn Any>>);

impl RoomStates {
    pub fn new(hooks: &Hooks) -> Self {
        RoomStates(hooks.rooms.iter().filter_map(|r| r.shard_state()).collect())
    }

    /// The state of type `T`, if a room made one.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| s.downcast_ref::<T>())
    }
}

impl Shard {
    /// The per-shard state of type `T` a room made (see [`Room::shard_state`]). Panics when
    /// no room of the broker makes one: the rooms' list (`broker::node`) lacks the room
    /// whose state this is, a wiring error every test of that room finds.
    pub fn room<T: 'static>(&self) -> &T {
        match self.rooms.get::<T>() {
            Some(s) => s,
            None => panic!(
                "no room of this broker keeps a {} per shard",
                std::any::type_name::<T>()
            ),
        }
    }

    /// Becomes a master's: a new generation (loops of an earlier one stop at their next
    /// turn), then every room's [`Room::become_master`], in order.
    pub fn become_master(self: &Rc<Self>) -> Result<(), String> {
        self.master_gen.set(self.master_gen.get() + 1);
        for room in self.broker.hooks.rooms {
            room.become_master(self)?;
        }
        Ok(())
    }

    /// Stops being a master's: a new generation, then every room's [`Room::leave_master`].
    pub fn leave_master(self: &Rc<Self>) {
        self.master_gen.set(self.master_gen.get() + 1);
        for room in self.broker.hooks.rooms {
            room.leave_master(self);
        }
    }

    /// What the rooms do once the consumer offsets about to be snapshotted are saved
    /// ([`Room::offsets_saving`], taken now, in the rooms' order).
    pub fn offsets_saving(self: &Rc<Self>) -> Vec<Later> {
        self.broker
            .hooks
            .rooms
            .iter()
            .filter_map(|r| r.offsets_saving(self))
            .collect()
    }

    /// Serves a request the way one from a client would be (forwarded origin).
    pub fn dispatch(
        self: &Rc<Self>,
        frame: Vec<u8>,
        origin: Origin,
        caller: Option<&Caller>,
    ) -> Outcome {
        self.broker
            .hooks
            .router
            .dispatch(self, frame, origin, caller)
    }
}
