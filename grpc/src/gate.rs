//! The door every RPC passes with ACL on: authenticates the caller from the request's headers
//! and peer address, authorizes what the request touches, then hands it to the edge
//! ([`Edge`]). Without an [`Authority`] (ACL off) every request goes straight through.
//!
//! What each RPC needs, as RocketMQ's proxy asks it (ringmq's native table for the same
//! requests agrees): SendMessage, EndTransaction and RecallMessage PUB on the topic;
//! ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
//! QueryAssignment, PullMessage, UpdateOffset and GetOffset SUB on the group and the topic;
//! QueryOffset SUB on the topic; Heartbeat of a consumer and NotifyClientTermination with a
//! group SUB on the group; Telemetry's Settings PUB on each published topic, or SUB on the
//! group and each subscribed topic. QueryRoute needs only an authenticated caller, as the
//! native route request does.
//!
//! A refusal is the response's `Status`: UNAUTHORIZED when the caller is not authenticated,
//! FORBIDDEN when it may not do what it asks (the gRPC status stays OK). ReceiveMessage and
//! PullMessage answer a stream of that one status; Telemetry ends its stream with the gRPC
//! status UNAUTHENTICATED or PERMISSION_DENIED.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use tonic::{Request, Response, Status as GrpcStatus, Streaming};

use crate::auth::{
    Authority, Caller, Need, Perm, Resource, Signature, AUTHORIZATION_HEADER, DATE_TIME_HEADER,
};
use crate::pb::{self, messaging_service_server::MessagingService, ClientType, Code};
use crate::service::{Edge, CLIENT_ID_HEADER};
use crate::status::status;
use crate::telemetry::{self, Outbound, SettingsCheck};

/// The edge behind its door.
pub(crate) struct Gate {
    pub(crate) edge: Edge,
    pub(crate) authority: Option<Arc<dyn Authority>>,
}

/// Why a request was refused.
enum Refused {
    Unauthenticated(String),
    Forbidden(String),
}

impl Refused {
    fn status(&self) -> pb::Status {
        match self {
            Refused::Unauthenticated(m) => status(Code::Unauthorized, m.clone()),
            Refused::Forbidden(m) => status(Code::Forbidden, m.clone()),
        }
    }

    fn grpc(&self) -> GrpcStatus {
        match self {
            Refused::Unauthenticated(m) => GrpcStatus::unauthenticated(m.clone()),
            Refused::Forbidden(m) => GrpcStatus::permission_denied(m.clone()),
        }
    }
}

/// A response that carries its outcome in a `status` field.
trait WithStatus: Default {
    fn refused(s: pb::Status) -> Self;
}

macro_rules! with_status {
    ($($t:ty),* $(,)?) => {$(
        impl WithStatus for $t {
            #[allow(clippy::needless_update)]
            fn refused(s: pb::Status) -> Self {
                Self { status: Some(s), ..Default::default() }
            }
        }
    )*};
}

with_status!(
    pb::QueryRouteResponse,
    pb::HeartbeatResponse,
    pb::SendMessageResponse,
    pb::QueryAssignmentResponse,
    pb::AckMessageResponse,
    pb::ForwardMessageToDeadLetterQueueResponse,
    pb::UpdateOffsetResponse,
    pb::GetOffsetResponse,
    pb::QueryOffsetResponse,
    pb::EndTransactionResponse,
    pb::NotifyClientTerminationResponse,
    pb::ChangeInvisibleDurationResponse,
    pb::RecallMessageResponse,
    pb::SyncLiteSubscriptionResponse,
);

type Stream2<T> =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, GrpcStatus>> + Send + 'static>>;

impl Gate {
    /// Authenticates and authorizes `req` for `rpc`.
    fn admit<T>(&self, req: &Request<T>, rpc: &str, need: Need) -> Result<(), Refused> {
        let Some(authority) = &self.authority else {
            return Ok(());
        };
        let caller = authenticate(authority.as_ref(), req)?;
        authority
            .authorize(&caller, rpc, need)
            .map_err(Refused::Forbidden)
    }
}

fn authenticate<T>(authority: &dyn Authority, req: &Request<T>) -> Result<Caller, Refused> {
    let header = |name| req.metadata().get(name).and_then(|v| v.to_str().ok());
    let signature = Signature::from_headers(header(AUTHORIZATION_HEADER), header(DATE_TIME_HEADER))
        .map_err(Refused::Unauthenticated)?;
    let peer: IpAddr = req
        .remote_addr()
        .map(|a| a.ip())
        .ok_or_else(|| Refused::Unauthenticated("the peer's address is unknown".into()))?;
    authority
        .authenticate(peer, signature.as_ref())
        .map_err(Refused::Unauthenticated)
}

fn name(r: Option<&pb::Resource>) -> String {
    r.map(|r| r.name.clone()).unwrap_or_default()
}

