//! The command line: every command, its flags and its `--help` text (clap derive). The
//! mqadmin aliases reuse the argument structs of the commands they stand for, so they take
//! the same flags; RocketMQ's short flags (`-t` topic, `-c` cluster, `-b` broker, `-g`
//! group, `-i` message id, `-k` key) work wherever the command has that argument, as an
//! alternative to the positional one.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::parse::{parse_duration, parse_perm, parse_time_ms};
use crate::security::SecurityArgs;

const ABOUT: &str = "Cluster operations for ringmq (the mqadmin of this project)";

const LONG_ABOUT: &str = "\
Cluster operations for ringmq (the mqadmin of this project).

Every command asks the name servers (-n/--namesrv, default 127.0.0.1:9876, or RINGMQ_NAMESRV)
where things are, then the brokers. Output is an aligned table (units in the column headers,
times in RFC 3339 UTC, '-' for none) or, with --json, one JSON object whose keys are the
table's sections. On failure the command prints one line `ringmq-ctl: <reason>` to stderr
and exits 1 (2 for a bad command line).

With TLS on the servers, give --ca (the CA bundle; implies --tls) and, for mutual TLS,
--tls-cert and --tls-key. With ACL on, give --access-key and the secret key in
RINGMQ_SECRET_KEY (rather than --secret-key, which stays in the shell's history).";

const AFTER_HELP: &str = "\
mqadmin aliases: clusterList, updateTopic, deleteTopic, topicList, topicRoute, topicStatus,
consumerProgress, queryMsgById, queryMsgByKey, getControllerMetaData, getSyncStateSet,
electMaster (same flags; -t/-c/-b/-g/-i/-k/-a work too).

Examples:
  ringmq-ctl cluster list
  ringmq-ctl cluster replicas --controller '127.0.0.1:9876;127.0.0.1:9877;127.0.0.1:9878'
  ringmq-ctl topic create Orders --queues 8 --cluster DefaultCluster
  ringmq-ctl group progress billing --topic Orders --json
  ringmq-ctl group dlq billing
  ringmq-ctl group resend-dlq billing --id 7F00000100002A9F0000000000001F40
  ringmq-ctl consume %DLQ%billing
  ringmq-ctl send Orders 'remind me' --delay 30m
  ringmq-ctl delay status
  ringmq-ctl txn status --json
  ringmq-ctl broker readonly 127.0.0.1:10911 on";

/// The whole command line.
#[derive(Parser, Debug)]
#[command(name = "ringmq-ctl", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Name servers, `host:port;host:port`.
    #[arg(
        short = 'n',
        long = "namesrv",
        env = "RINGMQ_NAMESRV",
        default_value = "127.0.0.1:9876",
        global = true,
        value_name = "ADDRS"
    )]
    pub namesrv: String,

    /// Print one JSON object instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// How long one request may wait for its answer (`5s`, `500ms`, `1m`; a bare number is
    /// seconds). Connecting waits at most 3 s of it.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,

    #[command(flatten)]
    pub security: SecurityArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Every command.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Clusters and their brokers.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Create, change, delete and inspect topics.
    #[command(subcommand)]
    Topic(TopicCmd),
    /// Consumer groups: list, progress (lag, retry lag), offset reset, dead letters.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Find and read messages: by id, by key, by queue offset.
    #[command(subcommand)]
    Msg(MsgCmd),
    /// Send one message (at once, or scheduled: --delay, --delay-level, --deliver-at) and
    /// print where it was stored.
    ///
    /// A scheduled message waits in the broker's timer queue until it is due, then is
    /// stored in its topic; until then QUEUE and OFFSET are its place in the timer queue.
    /// The due time the broker set prints as DELIVER_AT (JSON: "deliver_at_ms", ms since
    /// the epoch; null for a message sent at once). JSON: {"sent": {...}}.
    Send(SendArgs),
    /// Read messages of a topic (from the start, or from a group's committed offsets).
    /// Works for a retry (%RETRY%GROUP) or dead-letter (%DLQ%GROUP) topic like any other.
    ///
    /// JSON: {"messages": [...]}; each message has "store_time_ms", "born_time_ms" and
    /// "deliver_at_ms" (when a scheduled message was due; null if it was not scheduled).
    Consume(ConsumeArgs),
    /// One broker: runtime status, configuration, read-only switch.
    #[command(subcommand)]
    Broker(BrokerCmd),
    /// Scheduled (delayed) messages the brokers hold: pending per delay level and with a
    /// delivery time, next due time, deliveries.
    #[command(subcommand)]
    Delay(DelayCmd),
    /// Transactional messages the brokers hold: undecided halves per producer group,
    /// check-backs, halves moved to the check-max topic.
    #[command(subcommand)]
    Txn(TxnCmd),
    /// Accounts of the brokers' ACL files (brokers with aclEnable=true): list, add, update,
    /// delete, whoami. Needs an admin account (--access-key with RINGMQ_SECRET_KEY), whoami
    /// any account. Secret keys are never printed.
    #[command(subcommand)]
    Acl(AclCmd),
    /// ACL 2.0 users of the brokers (brokers with authenticationEnabled or
    /// authorizationEnabled): create, update, delete, get, list, with RocketMQ 5's AUTH_*
    /// requests. Needs a super user (--access-key USERNAME with RINGMQ_SECRET_KEY = its
    /// password). Passwords are read from a variable or stdin and never printed. Their
    /// policies: `acl policy`.
    #[command(subcommand)]
    User(UserCmd),
    /// Serve a web page of the cluster: brokers, topics, consumer groups with a lag graph,
    /// message lookup, scheduled and transactional state, dead letters with resend.
    ///
    /// The page (plain HTML, CSS and JavaScript built into this binary; nothing is fetched
    /// from elsewhere) reads a JSON API under /api/ that runs the same admin requests as the
    /// other commands. Rates (msg/s) and each group's lag history are computed here, by a
    /// sampler that reads the brokers' counters and offsets every --refresh and keeps
    /// --history of lag. Once listening it prints one line `ringmq dashboard: http://ADDR/`
    /// on stdout; it runs until stopped (Ctrl-C).
    ///
    /// With ACL on the brokers (aclEnable=true) the page asks for an access key and secret
    /// key; every request of that browser session is signed with them, so the brokers decide
    /// what it may see. The credentials given to ringmq-ctl itself (--access-key,
    /// RINGMQ_SECRET_KEY) are used by the sampler only. Without ACL the page needs no login
    /// and uses ringmq-ctl's credentials (if any). The page binds where --listen says and
    /// nowhere else; it has no TLS of its own: keep it on loopback or behind a proxy.
    Dashboard(DashboardArgs),

    /// mqadmin alias of `cluster list`.
    #[command(name = "clusterList")]
    ClusterList(ClusterListArgs),
    /// mqadmin alias of `topic create`/`topic update`: creates the topic, or updates it
    /// where it exists.
    #[command(name = "updateTopic")]
    UpdateTopic(TopicPutArgs),
    /// mqadmin alias of `topic delete`.
    #[command(name = "deleteTopic")]
    DeleteTopic(TopicDeleteArgs),
    /// mqadmin alias of `topic list`.
    #[command(name = "topicList")]
    TopicList(TopicListArgs),
    /// mqadmin alias of `topic route`.
    #[command(name = "topicRoute")]
    TopicRoute(TopicArgs),
    /// mqadmin alias of `topic status`.
    #[command(name = "topicStatus")]
    TopicStatus(TopicArgs),
    /// mqadmin alias of `group progress`.
    #[command(name = "consumerProgress")]
    ConsumerProgress(GroupProgressArgs),
    /// mqadmin alias of `msg id`.
    #[command(name = "queryMsgById")]
    QueryMsgById(MsgIdArgs),
    /// mqadmin alias of `msg key`.
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(MsgKeyArgs),
    /// mqadmin alias of `cluster controller`.
    #[command(name = "getControllerMetaData")]
    GetControllerMetaData(ControllerArgs),
    /// mqadmin alias of `cluster replicas`.
    #[command(name = "getSyncStateSet")]
    GetSyncStateSet(ReplicasArgs),
    /// mqadmin alias of `cluster elect` (the broker set is -b/--broker-name or positional).
    #[command(name = "electMaster")]
    ElectMaster(ElectArgs),
}

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Brokers by cluster and name: address, role, shards, version, messages per second in
    /// and out, disk use, and replication lag (bytes, ms) for slaves.
    ///
    /// Rates come from the brokers' per-shard rates, or from two samples of their counters
    /// `--sample` apart where a broker does not publish rates. JSON: {"brokers": [...]}.
    List(ClusterListArgs),
    /// The controllers' Raft group (controller mode), one row per controller: address, id,
    /// whether it is the leader, its Raft term, last log index and applied index
    /// (CONTROLLER_GET_METADATA_INFO to each).
    ///
    /// A controller that does not answer gets a row with its error (JSON: "error").
    /// JSON: {"controllers": [{"address", "id", "leader", "leader_id", "leader_address",
    /// "term", "last_log_index", "applied_index", "error"}]}.
    Controller(ControllerArgs),
    /// Broker sets as the controllers keep them (controller mode): per set its master (id,
    /// address), master epoch and SyncStateSet with its epoch; per replica its id, address,
    /// whether the leader controller hears from it, epoch, CommitLog bytes and lag (bytes of
    /// CommitLog behind the master).
    ///
    /// Asks the first controller that answers (CONTROLLER_GET_REPLICA_INFO). JSON:
    /// {"sets": [{"cluster", "broker", "master_id", "master_address", "master_epoch",
    /// "sync_state_set", "sync_state_set_epoch"}], "replicas": [{"broker", "id", "address",
    /// "role", "alive", "in_sync", "epoch", "log_bytes", "lag_bytes", "election_priority"}]}.
    Replicas(ReplicasArgs),
    /// Elect a master for a broker set now (controller mode; CONTROLLER_ELECT_MASTER to the
    /// leader controller, following a not-leader answer to the leader it names).
    ///
    /// With --broker-id that broker, which must be alive and in the SyncStateSet (unless the
    /// controllers allow unclean elections); without, the controllers' best candidate.
    /// Prints the set after the election. JSON: {"elected": {...}} with the keys of
    /// `cluster replicas`' "sets".
    Elect(ElectArgs),
}

