//! `apache.rocketmq.v2.MessagingService` on ringmq: each RPC handed to the module that
//! serves it, with the native clients it needs. The edge's state is its native clients
//! (one producer, one POP consumer, one admin client, all asking the local broker's name
//! servers for routes, and reaching the local broker in process) and the registry of gRPC clients' Settings.
//!
//! Served: QueryRoute, Heartbeat, SendMessage, QueryAssignment, ReceiveMessage,
//! AckMessage, ChangeInvisibleDuration, Telemetry, NotifyClientTermination,
//! RecallMessage, EndTransaction, ForwardMessageToDeadLetterQueue, PullMessage,
//! UpdateOffset, GetOffset, QueryOffset. SyncLiteSubscription answers the gRPC status
//! UNIMPLEMENTED.

use std::pin::Pin;
use std::sync::Arc;

use ringmq_client::consumer::EdgeConsumer;
use ringmq_client::{Admin, Producer};
use tokio_stream::Stream;
use tonic::{Request, Response, Status as GrpcStatus, Streaming};

use crate::clients::Clients;
use crate::groups::Groups;
use crate::offsets::{get_offset, query_offset, update_offset};
use crate::pb::{self, messaging_service_server::MessagingService, ClientType, Code};
use crate::pull::pull_message;
use crate::receive::{
    ack_message, change_invisible_duration, forward_to_dead_letter, group_name, receive_message,
};
use crate::renew::Renewals;
use crate::route::{query_assignment, query_route};
use crate::send::{recall_message, send_message};
use crate::status::{ok, status};
use crate::telemetry::{telemetry, Outbound};
use crate::transaction::Transactions;

/// The header that names the client.
pub(crate) const CLIENT_ID_HEADER: &str = "x-mq-client-id";

/// The edge: its native clients and what it knows of its gRPC clients.
pub(crate) struct Edge {
    pub(crate) producer: Producer,
    pub(crate) consumer: EdgeConsumer,
    pub(crate) admin: Admin,
    pub(crate) clients: Arc<Clients>,
    /// Consumer groups' orderly flags and retry limits, as the brokers keep them.
    pub(crate) groups: Arc<Groups>,
    pub(crate) transactions: Arc<Transactions>,
    /// The `auto_renew` messages the edge keeps invisible.
    pub(crate) renewals: Arc<Renewals>,
    /// This edge's gRPC address, as routes name it.
    pub(crate) endpoints: pb::Endpoints,
}

type Stream2<T> = Pin<Box<dyn Stream<Item = Result<T, GrpcStatus>> + Send + 'static>>;