fn queue_topic(q: Option<&pb::MessageQueue>) -> String {
    name(q.and_then(|q| q.topic.as_ref()))
}

fn sub(group: String, topic: String) -> Need {
    Need::Access(vec![
        (Resource::Group(group), Perm::Sub),
        (Resource::Topic(topic), Perm::Sub),
    ])
}

fn publish(topic: String) -> Need {
    Need::Access(vec![(Resource::Topic(topic), Perm::Pub)])
}

/// What a Telemetry Settings needs: PUB on each published topic, or SUB on the group and
/// each subscribed topic.
pub(crate) fn settings_need(s: &pb::Settings) -> Need {
    use pb::settings::PubSub;
    let mut v = Vec::new();
    match &s.pub_sub {
        Some(PubSub::Publishing(p)) => {
            for t in &p.topics {
                v.push((Resource::Topic(t.name.clone()), Perm::Pub));
            }
        }
        Some(PubSub::Subscription(sb)) => {
            v.push((Resource::Group(name(sb.group.as_ref())), Perm::Sub));
            for e in &sb.subscriptions {
                v.push((Resource::Topic(name(e.topic.as_ref())), Perm::Sub));
            }
        }
        None => {}
    }
    if v.is_empty() {
        Need::Authenticated
    } else {
        Need::Access(v)
    }
}

/// Refuses with `$resp`'s status, or goes on.
macro_rules! admit {
    ($self:ident, $req:ident, $rpc:literal, $need:expr) => {
        if let Err(r) = $self.admit(&$req, $rpc, $need) {
            return Ok(Response::new(WithStatus::refused(r.status())));
        }
    };
}

#[tonic::async_trait]
impl MessagingService for Gate {
    async fn query_route(
        &self,
        req: Request<pb::QueryRouteRequest>,
    ) -> Result<Response<pb::QueryRouteResponse>, GrpcStatus> {
        admit!(self, req, "QueryRoute", Need::Authenticated);
        self.edge.query_route(req).await
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, GrpcStatus> {
        let r = req.get_ref();
        let consumer = [
            ClientType::PushConsumer,
            ClientType::SimpleConsumer,
            ClientType::PullConsumer,
        ]
        .iter()
        .any(|t| *t as i32 == r.client_type);
        let need = if consumer {
            Need::Access(vec![(Resource::Group(name(r.group.as_ref())), Perm::Sub)])
        } else {
            Need::Authenticated
        };
        admit!(self, req, "Heartbeat", need);
        self.edge.heartbeat(req).await
    }

    async fn send_message(
        &self,
        req: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, GrpcStatus> {
        let topics: BTreeSet<String> = req
            .get_ref()
            .messages
            .iter()
            .map(|m| name(m.topic.as_ref()))
            .collect();
        let need = if topics.is_empty() {
            Need::Authenticated
        } else {
            Need::Access(
                topics
                    .into_iter()
                    .map(|t| (Resource::Topic(t), Perm::Pub))
                    .collect(),
            )
        };
        admit!(self, req, "SendMessage", need);
        self.edge.send_message(req).await
    }

    async fn query_assignment(
        &self,
        req: Request<pb::QueryAssignmentRequest>,
    ) -> Result<Response<pb::QueryAssignmentResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(name(r.group.as_ref()), name(r.topic.as_ref()));
        admit!(self, req, "QueryAssignment", need);
        self.edge.query_assignment(req).await
    }

    type ReceiveMessageStream = Stream2<pb::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        req: Request<pb::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(
            name(r.group.as_ref()),
            queue_topic(r.message_queue.as_ref()),
        );
        if let Err(refused) = self.admit(&req, "ReceiveMessage", need) {
            let one = pb::ReceiveMessageResponse {
                content: Some(pb::receive_message_response::Content::Status(
                    refused.status(),
                )),
            };
            return Ok(Response::new(Box::pin(tokio_stream::iter([Ok(one)]))));
        }
        self.edge.receive_message(req).await
    }