/// Where the controllers are.
#[derive(Args, Debug)]
pub struct ControllerAddrArgs {
    /// Controllers, `host:port;host:port` (default: the --namesrv list, for controllers
    /// embedded in the name servers).
    #[arg(short = 'a', long = "controller", value_name = "ADDRS")]
    pub controller: Option<String>,
}

#[derive(Args, Debug)]
pub struct ControllerArgs {
    #[command(flatten)]
    pub controllers: ControllerAddrArgs,
}

#[derive(Args, Debug)]
pub struct ReplicasArgs {
    #[command(flatten)]
    pub controllers: ControllerAddrArgs,
    /// Only this broker set (brokerName).
    #[arg(short = 'b', long = "broker-name", value_name = "NAME")]
    pub broker_name: Option<String>,
}

#[derive(Args, Debug)]
pub struct ElectArgs {
    /// The broker set (brokerName).
    #[arg(
        value_name = "BROKER_SET",
        required_unless_present = "broker_name_opt",
        conflicts_with = "broker_name_opt"
    )]
    pub broker_name: Option<String>,
    /// The broker set (mqadmin's -b), instead of BROKER_SET.
    #[arg(short = 'b', long = "broker-name", value_name = "NAME")]
    pub broker_name_opt: Option<String>,
    #[command(flatten)]
    pub controllers: ControllerAddrArgs,
    /// The set's cluster (default: as the controllers know the set).
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
    /// Elect this broker (its brokerId); default: the controllers choose.
    #[arg(long = "broker-id", value_name = "ID")]
    pub broker_id: Option<u64>,
}

#[derive(Args, Debug)]
pub struct ClusterListArgs {
    /// Only this cluster.
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
    /// Time between two counter samples when a broker publishes no rates (0 = no rates).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub sample: Duration,
}

#[derive(Subcommand, Debug)]
pub enum TopicCmd {
    /// Create a topic on every master (default), the masters of one cluster (-c), or one
    /// broker (-b). Fails if a target broker already has it (see `topic update`).
    ///
    /// Waits until the name servers publish the new route. JSON: {"topic": [one row per
    /// broker]}.
    Create(TopicPutArgs),
    /// Change queue counts or permission of an existing topic on the brokers that have it
    /// (or the -c/-b targets). Unspecified settings keep their current values.
    Update(TopicPutArgs),
    /// Delete a topic from its brokers (all masters, or those of -c) and the name servers.
    ///
    /// Stored messages stay on disk until retention removes them. JSON: {"deleted": [...]}.
    Delete(TopicDeleteArgs),
    /// Every topic the name servers know, with its kind (normal, retry, dlq, system).
    /// JSON: {"topics": [...]}.
    List(TopicListArgs),
    /// Where a topic lives: brokers (every replica) and per broker its queue counts,
    /// permission and the shard of each queue. JSON: {"brokers": [...], "queues": [...]}.
    Route(TopicArgs),
    /// Per queue: min and max offset and the store time of the newest message.
    /// JSON: {"queues": [...]}.
    Status(TopicArgs),
}

