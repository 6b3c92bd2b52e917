//! Known bugs the simulator must be able to find (its proof that it can fail), switched on
//! per thread by the simulator only (`ringmq-sim --inject-bug NAME`). Production never sets
//! the switch; reading it costs one thread-local load on the paths that check it.

use std::cell::Cell;

/// A planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// SYNC_FLUSH acknowledges before the fdatasync that covers the record.
    AckBeforeFsync,
    /// SYNC_MASTER acknowledges before a slave acknowledged the record.
    AckBeforeSlave,
    /// One record (the 5th appended to a queue) gets no ConsumeQueue entry.
    SkipCqWrite,
    /// Scheduled messages are delivered up to a second before they are due.
    DeliverEarly,
    /// The schedule's progress record claims the next pending message delivered too.
    ProgressAhead,
    /// The name server never drops a silent broker (its expiry scan does nothing).
    NamesrvNoExpiry,
    /// Controller mode: a master keeps acknowledging writes after its lease expired or a
    /// heartbeat failed (no fencing).
    NoFencing,
    /// Controller mode: a rejoining replica is not cut back to the point where its epochs
    /// agree with the master's (it keeps a tail the new master never had).
    TruncateTooLittle,
    /// The controllers elect a new master among all live members, ignoring the
    /// SyncStateSet.
    ElectOutOfSync,
    /// Controller mode: a master adds a slave to the SyncStateSet once it covers the read
    /// cap, without first making acknowledgements wait for it: records acknowledged while
    /// the change is decided may be missing on the slave it makes electable.
    JoinUnfenced,
    /// POP: a pop saves the group's consume offset (past what it hands out) at once, before
    /// its checkpoint record is durable.
    PopOffsetBeforeCheckpoint,
    /// POP: the revive loop records an expired offset revived without storing its copy in
    /// the pop retry topic.
    PopReviveSkips,
    /// POP: an ack is answered before its ack record is durable (SYNC_FLUSH).
    PopAckBeforeDurable,
    /// POP: an orderly pop that passes over offsets acked before a rewind (acks out of
    /// order) forgets them, so when that pop is rewound in turn they are delivered again.
    PopRewindForgetsAcks,
    /// Recall: a recall is answered SUCCESS before its recall record is durable
    /// (SYNC_FLUSH).
    RecallAckBeforeDurable,
    /// Catch-up reads: chunks of released log bytes read with `O_DIRECT` are kept when the
    /// log is cut back (a replica truncated to its master), so later pulls of those offsets
    /// get the bytes that were cut.
    CatchUpKeepsCutChunks,
}

impl Bug {
    pub const ALL: [Bug; 16] = [
        Bug::AckBeforeFsync,
        Bug::AckBeforeSlave,
        Bug::SkipCqWrite,
        Bug::DeliverEarly,
        Bug::ProgressAhead,
        Bug::NamesrvNoExpiry,
        Bug::NoFencing,
        Bug::TruncateTooLittle,
        Bug::ElectOutOfSync,
        Bug::JoinUnfenced,
        Bug::PopOffsetBeforeCheckpoint,
        Bug::PopReviveSkips,
        Bug::PopAckBeforeDurable,
        Bug::PopRewindForgetsAcks,
        Bug::RecallAckBeforeDurable,
        Bug::CatchUpKeepsCutChunks,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::AckBeforeFsync => "ack-before-fsync",
            Bug::AckBeforeSlave => "ack-before-slave",
            Bug::SkipCqWrite => "skip-cq-write",
            Bug::DeliverEarly => "deliver-early",
            Bug::ProgressAhead => "progress-ahead",
            Bug::NamesrvNoExpiry => "namesrv-no-expiry",
            Bug::NoFencing => "no-fencing",
            Bug::TruncateTooLittle => "truncate-too-little",
            Bug::ElectOutOfSync => "elect-out-of-sync",
            Bug::JoinUnfenced => "join-unfenced",
            Bug::PopOffsetBeforeCheckpoint => "pop-offset-before-checkpoint",
            Bug::PopReviveSkips => "pop-revive-skips",
            Bug::PopAckBeforeDurable => "pop-ack-before-durable",
            Bug::PopRewindForgetsAcks => "pop-rewind-forgets-acks",
            Bug::RecallAckBeforeDurable => "recall-ack-before-durable",
            Bug::CatchUpKeepsCutChunks => "catch-up-keeps-cut-chunks",
        }
    }

    /// Whether the failover scenario (`sim::failover`) is the one that finds it.
    pub fn is_failover(self) -> bool {
        matches!(
            self,
            Bug::NoFencing | Bug::TruncateTooLittle | Bug::ElectOutOfSync | Bug::JoinUnfenced
        )
    }

    /// Whether the POP scenario (`sim::pop_crash`) is the one that finds it.
    pub fn is_pop(self) -> bool {
        matches!(
            self,
            Bug::PopOffsetBeforeCheckpoint
                | Bug::PopReviveSkips
                | Bug::PopAckBeforeDurable
                | Bug::PopRewindForgetsAcks
        )
    }

    /// Whether the catch-up scenario (`sim::catch_up_cut`) is the one that finds it.
    pub fn is_catch_up(self) -> bool {
        matches!(self, Bug::CatchUpKeepsCutChunks)
    }

    /// Whether the recall scenario (`sim::recall_crash`) is the one that finds it.
    pub fn is_recall(self) -> bool {
        matches!(self, Bug::RecallAckBeforeDurable)
    }

    pub fn parse(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

thread_local! {
    static PLANTED: Cell<Option<Bug>> = const { Cell::new(None) };
    static FIRED: Cell<bool> = const { Cell::new(false) };
}

/// Plants `bug` on this thread (`None` removes it).
pub fn plant(bug: Option<Bug>) {
    PLANTED.with(|p| p.set(bug));
    FIRED.with(|f| f.set(false));
}

/// True the first time it is asked while `bug` is planted (a bug that strikes once).
pub fn once(bug: Bug) -> bool {
    is(bug) && !FIRED.with(|f| f.replace(true))
}

/// True when `bug` is planted on this thread.
pub fn is(bug: Bug) -> bool {
    PLANTED.with(|p| p.get() == Some(bug))
}