fn client_id<T>(req: &Request<T>) -> Option<String> {
    req.metadata()
        .get(CLIENT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .filter(|s| !s.is_empty())
}

fn client_id_required() -> pb::Status {
    status(Code::ClientIdRequired, "x-mq-client-id is required")
}

#[tonic::async_trait]
impl MessagingService for Edge {
    async fn query_route(
        &self,
        req: Request<pb::QueryRouteRequest>,
    ) -> Result<Response<pb::QueryRouteResponse>, GrpcStatus> {
        let r = query_route(&self.admin, &self.endpoints, req.into_inner()).await;
        Ok(Response::new(r))
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, GrpcStatus> {
        let answer = |s| Ok(Response::new(pb::HeartbeatResponse { status: Some(s) }));
        let Some(id) = client_id(&req) else {
            return answer(client_id_required());
        };
        let Some(settings) = self.clients.touch(&id) else {
            return answer(status(
                Code::UnrecognizedClientType,
                "cannot find client settings for this client",
            ));
        };
        let kind = settings.client_type.unwrap_or_default();
        let consumer =
            kind == ClientType::PushConsumer as i32 || kind == ClientType::SimpleConsumer as i32;
        if consumer {
            if let Err(s) = group_name(req.get_ref().group.as_ref()) {
                return answer(s);
            }
        } else if kind != ClientType::Producer as i32 {
            return answer(status(
                Code::UnrecognizedClientType,
                format!("client type {kind} is not served"),
            ));
        }
        answer(ok())
    }

    async fn send_message(
        &self,
        req: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, GrpcStatus> {
        let peer = req.remote_addr();
        Ok(Response::new(
            send_message(&self.producer, &self.transactions, req.into_inner(), peer).await,
        ))
    }

    async fn query_assignment(
        &self,
        req: Request<pb::QueryAssignmentRequest>,
    ) -> Result<Response<pb::QueryAssignmentResponse>, GrpcStatus> {
        let r = query_assignment(&self.admin, &self.endpoints, req.into_inner()).await;
        Ok(Response::new(r))
    }

    type ReceiveMessageStream = Stream2<pb::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        req: Request<pb::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, GrpcStatus> {
        let client = client_id(&req);
        let out = receive_message(
            &self.consumer,
            &self.renewals,
            &self.groups,
            client.as_deref(),
            req.into_inner(),
        )
        .await;
        Ok(Response::new(Box::pin(tokio_stream::iter(
            out.into_iter().map(Ok),
        ))))
    }

    async fn ack_message(
        &self,
        req: Request<pb::AckMessageRequest>,
    ) -> Result<Response<pb::AckMessageResponse>, GrpcStatus> {
        Ok(Response::new(
            ack_message(&self.consumer, &self.renewals, req.into_inner()).await,
        ))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        req: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<pb::ForwardMessageToDeadLetterQueueResponse>, GrpcStatus> {
        Ok(Response::new(
            forward_to_dead_letter(&self.consumer, &self.renewals, req.into_inner()).await,
        ))
    }

    type PullMessageStream = Stream2<pb::PullMessageResponse>;

    async fn pull_message(
        &self,
        req: Request<pb::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, GrpcStatus> {
        let out = pull_message(&self.consumer, req.into_inner()).await;
        Ok(Response::new(Box::pin(tokio_stream::iter(
            out.into_iter().map(Ok),
        ))))
    }

    async fn update_offset(
        &self,
        req: Request<pb::UpdateOffsetRequest>,
    ) -> Result<Response<pb::UpdateOffsetResponse>, GrpcStatus> {
        Ok(Response::new(
            update_offset(&self.admin, req.into_inner()).await,
        ))
    }

    async fn get_offset(
        &self,
        req: Request<pb::GetOffsetRequest>,
    ) -> Result<Response<pb::GetOffsetResponse>, GrpcStatus> {
        Ok(Response::new(
            get_offset(&self.admin, req.into_inner()).await,
        ))
    }

    async fn query_offset(
        &self,
        req: Request<pb::QueryOffsetRequest>,
    ) -> Result<Response<pb::QueryOffsetResponse>, GrpcStatus> {
        Ok(Response::new(
            query_offset(&self.admin, req.into_inner()).await,
        ))
    }

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Result<Response<pb::EndTransactionResponse>, GrpcStatus> {
        Ok(Response::new(self.transactions.end(req.into_inner()).await))
    }

    type TelemetryStream = Outbound;

    async fn telemetry(
        &self,
        req: Request<Streaming<pb::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, GrpcStatus> {
        let Some(id) = client_id(&req) else {
            return Err(GrpcStatus::invalid_argument("x-mq-client-id is required"));
        };
        Ok(Response::new(telemetry(
            Arc::clone(&self.clients),
            id,
            req.into_inner(),
        )))
    }

    async fn notify_client_termination(
        &self,
        req: Request<pb::NotifyClientTerminationRequest>,
    ) -> Result<Response<pb::NotifyClientTerminationResponse>, GrpcStatus> {
        let answer = |s| {
            Ok(Response::new(pb::NotifyClientTerminationResponse {
                status: Some(s),
            }))
        };
        let Some(id) = client_id(&req) else {
            return answer(client_id_required());
        };
        match self.clients.remove(&id) {
            Some(_) => answer(ok()),
            None => answer(status(
                Code::UnrecognizedClientType,
                "cannot find client settings for this client",
            )),
        }
    }

    async fn change_invisible_duration(
        &self,
        req: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<pb::ChangeInvisibleDurationResponse>, GrpcStatus> {
        Ok(Response::new(
            change_invisible_duration(&self.consumer, &self.renewals, req.into_inner()).await,
        ))
    }

    async fn recall_message(
        &self,
        req: Request<pb::RecallMessageRequest>,
    ) -> Result<Response<pb::RecallMessageResponse>, GrpcStatus> {
        Ok(Response::new(
            recall_message(&self.producer, req.into_inner()).await,
        ))
    }

    async fn sync_lite_subscription(
        &self,
        _req: Request<pb::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<pb::SyncLiteSubscriptionResponse>, GrpcStatus> {
        Err(GrpcStatus::unimplemented(
            "lite topics are not served by ringmq",
        ))
    }
}