/// A topic, positional or `-t`.
#[derive(Args, Debug)]
pub struct TopicArgs {
    /// Topic name.
    #[arg(
        value_name = "TOPIC",
        required_unless_present = "topic_opt",
        conflicts_with = "topic_opt"
    )]
    pub topic: Option<String>,
    /// Topic name (mqadmin's -t), instead of TOPIC.
    #[arg(short = 't', long = "topic", value_name = "TOPIC")]
    pub topic_opt: Option<String>,
}

#[derive(Args, Debug)]
pub struct TopicPutArgs {
    #[command(flatten)]
    pub topic: TopicArgs,
    /// Read and write queues per broker (create default: 8).
    #[arg(long, short = 'q', value_name = "N")]
    pub queues: Option<u32>,
    /// Read queues per broker (overrides --queues; mqadmin's -r).
    #[arg(short = 'r', long, value_name = "N")]
    pub read_queues: Option<u32>,
    /// Write queues per broker (overrides --queues; mqadmin's -w).
    #[arg(short = 'w', long, value_name = "N")]
    pub write_queues: Option<u32>,
    /// Permission: rw (6, default), r (4, read only), w (2, write only).
    #[arg(short = 'p', long, value_parser = parse_perm, value_name = "PERM")]
    pub perm: Option<u8>,
    /// Only the masters of this cluster.
    #[arg(short = 'c', long, conflicts_with = "broker")]
    pub cluster: Option<String>,
    /// Only this broker (name, or master address ip:port).
    #[arg(short = 'b', long)]
    pub broker: Option<String>,
}

#[derive(Args, Debug)]
pub struct TopicDeleteArgs {
    #[command(flatten)]
    pub topic: TopicArgs,
    /// Only from the masters of this cluster (and its name server entries).
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
}

#[derive(Args, Debug)]
pub struct TopicListArgs {}

#[derive(Subcommand, Debug)]
pub enum GroupCmd {
    /// Every consumer group the masters know: live members, subscriptions, and topics
    /// with committed offsets (groups without live members too). JSON: {"groups": [...]}.
    List(GroupListArgs),
    /// Per queue: broker max offset, committed offset and lag; the live members and the
    /// queues each owns (average allocation, as the clients compute it).
    ///
    /// Without --topic: every topic the group subscribes to or has offsets for. The group's
    /// retry topic %RETRY%GROUP is always shown beside them when it exists: its lag counts
    /// failed messages that are due again and not yet consumed (retries still waiting for
    /// their delay are in `delay status`). The summary gives TOTAL_LAG (the group's own
    /// topics), RETRY_LAG and DLQ_LAG (dead letters not resent, once `resend-dlq` has
    /// marked %DLQ%GROUP) apart. LAG_AGE is how long the oldest message not consumed has
    /// been stored, in seconds (read as the tools group TOOLS_CONSUMER, which commits
    /// nothing); MAX_LAG_AGE in the summary is the largest over the group's own topics.
    /// JSON: {"queues": [...], "members": [...], "summary": {"group", "member_count",
    /// "total_lag", "retry_lag", "dlq_lag", "max_lag_age_s"}}.
    Progress(GroupProgressArgs),
    /// Move a group's committed offsets of a topic to the earliest or latest message, or
    /// to the first message stored at or after a time; or one queue to an offset
    /// (--offset N --queue Q [--broker B]).
    ///
    /// Stop the group's consumers first: running consumers commit their own positions over
    /// the reset. JSON: {"offsets": [...]}.
    ResetOffset(ResetOffsetArgs),
    /// A group's connections: the consumers of the consumer group and the producers of the
    /// producer group of that name, per master (client ids, as their heartbeats name
    /// them). JSON: {"consumers": [...], "producers": [...]}.
    Connections(GroupArg),
    /// Dead letters of a group: the messages in %DLQ%GROUP (a message goes there after
    /// its group's maxReconsumeTimes failed deliveries), oldest first.
    ///
    /// Per message: its id (MSG_ID, the dead letter's own offset id; UNIQ_KEY, the
    /// producer's id, the same as the original's), the original topic (its RETRY_TOPIC
    /// property), how many times it was reconsumed, when it was dead-lettered (STORE_TIME,
    /// RFC 3339 UTC; JSON "store_time_ms", ms since the epoch), and whether `resend-dlq`
    /// already resent it (at an offset below the group's resend mark). JSON:
    /// {"dead_letters": [...], "summary": {...}}.
    Dlq(DlqArgs),
    /// Put dead letters back into their original topic (the RETRY_TOPIC property): body,
    /// tag, keys, flag and user properties are kept; the copy gets a new message id and
    /// unique key and is delivered to every group subscribed to that topic.
    ///
    /// Without --id: resends the dead letters not resent yet, oldest first, at most --max,
    /// and moves the group's resend mark (its committed offset on %DLQ%GROUP) past them,
    /// so running it again does not resend them twice. With --id: resends the dead letters
    /// with that MSG_ID, UNIQ_KEY or ORIGIN_MESSAGE_ID, whatever the mark (the mark does
    /// not move). The dead letters stay in %DLQ%GROUP until retention removes them.
    /// JSON: {"resent": [...], "summary": {"resent", ...}}.
    ResendDlq(ResendDlqArgs),
    /// Set a group's retry limit on every master (mqadmin's updateSubGroup -r): failed
    /// messages are retried this many times before %DLQ%GROUP when the group's consumers
    /// set no limit of their own (a consumer's max_reconsume_times wins). 0 dead-letters a
    /// failed message at once. Kept in each broker's config/subscriptionGroup.json.
    /// --reset returns the group to the brokers' maxReconsumeTimes (16 by default).
    /// -o true makes the group orderly (mqadmin's updateSubGroup -o, RocketMQ's
    /// consumeMessageOrderly): RocketMQ 5 SDKs of the group are told `fifo` and pop a
    /// queue's messages one after another. An update replaces both settings, as
    /// updateSubGroup does: -r left out is 16, -o left out is false.
    /// JSON: {"brokers": [...]}.
    Update(GroupUpdateArgs),
}

