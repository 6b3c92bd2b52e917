//! The top floor: the router and the rooms (features) a broker runs with, and the entry
//! points that start one with them. The shard core below names no feature; it is given this
//! list ([`HOOKS`]) and calls it at fixed points (`shard::hooks`).

use std::net::SocketAddr;
use std::rc::Rc;

use crate::acl::Caller;
use crate::broker::shard::hooks::{Hooks, Room, Router};
use crate::broker::shard::route::Origin;
use crate::broker::shard::start::{self, BrokerHandle, SimBroker, StartOptions};
use crate::broker::shard::Shard;
use crate::broker::{
    auth_admin, clients, controller, dispatch, ha, pop, register, request_reply, schedule, txn,
};
use crate::config::BrokerConfig;
use crate::io::node_disk::SimDisk;
use crate::net::reply::Outcome;

/// Requests go to [`dispatch::dispatch`].
#[derive(Debug)]
struct Routes;

impl Router for Routes {
    fn dispatch(
        &self,
        shard: &Rc<Shard>,
        frame: Vec<u8>,
        origin: Origin,
        caller: Option<&Caller>,
    ) -> Outcome {
        dispatch::dispatch(shard, frame, origin, caller)
    }
}

static ROUTES: Routes = Routes;

/// The rooms, in the order their hooks run: a new master rebuilds POP's state before the
/// schedule and transaction loops start; at a shard's start the controller link, then
/// registration, then replication start their loops.
static ROOMS: [&dyn Room; 9] = [
    &pop::ROOM,
    &schedule::ROOM,
    &txn::ROOM,
    &controller::ROOM,
    &register::ROOM,
    &ha::ROOM,
    &auth_admin::ROOM,
    &clients::ROOM,
    &request_reply::ROOM,
];

/// What every broker of this build runs with.
pub static HOOKS: Hooks = Hooks {
    router: &ROUTES,
    rooms: &ROOMS,
};

/// Starts a broker: every shard, with every room; returns once all of them listen.
pub fn start(config: BrokerConfig, opts: StartOptions) -> Result<BrokerHandle, String> {
    start::start(config, opts, HOOKS)
}

/// Starts a broker in the simulator (see [`start::start_sim`]).
pub fn start_sim(
    config: BrokerConfig,
    addr: SocketAddr,
    disk: SimDisk,
) -> Result<SimBroker, String> {
    start::start_sim(config, addr, disk, HOOKS)
}
