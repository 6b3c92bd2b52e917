//! The one place errors become RocketMQ 5 statuses: a native client error (with the
//! broker's status when the broker answered) maps to a `Code`. Where RocketMQ's proxy maps
//! the remoting code (SYSTEM_BUSY, REQUEST_CODE_NOT_SUPPORTED, a missing subscription group)
//! the edge answers the same; where the proxy answers INTERNAL_SERVER_ERROR for a code it
//! does not map, the edge answers the closest specific code (TOPIC_NOT_EXIST is
//! TOPIC_NOT_FOUND, NO_PERMISSION is FORBIDDEN, ...). Every RPC carries its outcome in the
//! response's `Status` (the gRPC status stays OK) except Telemetry, whose stream ends with
//! a gRPC status.

use ringmq_client::wire::code::Status as Wire;
use ringmq_client::Error;

use crate::pb::{Code, Status};

/// `{code, message}`.
pub(crate) fn status(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// `{OK, "OK"}`, as RocketMQ's proxy says it.
pub(crate) fn ok() -> Status {
    status(Code::Ok, "OK")
}

/// The status of a failed native call.
pub(crate) fn from_error(e: &Error) -> Status {
    status(code_of(e), e.to_string())
}

fn code_of(e: &Error) -> Code {
    if let Some(s) = e.status() {
        return code_of_wire(s);
    }
    match e {
        Error::NoRoute { .. } => Code::TopicNotFound,
        Error::InvalidMessage(_) | Error::Config(_) | Error::Encode(_) => Code::BadRequest,
        Error::NotFound { .. } => Code::NotFound,
        Error::Timeout { .. } | Error::RequestTimeout { .. } => Code::ProxyTimeout,
        Error::Busy { .. } | Error::RequestsPending { .. } => Code::TooManyRequests,
        Error::RetriesExhausted { last, .. } => code_of(last),
        _ => Code::InternalServerError,
    }
}

/// A broker's status as RocketMQ's proxy reports the remoting code behind it.
pub(crate) fn code_of_wire(s: Wire) -> Code {
    match s {
        Wire::Success => Code::Ok,
        Wire::SystemBusy | Wire::LimitExceeded => Code::TooManyRequests,
        Wire::FlushDiskTimeout => Code::MasterPersistenceTimeout,
        Wire::FlushSlaveTimeout => Code::SlavePersistenceTimeout,
        Wire::SlaveNotAvailable | Wire::InSyncReplicasNotEnough => Code::HaNotAvailable,
        Wire::MessageIllegal | Wire::MalformedRequest => Code::BadRequest,
        Wire::FrameTooLarge => Code::PayloadTooLarge,
        Wire::NoPermission => Code::Forbidden,
        Wire::TopicNotExist => Code::TopicNotFound,
        Wire::PullNotFound | Wire::QueryNotFound => Code::MessageNotFound,
        Wire::SubscriptionParseFailed => Code::IllegalFilterExpression,
        Wire::SubscriptionNotExist => Code::ConsumerGroupNotFound,
        Wire::InvalidReceiptHandle => Code::InvalidReceiptHandle,
        Wire::RequestCodeNotSupported | Wire::PropertyFilterDisabled => Code::NotImplemented,
        Wire::ProtocolVersionNotSupported => Code::VersionUnsupported,
        _ => Code::InternalServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_statuses_map_as_rocketmq_proxy_maps_them() {
        assert_eq!(code_of_wire(Wire::TopicNotExist), Code::TopicNotFound);
        assert_eq!(code_of_wire(Wire::SystemBusy), Code::TooManyRequests);
        assert_eq!(
            code_of_wire(Wire::InvalidReceiptHandle),
            Code::InvalidReceiptHandle
        );
        assert_eq!(ok().code, Code::Ok as i32);
    }
}