#[derive(Args, Debug)]
pub struct GroupUpdateArgs {
    #[command(flatten)]
    pub group: GroupArg,
    /// Retries before the dead-letter topic (16 when only -o is given).
    #[arg(
        short = 'r',
        long,
        value_name = "N",
        required_unless_present_any = ["reset", "orderly"],
        conflicts_with = "reset"
    )]
    pub retry_max_times: Option<u32>,
    /// Whether the group consumes orderly (false when only -r is given).
    #[arg(short = 'o', long, value_name = "BOOL", conflicts_with = "reset")]
    pub orderly: Option<bool>,
    /// Drop the group's settings: the brokers' default applies again.
    #[arg(long)]
    pub reset: bool,
}

#[derive(Args, Debug)]
pub struct GroupListArgs {}

/// A group, positional or `-g`.
#[derive(Args, Debug)]
pub struct GroupArg {
    /// Consumer group.
    #[arg(
        value_name = "GROUP",
        required_unless_present = "group_opt",
        conflicts_with = "group_opt"
    )]
    pub group: Option<String>,
    /// Consumer group (mqadmin's -g), instead of GROUP.
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    pub group_opt: Option<String>,
}

#[derive(Args, Debug)]
pub struct GroupProgressArgs {
    #[command(flatten)]
    pub group: GroupArg,
    /// Only this topic.
    #[arg(short = 't', long)]
    pub topic: Option<String>,
}

#[derive(Args, Debug)]
pub struct DlqArgs {
    #[command(flatten)]
    pub group: GroupArg,
    /// Show at most this many dead letters (the oldest).
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=DLQ_LIST_MAX as i64))]
    pub max: u32,
}

#[derive(Args, Debug)]
pub struct ResendDlqArgs {
    #[command(flatten)]
    pub group: GroupArg,
    /// Only the dead letters with this id: MSG_ID (as `group dlq` prints it), UNIQ_KEY or
    /// ORIGIN_MESSAGE_ID.
    #[arg(short = 'i', long = "id", value_name = "ID")]
    pub id: Option<String>,
    /// Resend at most this many dead letters (without --id: the oldest not resent yet).
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=DLQ_LIST_MAX as i64))]
    pub max: u32,
}

/// Most dead letters one `group dlq` or `group resend-dlq` handles.
pub const DLQ_LIST_MAX: u32 = 100_000;

#[derive(Args, Debug)]
pub struct ResetOffsetArgs {
    #[command(flatten)]
    pub group: GroupArg,
    /// The topic whose offsets move.
    #[arg(short = 't', long)]
    pub topic: String,
    /// earliest, latest, or a time: ms since the epoch or RFC 3339
    /// (2025-01-31T12:00:00Z, 2025-01-31T13:00:00+01:00).
    #[arg(
        long,
        value_name = "earliest|latest|TIMESTAMP",
        required_unless_present_any = ["timestamp", "offset"],
        conflicts_with_all = ["timestamp", "offset"]
    )]
    pub to: Option<String>,
    /// A time (ms since the epoch or RFC 3339): the same as --to TIMESTAMP (mqadmin's
    /// resetOffsetByTime -s).
    #[arg(long, short = 's', value_name = "TIMESTAMP", conflicts_with = "offset")]
    pub timestamp: Option<String>,
    /// Move one queue (--queue, and --broker when several brokers hold the topic) to this
    /// offset: between the queue's min and max offset.
    #[arg(long, value_name = "N", requires = "queue")]
    pub offset: Option<u64>,
    /// The queue --offset moves.
    #[arg(long, short = 'q', value_name = "Q", requires = "offset")]
    pub queue: Option<u32>,
    /// The broker of the queue --offset moves.
    #[arg(long, short = 'b', value_name = "BROKER", requires = "offset")]
    pub broker: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum MsgCmd {
    /// One message by its offset message id (as `send` and consumers print it): every
    /// field, properties and body. JSON: {"message": {...}}.
    Id(MsgIdArgs),
    /// Messages of a topic by key (KEYS or the unique key), from every broker's index.
    /// JSON: {"messages": [...]}.
    Key(MsgKeyArgs),
    /// Messages of one queue from an offset. JSON: {"messages": [...]}.
    Dump(DumpArgs),
    /// Messages of a topic stored in a time range [--begin, --end), from every queue,
    /// oldest first (each queue's range found with SEARCH_OFFSET_BY_TIMESTAMP, so only it is
    /// read). JSON: {"messages": [...]}.
    Time(MsgTimeArgs),
    /// Withdraw a scheduled message before it is due, by the recall handle its send
    /// printed (RECALL_HANDLE; RocketMQ 5.3's recall). Fails with RECALL_TOO_LATE when the
    /// message was already delivered. JSON: {"recalled": {...}}.
    Recall(RecallArgs),
    /// A message's trace, by its message id (the unique key; an offset message id works
    /// while the broker has the message): its send, every listener call with its reconsume
    /// times, and its dead letter, sorted by time. The records come from the trace topic
    /// that clients with tracing on write (RocketMQ's message trace, readable both ways).
    /// JSON: {"trace": [...]}, each event with "event" (send, consume, dead-letter) and
    /// "time_ms".
    Trace(MsgTraceArgs),
}

#[derive(Args, Debug)]
pub struct RecallArgs {
    /// Topic the message was sent to (must be the handle's).
    #[arg(short = 't', long, value_name = "TOPIC")]
    pub topic: String,
    /// The recall handle `send` printed for the scheduled message.
    #[arg(value_name = "HANDLE")]
    pub handle: String,
}

#[derive(Args, Debug)]
pub struct MsgTimeArgs {
    /// Topic.
    pub topic: String,
    /// Start of the range (stored at or after): ms since the epoch or RFC 3339
    /// (2026-12-04T10:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub begin: String,
    /// End of the range (stored before): ms since the epoch or RFC 3339; default now.
    #[arg(long, value_name = "TIME")]
    pub end: Option<String>,
    /// At most this many messages.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max: u32,
}

#[derive(Args, Debug)]
pub struct MsgIdArgs {
    /// Offset message id (32 hex characters, 56 for IPv6 brokers).
    #[arg(
        value_name = "ID",
        required_unless_present = "id_opt",
        conflicts_with = "id_opt"
    )]
    pub id: Option<String>,
    /// Message id (mqadmin's -i), instead of ID.
    #[arg(short = 'i', long = "msg-id", value_name = "ID")]
    pub id_opt: Option<String>,
}