    async fn ack_message(
        &self,
        req: Request<pb::AckMessageRequest>,
    ) -> Result<Response<pb::AckMessageResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(name(r.group.as_ref()), name(r.topic.as_ref()));
        admit!(self, req, "AckMessage", need);
        self.edge.ack_message(req).await
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        req: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<pb::ForwardMessageToDeadLetterQueueResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(name(r.group.as_ref()), name(r.topic.as_ref()));
        admit!(self, req, "ForwardMessageToDeadLetterQueue", need);
        self.edge.forward_message_to_dead_letter_queue(req).await
    }

    type PullMessageStream = Stream2<pb::PullMessageResponse>;

    async fn pull_message(
        &self,
        req: Request<pb::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(
            name(r.group.as_ref()),
            queue_topic(r.message_queue.as_ref()),
        );
        if let Err(refused) = self.admit(&req, "PullMessage", need) {
            let one = pb::PullMessageResponse {
                content: Some(pb::pull_message_response::Content::Status(refused.status())),
            };
            return Ok(Response::new(Box::pin(tokio_stream::iter([Ok(one)]))));
        }
        let inner = self.edge.pull_message(req).await?;
        Ok(Response::new(Box::pin(inner.into_inner())))
    }

    async fn update_offset(
        &self,
        req: Request<pb::UpdateOffsetRequest>,
    ) -> Result<Response<pb::UpdateOffsetResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(
            name(r.group.as_ref()),
            queue_topic(r.message_queue.as_ref()),
        );
        admit!(self, req, "UpdateOffset", need);
        self.edge.update_offset(req).await
    }

    async fn get_offset(
        &self,
        req: Request<pb::GetOffsetRequest>,
    ) -> Result<Response<pb::GetOffsetResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(
            name(r.group.as_ref()),
            queue_topic(r.message_queue.as_ref()),
        );
        admit!(self, req, "GetOffset", need);
        self.edge.get_offset(req).await
    }

    async fn query_offset(
        &self,
        req: Request<pb::QueryOffsetRequest>,
    ) -> Result<Response<pb::QueryOffsetResponse>, GrpcStatus> {
        let topic = queue_topic(req.get_ref().message_queue.as_ref());
        let need = Need::Access(vec![(Resource::Topic(topic), Perm::Sub)]);
        admit!(self, req, "QueryOffset", need);
        self.edge.query_offset(req).await
    }

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, GrpcStatus> {
        let need = publish(name(req.get_ref().topic.as_ref()));
        admit!(self, req, "EndTransaction", need);
        self.edge.end_transaction(req).await
    }

    type TelemetryStream = Outbound;

    async fn telemetry(
        &self,
        req: Request<Streaming<pb::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, GrpcStatus> {
        let Some(authority) = &self.authority else {
            return self.edge.telemetry(req).await;
        };
        let caller = authenticate(authority.as_ref(), &req).map_err(|r| r.grpc())?;
        let id = req
            .metadata()
            .get(CLIENT_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let Some(id) = id else {
            return Err(GrpcStatus::invalid_argument("x-mq-client-id is required"));
        };
        let authority = Arc::clone(authority);
        let check: SettingsCheck = Box::new(move |s: &pb::Settings| {
            authority
                .authorize(&caller, "Telemetry", settings_need(s))
                .map_err(|m| Refused::Forbidden(m).grpc())
        });
        Ok(Response::new(telemetry::telemetry_checked(
            Arc::clone(&self.edge.clients),
            id,
            req.into_inner(),
            Some(check),
        )))
    }

    async fn notify_client_termination(
        &self,
        req: Request<pb::NotifyClientTerminationRequest>,
    ) -> Result<Response<pb::NotifyClientTerminationResponse>, GrpcStatus> {
        let need = match &req.get_ref().group {
            Some(g) if !g.name.is_empty() => {
                Need::Access(vec![(Resource::Group(g.name.clone()), Perm::Sub)])
            }
            _ => Need::Authenticated,
        };
        admit!(self, req, "NotifyClientTermination", need);
        self.edge.notify_client_termination(req).await
    }

    async fn change_invisible_duration(
        &self,
        req: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<pb::ChangeInvisibleDurationResponse>, GrpcStatus> {
        let r = req.get_ref();
        let need = sub(name(r.group.as_ref()), name(r.topic.as_ref()));
        admit!(self, req, "ChangeInvisibleDuration", need);
        self.edge.change_invisible_duration(req).await
    }

    async fn recall_message(
        &self,
        req: Request<pb::RecallMessageRequest>,
    ) -> Result<Response<pb::RecallMessageResponse>, GrpcStatus> {
        let need = publish(name(req.get_ref().topic.as_ref()));
        admit!(self, req, "RecallMessage", need);
        self.edge.recall_message(req).await
    }

    async fn sync_lite_subscription(
        &self,
        req: Request<pb::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<pb::SyncLiteSubscriptionResponse>, GrpcStatus> {
        admit!(self, req, "SyncLiteSubscription", Need::Authenticated);
        self.edge.sync_lite_subscription(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_need_what_their_client_does() {
        use pb::settings::PubSub;
        let topic = |n: &str| pb::Resource {
            name: n.into(),
            ..Default::default()
        };
        let p = pb::Settings {
            pub_sub: Some(PubSub::Publishing(pb::Publishing {
                topics: vec![topic("a"), topic("b")],
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(
            settings_need(&p),
            Need::Access(vec![
                (Resource::Topic("a".into()), Perm::Pub),
                (Resource::Topic("b".into()), Perm::Pub)
            ])
        );
        let s = pb::Settings {
            pub_sub: Some(PubSub::Subscription(pb::Subscription {
                group: Some(topic("g")),
                subscriptions: vec![pb::SubscriptionEntry {
                    topic: Some(topic("t")),
                    ..Default::default()
                }],
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(settings_need(&s), sub("g".into(), "t".into()));
    }
}
