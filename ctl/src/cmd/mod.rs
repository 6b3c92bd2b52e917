//! Command -> admin calls -> [`Report`]. Each file turns one area's results into sections;
//! the calls themselves live in `ringmq_client::admin`.

// Public to the crate so the dashboard's API calls the same functions as the commands.
pub mod acl;
pub mod broker;
pub mod cluster;
pub mod controller;
pub mod delay;
pub mod dlq;
pub mod group;
pub mod msg;
pub mod topic;
pub mod trace;
pub mod txn;
pub mod user;

use ringmq_client::{Admin, ClientConfig};

use crate::cli::{BrokerArgs, Command, GroupArg, TopicArgs};
use crate::error::{CtlError, Result};
use crate::output::Report;

pub use dlq::queue_range;
pub use topic::PutMode;

/// Runs one command.
pub async fn run(admin: &Admin, cfg: &ClientConfig, command: &Command) -> Result<Report> {
    use crate::cli::{
        AclCmd, BrokerCmd, ClusterCmd, DelayCmd, GroupCmd, MsgCmd, PolicyCmd, TopicCmd, TxnCmd,
        UserCmd,
    };
    match command {
        Command::Cluster(ClusterCmd::List(a)) | Command::ClusterList(a) => {
            cluster::list(admin, a).await
        }
        Command::Cluster(ClusterCmd::Controller(a)) | Command::GetControllerMetaData(a) => {
            controller::controller(admin, cfg, a).await
        }
        Command::Cluster(ClusterCmd::Replicas(a)) | Command::GetSyncStateSet(a) => {
            controller::replicas(admin, cfg, a).await
        }
        Command::Cluster(ClusterCmd::Elect(a)) | Command::ElectMaster(a) => {
            controller::elect(admin, cfg, a).await
        }
        Command::Topic(TopicCmd::Create(a)) => topic::put(admin, a, PutMode::Create).await,
        Command::Topic(TopicCmd::Update(a)) => topic::put(admin, a, PutMode::Update).await,
        Command::UpdateTopic(a) => topic::put(admin, a, PutMode::Upsert).await,
        Command::Topic(TopicCmd::Delete(a)) | Command::DeleteTopic(a) => {
            topic::delete(admin, a).await
        }
        Command::Topic(TopicCmd::List(_)) | Command::TopicList(_) => topic::list(admin).await,
        Command::Topic(TopicCmd::Route(a)) | Command::TopicRoute(a) => {
            topic::route(admin, &topic_of(a)).await
        }
        Command::Topic(TopicCmd::Status(a)) | Command::TopicStatus(a) => {
            topic::status(admin, &topic_of(a)).await
        }
        Command::Group(GroupCmd::List(_)) => group::list(admin).await,
        Command::Group(GroupCmd::Progress(a)) | Command::ConsumerProgress(a) => {
            group::progress(admin, &group_of(&a.group), a.topic.as_deref()).await
        }
        Command::Group(GroupCmd::ResetOffset(a)) => group::reset(admin, a).await,
        Command::Group(GroupCmd::Connections(a)) => group::connections(admin, &group_of(a)).await,
        Command::Group(GroupCmd::Dlq(a)) => dlq::list(admin, a).await,
        Command::Group(GroupCmd::ResendDlq(a)) => dlq::resend(admin, cfg, a).await,
        Command::Group(GroupCmd::Update(a)) => group::update(admin, a).await,
        Command::Msg(MsgCmd::Id(a)) | Command::QueryMsgById(a) => msg::by_id(admin, a).await,
        Command::Msg(MsgCmd::Key(a)) | Command::QueryMsgByKey(a) => msg::by_key(admin, a).await,
        Command::Msg(MsgCmd::Dump(a)) => msg::dump(admin, a).await,
        Command::Msg(MsgCmd::Time(a)) => msg::by_time(admin, a).await,
        Command::Msg(MsgCmd::Recall(a)) => msg::recall(cfg, a).await,
        Command::Msg(MsgCmd::Trace(a)) => trace::trace(admin, a).await,
        Command::Send(a) => msg::send(cfg, a).await,
        Command::Consume(a) => msg::consume(admin, cfg, a).await,
        Command::Broker(BrokerCmd::Status(a)) => broker::status(admin, &broker_of(a)).await,
        Command::Broker(BrokerCmd::Config(a)) => broker::config(admin, a).await,
        Command::Broker(BrokerCmd::Readonly(a)) => broker::readonly(admin, a).await,
        Command::Delay(DelayCmd::Status(a)) => delay::status(admin, a).await,
        Command::Txn(TxnCmd::Status(a)) => txn::status(admin, a).await,
        Command::Acl(AclCmd::List(a)) => acl::list(admin, a).await,
        Command::Acl(AclCmd::Add(a)) => acl::add(admin, a).await,
        Command::Acl(AclCmd::Update(a)) => acl::update(admin, a).await,
        Command::Acl(AclCmd::Delete(a)) => acl::delete(admin, a).await,
        Command::Acl(AclCmd::Whoami(a)) => acl::whoami(admin, a).await,
        Command::Acl(AclCmd::Policy(p)) => match p {
            PolicyCmd::Create(a) => user::policy_write(admin, a, false).await,
            PolicyCmd::Update(a) => user::policy_write(admin, a, true).await,
            PolicyCmd::Delete(a) => user::policy_delete(admin, a).await,
            PolicyCmd::Get(a) => user::policy_get(admin, a).await,
            PolicyCmd::List(a) => user::policy_list(admin, a).await,
        },
        Command::User(u) => match u {
            UserCmd::Create(a) => user::user_write(admin, a, false).await,
            UserCmd::Update(a) => user::user_write(admin, a, true).await,
            UserCmd::Delete(a) => user::user_delete(admin, a).await,
            UserCmd::Get(a) => user::user_get(admin, a).await,
            UserCmd::List(a) => user::user_list(admin, a).await,
        },
        // Serves until stopped; main starts it (crate::dashboard), it is not one report.
        Command::Dashboard(_) => Err(usage("dashboard is not a one-shot command")),
    }
}

/// The topic, positional or `-t` (clap makes sure exactly one is there).
pub fn topic_of(a: &TopicArgs) -> String {
    a.topic
        .clone()
        .or_else(|| a.topic_opt.clone())
        .unwrap_or_default()
}

/// The group, positional or `-g`.
pub fn group_of(a: &GroupArg) -> String {
    a.group
        .clone()
        .or_else(|| a.group_opt.clone())
        .unwrap_or_default()
}

/// The broker, positional or `-b`.
pub fn broker_of(a: &BrokerArgs) -> String {
    a.broker
        .clone()
        .or_else(|| a.broker_opt.clone())
        .unwrap_or_default()
}

/// This machine's clock, ms since the epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A usage error.
pub fn usage(s: impl Into<String>) -> CtlError {
    CtlError::Usage(s.into())
}