#[derive(Args, Debug)]
pub struct MsgTraceArgs {
    /// Message id: the unique key (as consumers see msg ids in RocketMQ), or the offset
    /// message id `send` prints.
    #[arg(
        value_name = "ID",
        required_unless_present = "id_opt",
        conflicts_with = "id_opt"
    )]
    pub id: Option<String>,
    /// Message id (mqadmin queryMsgTraceById's -i), instead of ID.
    #[arg(short = 'i', long = "msg-id", value_name = "ID")]
    pub id_opt: Option<String>,
    /// The trace topic (default RMQ_SYS_TRACE_TOPIC).
    #[arg(short = 't', long, value_name = "TOPIC")]
    pub trace_topic: Option<String>,
}

#[derive(Args, Debug)]
pub struct MsgKeyArgs {
    /// TOPIC KEY (or give them with -t and -k).
    #[arg(value_name = "TOPIC KEY", num_args = 0..=2)]
    pub args: Vec<String>,
    /// Topic (mqadmin's -t).
    #[arg(short = 't', long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// Key (mqadmin's -k).
    #[arg(short = 'k', long, value_name = "KEY")]
    pub key: Option<String>,
    /// At most this many messages per broker.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max: u32,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    pub topic: TopicArgs,
    /// Queue id.
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: u32,
    /// First queue offset to print.
    #[arg(long, short = 'o', value_name = "O")]
    pub offset: u64,
    /// How many messages.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub count: u32,
    /// The broker (name or master address) when several have the topic.
    #[arg(short = 'b', long)]
    pub broker: Option<String>,
}

#[derive(Args, Debug)]
pub struct SendArgs {
    /// Topic.
    pub topic: String,
    /// Message body (UTF-8 text).
    pub body: String,
    /// Tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Key (repeatable; indexed for `msg key`).
    #[arg(short = 'k', long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// User property KEY=VALUE (repeatable), e.g. `--property region=eu --property n=7`;
    /// what `consume --sql` filters on.
    #[arg(long = "property", value_name = "KEY=VALUE", value_parser = parse_property)]
    pub properties: Vec<(String, String)>,
    /// Deliver after delay level N of the broker's messageDelayLevel (default 1s 5s 10s
    /// 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h for 1..18; 0 = at once; above the
    /// highest = the highest). See `delay status` for a broker's levels.
    #[arg(long, value_name = "N", conflicts_with_all = ["delay", "deliver_at"])]
    pub delay_level: Option<u32>,
    /// Deliver this long after the broker stores it (`5s`, `250ms`, `2m`, `1h`, `1d`), at
    /// most the broker's timerMaxDelaySec (3 days by default).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", conflicts_with = "deliver_at")]
    pub delay: Option<Duration>,
    /// Deliver at this time: RFC 3339 with offset (2026-12-04T10:00:00Z,
    /// 2026-12-04T11:00:00+01:00) or ms since the epoch; a past time delivers at once. At
    /// most the broker's timerMaxDelaySec (3 days by default) ahead.
    #[arg(long, value_parser = parse_time_ms, value_name = "TIME")]
    pub deliver_at: Option<i64>,
    /// Send to this queue id (of --broker, or of the one broker that has the topic).
    /// Without it the queue is picked as the producer picks: round robin from a random
    /// start across brokers and queues.
    #[arg(short = 'q', long, value_name = "Q", conflicts_with = "sharding_key")]
    pub queue: Option<u32>,
    /// The broker (name) whose queue --queue names, when several have the topic; alone, a
    /// queue of that broker picked round robin.
    #[arg(
        short = 'b',
        long,
        value_name = "NAME",
        conflicts_with = "sharding_key"
    )]
    pub broker: Option<String>,
    /// Ordered send: the queue the producer maps this key to (every message with the same
    /// key goes to the same queue).
    #[arg(long, value_name = "KEY")]
    pub sharding_key: Option<String>,
    /// Trace the send: the producer writes its trace record (RocketMQ's format) to the
    /// trace topic RMQ_SYS_TRACE_TOPIC, for `msg trace UNIQ_KEY`. The broker creates that
    /// topic at the first trace when autoCreateTopicEnable is on; otherwise create it first.
    /// A trace the broker did not store fails the command (the message itself was sent).
    #[arg(long)]
    pub trace: bool,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    /// Topic.
    pub topic: String,
    /// Read from this group's committed offsets (the earliest message where none) and
    /// commit what was printed. Without it: read from the earliest message, commit nothing
    /// and leave nothing on the broker. A queue that cannot be read fails the command.
    #[arg(short = 'g', long)]
    pub group: Option<String>,
    /// Stop after this many messages.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub count: u32,
    /// Stop when no message came for this long.
    #[arg(long, default_value = "3s", value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Duration,
    /// Start every queue at the first message stored at or after this time (ms since the
    /// epoch or RFC 3339), whatever the group committed.
    #[arg(long, value_name = "TIME")]
    pub from_time: Option<String>,
    /// Only messages whose properties match this SQL92 expression (RocketMQ's grammar:
    /// `n > 5 AND region IN ('eu', 'us')`; TAGS is the tag; a missing property never
    /// matches). The broker filters; it needs enablePropertyFilter=true.
    #[arg(long, value_name = "EXPR")]
    pub sql: Option<String>,
}

/// `KEY=VALUE` of `send --property`: a non-empty key before the first `=`.
fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

#[derive(Subcommand, Debug)]
pub enum BrokerCmd {
    /// A broker's runtime status: role, version, uptime, disk use, and per shard its
    /// counters, rates, store size and replication lag. JSON: {"broker": {...},
    /// "shards": [...], "extra": [...]}.
    Status(BrokerArgs),
    /// A broker's effective configuration; with --set, change runtime keys first (an
    /// allow-list: never paths, ports or anything that starts a process) and print the
    /// changed keys. JSON: {"config": [...]}.
    Config(BrokerConfigArgs),
    /// Stop (on) or resume (off) accepting writes: sends answer NO_PERMISSION, reads go on.
    /// Use before taking a broker down. JSON: {"broker": {...}}.
    Readonly(ReadonlyArgs),
}

