//! Which shard owns queue `q` of topic `t`: the rule lives in `ringmq_wire::command::route`
//! (one rule for everyone); the broker publishes the result in every route.

pub use ringmq_wire::command::route::default_placement as queue_shards;