#[derive(Subcommand, Debug)]
pub enum AclCmd {
    /// Every account of the brokers' ACL files: access key, admin, default and explicit
    /// topic/group permissions, white remote address; `secretKey: <set>`, never the secret
    /// itself. Also the global white remote addresses. Asks every master (default), the
    /// masters of one cluster (-c), or one broker (-b). JSON: {"accounts": [{"broker",
    /// "address", "access_key", "secret_key": "<set>", "admin", ...}], "global_white":
    /// [...]}.
    List(AclTargetArgs),
    /// Add an account to every master's ACL file (or those of -c, or one broker -b); an
    /// existing access key is refused. The secret key comes from an environment variable
    /// (--secret-key-env VAR) or the first line of stdin (--secret-key-stdin), never from
    /// the command line, and is never printed. Without --default-topic-perm and
    /// --default-group-perm an account is denied what it is not granted (an admin: allowed
    /// everything). Says per broker what happened. JSON: {"brokers": [...]}.
    ///
    /// Example: RINGMQ_NEW_SECRET=... ringmq-ctl --access-key root acl add
    /// --access-key-name app --secret-key-env RINGMQ_NEW_SECRET --topic-perm Orders=PUB
    Add(AclAddArgs),
    /// Change an existing account: only the options given (a --topic-perm/--group-perm
    /// sets that one resource, the others stay); --secret-key-env/--secret-key-stdin
    /// replaces its secret key. An unknown access key is refused. JSON: {"brokers": [...]}.
    Update(AclUpdateArgs),
    /// Delete an account. The last admin account and the access key this request is signed
    /// with are refused (so nobody locks themselves out). JSON: {"brokers": [...]}.
    Delete(AclDeleteArgs),
    /// Who the brokers take this client for: its access key, admin flag, default and
    /// explicit permissions (or: anonymous, admitted by the global white list).
    /// JSON: {"whoami": [...]}.
    Whoami(AclTargetArgs),
    /// ACL 2.0 policies (brokers with authenticationEnabled or authorizationEnabled): per
    /// user, entries of resource, actions, source addresses and decision. The verbs above
    /// (list, add, update, delete) are ACL 1.0's plain_acl.yml accounts; these are under
    /// `acl policy`. Needs a super user.
    #[command(subcommand)]
    Policy(PolicyCmd),
}

#[derive(Subcommand, Debug)]
pub enum UserCmd {
    /// Create a user on every master (or -c, or -b). The password comes from
    /// --password-env VAR or the first line of stdin (--password-stdin). Type Normal and
    /// status enable unless given. JSON: {"brokers": [...]}.
    ///
    /// Example: PW=... ringmq-ctl --access-key root user create app --password-env PW
    Create(UserWriteArgs),
    /// Change a user: only what is given (password, --user-type, --user-status). The last
    /// enabled super user cannot be demoted or disabled. JSON: {"brokers": [...]}.
    Update(UserWriteArgs),
    /// Delete a user and its policies. The user this request is signed with and the last
    /// enabled super user are refused. JSON: {"brokers": [...]}.
    Delete(UserNameArgs),
    /// One user (never its password); fails where it does not exist. JSON: {"users": [...]}.
    Get(UserNameArgs),
    /// The users (never their passwords). JSON: {"users": [...]}.
    List(UserListArgs),
}

#[derive(Args, Debug)]
pub struct UserWriteArgs {
    /// The username (the access key its clients sign with).
    #[arg(value_name = "USERNAME")]
    pub username: String,
    /// Read the password from this environment variable (its name, not the password).
    #[arg(long, value_name = "VAR", conflicts_with = "password_stdin")]
    pub password_env: Option<String>,
    /// Read the password from the first line of stdin.
    #[arg(long)]
    pub password_stdin: bool,
    /// Super (may do anything, manages users and policies) or Normal.
    #[arg(long, value_name = "Super|Normal")]
    pub user_type: Option<String>,
    /// enable or disable (a disabled user's requests are refused).
    #[arg(long, value_name = "enable|disable")]
    pub user_status: Option<String>,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct UserNameArgs {
    #[arg(value_name = "USERNAME")]
    pub username: String,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct UserListArgs {
    /// Only usernames containing this.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Add entries to a user's policy (as RocketMQ's mqadmin createAcl): one entry per
    /// --resource, each with --actions, --source-ip and --decision. An entry for a resource
    /// the policy already has is replaced. JSON: {"brokers": [...]}.
    ///
    /// Example: ringmq-ctl --access-key root acl policy create app -r Topic:orders
    /// -r 'Group:billing*' -a Pub,Sub -d Allow
    Create(PolicyWriteArgs),
    /// The same merge as create (RocketMQ 5 answers both alike).
    Update(PolicyWriteArgs),
    /// Delete a user's whole ACL, or one entry (--resource, in --policy-type).
    /// JSON: {"brokers": [...]}.
    Delete(PolicyDeleteArgs),
    /// A user's entries; fails where it has none. JSON: {"entries": [...]}.
    Get(PolicySubjectArgs),
    /// Every user's entries (filters: --subject-filter, --resource-filter).
    /// JSON: {"entries": [...]}.
    List(PolicyListArgs),
}

#[derive(Args, Debug)]
pub struct PolicyWriteArgs {
    /// The subject: User:NAME (or just NAME).
    #[arg(value_name = "SUBJECT")]
    pub subject: String,
    /// Topic:NAME, Topic:PREFIX*, Topic:*, Group:..., Cluster:..., or * (repeatable).
    #[arg(short = 'r', long, value_name = "RESOURCE", required = true)]
    pub resource: Vec<String>,
    /// Pub, Sub, Create, Update, Delete, Get, List, All (comma-separated).
    #[arg(short = 'a', long, value_name = "ACTIONS")]
    pub actions: String,
    /// Allow or Deny.
    #[arg(short = 'd', long, value_name = "Allow|Deny", default_value = "Allow")]
    pub decision: String,
    /// Only requests from this address or CIDR block (repeatable; any when none).
    #[arg(short = 'i', long = "source-ip", value_name = "IP|CIDR")]
    pub source_ip: Vec<String>,
    /// Custom (consulted first) or Default (only when no Custom entry matches).
    #[arg(long, value_name = "Custom|Default", default_value = "Custom")]
    pub policy_type: String,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct PolicyDeleteArgs {
    #[arg(value_name = "SUBJECT")]
    pub subject: String,
    /// Only this entry (else the whole ACL).
    #[arg(short = 'r', long, value_name = "RESOURCE")]
    pub resource: Option<String>,
    /// The policy of --resource: Custom (default) or Default.
    #[arg(long, value_name = "Custom|Default", requires = "resource")]
    pub policy_type: Option<String>,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct PolicySubjectArgs {
    #[arg(value_name = "SUBJECT")]
    pub subject: String,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct PolicyListArgs {
    /// Only subjects containing this.
    #[arg(long, value_name = "TEXT")]
    pub subject_filter: Option<String>,
    /// Only entries whose resource contains this.
    #[arg(long, value_name = "TEXT")]
    pub resource_filter: Option<String>,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// Address to serve the page on, ip:port (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// How often the sampler reads the cluster and the page redraws (`5s`, `500ms`, `1m`; a
    /// bare number is seconds; 1 s to 10 min). Rates in msg/s are the change between two
    /// readings divided by the time between them.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh: Duration,
    /// How much lag history the graph keeps per consumer group (`15m`, `1h`; at most 24 h
    /// and 10,000 readings, i.e. --history / --refresh <= 10000).
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub history: Duration,
}

/// Which brokers an `acl` command asks.
#[derive(Args, Debug)]
pub struct AclTargetArgs {
    /// Only the masters of this cluster.
    #[arg(short = 'c', long, conflicts_with = "broker")]
    pub cluster: Option<String>,
    /// Only this broker: its name (its master) or its address ip:port.
    #[arg(short = 'b', long, value_name = "ADDR")]
    pub broker: Option<String>,
}

/// The fields of an account `acl add` and `acl update` set.
#[derive(Args, Debug)]
pub struct AclAccountArgs {
    /// Read the account's secret key from this environment variable (its name, not the
    /// secret: a secret on the command line stays in the shell's history).
    #[arg(long, value_name = "VAR", conflicts_with = "secret_key_stdin")]
    pub secret_key_env: Option<String>,
    /// Read the account's secret key from the first line of stdin.
    #[arg(long)]
    pub secret_key_stdin: bool,
    /// Make the account an admin (may administer topics, groups, brokers and the ACL).
    #[arg(long, conflicts_with = "no_admin")]
    pub admin: bool,
    /// Make the account a non-admin (update).
    #[arg(long)]
    pub no_admin: bool,
    /// Permission on topics not listed with --topic-perm: DENY, PUB, SUB or PUB|SUB.
    #[arg(long, value_name = "PERM")]
    pub default_topic_perm: Option<String>,
    /// Permission on groups not listed with --group-perm: DENY, SUB (or PUB, PUB|SUB).
    #[arg(long, value_name = "PERM")]
    pub default_group_perm: Option<String>,
    /// TOPIC=PERM, e.g. Orders=PUB or Orders=PUB|SUB (repeatable).
    #[arg(long = "topic-perm", value_name = "TOPIC=PERM")]
    pub topic_perm: Vec<String>,
    /// GROUP=PERM, e.g. billing=SUB (repeatable).
    #[arg(long = "group-perm", value_name = "GROUP=PERM")]
    pub group_perm: Vec<String>,
    /// Where the account may be used from: an address pattern (192.168.1.*, 10.0.0.1-10,
    /// ...); "" removes the restriction (update).
    #[arg(long, value_name = "PATTERN")]
    pub white_remote_address: Option<String>,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Args, Debug)]
pub struct AclAddArgs {
    /// The new account's access key.
    #[arg(long = "access-key-name", value_name = "KEY")]
    pub access_key_name: String,
    #[command(flatten)]
    pub account: AclAccountArgs,
}

#[derive(Args, Debug)]
pub struct AclUpdateArgs {
    /// The access key of the account to change.
    #[arg(value_name = "KEY")]
    pub access_key_name: String,
    #[command(flatten)]
    pub account: AclAccountArgs,
}

#[derive(Args, Debug)]
pub struct AclDeleteArgs {
    /// The access key of the account to delete.
    #[arg(value_name = "KEY")]
    pub access_key_name: String,
    #[command(flatten)]
    pub target: AclTargetArgs,
}

#[derive(Subcommand, Debug)]
pub enum DelayCmd {
    /// What each broker holds scheduled: per delay level its delay and pending messages,
    /// the messages pending with a delivery time (--delay, --deliver-at: the "timer" row),
    /// the next due time (RFC 3339 UTC, and how far away), and how many scheduled
    /// messages it delivered since it started.
    ///
    /// Asks every master (default), the masters of one cluster (-c), or one broker (-b; a
    /// slave too: it keeps a copy of its master's schedule but does not deliver). Notes on
    /// stderr name a broker that did not answer, is still indexing its schedule after a
    /// start (deliveries are late, never early, until it is done), or does not deliver.
    /// JSON: {"brokers": [{"broker", "address", "levels": [{"level", "delay_ms",
    /// "pending"}], "timer_pending", "next_due_ms" (0 = none), "delivered",
    /// "shards_indexing", "delivering", "error"}]}.
    Status(DelayStatusArgs),
}

#[derive(Subcommand, Debug)]
pub enum TxnCmd {
    /// What each broker holds of transactions: per producer group its undecided half
    /// messages and the age of the oldest; per broker the check-backs sent
    /// (CHECK_TRANSACTION_STATE), those counted with no live producer of the group to ask,
    /// halves moved to TRANS_CHECK_MAX_TIME_TOPIC after their last check, commits stored
    /// again after a crash, and its transactionTimeOut / transactionCheckInterval /
    /// transactionCheckMax.
    ///
    /// Counts are since the broker started; a broker refreshes them once per turn of its
    /// check loop (at most 1 s). Asks every master (default), the masters of one cluster
    /// (-c), or one broker (-b; a slave holds copies of the halves, only its master checks).
    /// JSON: {"groups": [{"broker", "address", "producer_group", "pending",
    /// "oldest_stored_ms", "oldest_age_ms"}], "brokers": [{"broker", "address", "pending",
    /// "checks_sent", "checks_unanswerable", "moved_to_check_max", "redone", "timeout_ms",
    /// "check_interval_ms", "check_max", "checking", "error"}]}.
    Status(TxnStatusArgs),
}

/// `txn status` chooses its brokers as `delay status` does.
pub type TxnStatusArgs = DelayStatusArgs;

#[derive(Args, Debug)]
pub struct DelayStatusArgs {
    /// Only the masters of this cluster.
    #[arg(short = 'c', long, conflicts_with = "broker")]
    pub cluster: Option<String>,
    /// Only this broker: its name (its master) or the address ip:port of a master or slave.
    #[arg(short = 'b', long, value_name = "ADDR")]
    pub broker: Option<String>,
}

/// A broker, positional or `-b`.
#[derive(Args, Debug)]
pub struct BrokerArgs {
    /// Broker address (ip:port) or broker name (its master).
    #[arg(
        value_name = "ADDR",
        required_unless_present = "broker_opt",
        conflicts_with = "broker_opt"
    )]
    pub broker: Option<String>,
    /// Broker (mqadmin's -b), instead of ADDR.
    #[arg(short = 'b', long = "broker", value_name = "ADDR")]
    pub broker_opt: Option<String>,
}

#[derive(Args, Debug)]
pub struct BrokerConfigArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// key=value to change (repeatable), e.g. --set brokerPermission=4.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ReadonlyArgs {
    /// [ADDR] on|off (ADDR may be given with -b instead).
    #[arg(value_name = "ADDR on|off", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Broker (mqadmin's -b), instead of ADDR.
    #[arg(short = 'b', long = "broker", value_name = "ADDR")]
    pub broker: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn aliases_take_short_flags() {
        let cli = Cli::try_parse_from([
            "ringmq-ctl",
            "updateTopic",
            "-t",
            "T",
            "-c",
            "C",
            "-n",
            "h:1",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cli.namesrv, "h:1");
        match cli.command {
            Command::UpdateTopic(a) => {
                assert_eq!(a.topic.topic_opt.as_deref(), Some("T"));
                assert_eq!(a.cluster.as_deref(), Some("C"));
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["ringmq-ctl", "topic", "status"]).is_err());
        assert!(
            Cli::try_parse_from(["ringmq-ctl", "consumerProgress", "-g", "G", "-t", "T"]).is_ok()
        );
        assert!(Cli::try_parse_from(["ringmq-ctl", "queryMsgByKey", "-t", "T", "-k", "K"]).is_ok());
    }

    #[test]
    fn controller_commands() {
        let parse = |args: &[&str]| {
            let mut all = vec!["ringmq-ctl"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all)
        };
        match parse(&["cluster", "controller", "--controller", "a:1;b:2"]).map(|c| c.command) {
            Ok(Command::Cluster(ClusterCmd::Controller(a))) => {
                assert_eq!(a.controllers.controller.as_deref(), Some("a:1;b:2"))
            }
            other => panic!("{other:?}"),
        }
        match parse(&["getSyncStateSet", "-a", "a:1", "-b", "broker-a", "--json"]) {
            Ok(cli) => {
                assert!(cli.json);
                match cli.command {
                    Command::GetSyncStateSet(a) => {
                        assert_eq!(a.controllers.controller.as_deref(), Some("a:1"));
                        assert_eq!(a.broker_name.as_deref(), Some("broker-a"));
                    }
                    other => panic!("{other:?}"),
                }
            }
            Err(e) => panic!("{e}"),
        }
        match parse(&[
            "cluster",
            "elect",
            "broker-a",
            "-c",
            "C",
            "--broker-id",
            "2",
        ])
        .map(|c| c.command)
        {
            Ok(Command::Cluster(ClusterCmd::Elect(a))) => {
                assert_eq!(a.broker_name.as_deref(), Some("broker-a"));
                assert_eq!(a.cluster.as_deref(), Some("C"));
                assert_eq!(a.broker_id, Some(2));
                assert_eq!(a.controllers.controller, None, "defaults to --namesrv");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["electMaster", "-b", "broker-a"]).is_ok());
        assert!(
            parse(&["cluster", "elect"]).is_err(),
            "a broker set is required"
        );
        assert!(parse(&["cluster", "elect", "x", "-b", "y"]).is_err());
        assert!(parse(&["cluster", "elect", "x", "--broker-id", "-1"]).is_err());
    }

    #[test]
    fn dead_letter_commands() {
        let parse = |args: &[&str]| {
            let mut all = vec!["ringmq-ctl", "group"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).map(|c| c.command)
        };
        match parse(&["dlq", "billing"]) {
            Ok(Command::Group(GroupCmd::Dlq(a))) => {
                assert_eq!(a.group.group.as_deref(), Some("billing"));
                assert_eq!(a.max, 100);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["resend-dlq", "-g", "billing", "--id", "U1", "--max", "5"]) {
            Ok(Command::Group(GroupCmd::ResendDlq(a))) => {
                assert_eq!(a.group.group_opt.as_deref(), Some("billing"));
                assert_eq!(a.id.as_deref(), Some("U1"));
                assert_eq!(a.max, 5);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["dlq"]).is_err(), "a group is required");
        assert!(parse(&["dlq", "g", "--max", "0"]).is_err());
        assert!(parse(&["resend-dlq", "g", "--max", "100001"]).is_err());
    }

    #[test]
    fn send_schedules_are_exclusive() {
        let send = |extra: &[&str]| {
            let mut args = vec!["ringmq-ctl", "send", "T", "body"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args)
        };
        match send(&["--delay", "250ms"]).map(|c| c.command) {
            Ok(Command::Send(a)) => assert_eq!(a.delay, Some(Duration::from_millis(250))),
            other => panic!("{other:?}"),
        }
        match send(&["--deliver-at", "2026-12-04T10:00:00Z"]).map(|c| c.command) {
            Ok(Command::Send(a)) => assert_eq!(a.deliver_at, Some(1_796_378_400_000)),
            other => panic!("{other:?}"),
        }
        match send(&["--delay-level", "3"]).map(|c| c.command) {
            Ok(Command::Send(a)) => assert_eq!(a.delay_level, Some(3)),
            other => panic!("{other:?}"),
        }
        for pair in [
            &["--delay-level", "1", "--delay", "1s"][..],
            &["--delay-level", "1", "--deliver-at", "1700000000000"],
            &["--delay", "1s", "--deliver-at", "1700000000000"],
        ] {
            let e = send(pair).map(|c| c.command);
            assert!(
                matches!(&e, Err(e) if e.kind() == clap::error::ErrorKind::ArgumentConflict),
                "{pair:?}: {e:?}"
            );
        }
        assert!(send(&["--deliver-at", "2026-12-04T10:00:00"]).is_err());
        assert!(
            Cli::try_parse_from(["ringmq-ctl", "delay", "status", "-c", "C", "-b", "B"]).is_err()
        );
    }
}
