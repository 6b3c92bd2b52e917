//! What a dashboard API handler answers ([`Answer`]: JSON, or a [`Refusal`]) and the
//! helpers that make one: a command's failure as a 4xx/5xx (a broker's NO_PERMISSION as 403
//! with `"not_allowed": true`), a report with its notes, a required query parameter. Below
//! the routes (`api.rs`), the views (`views.rs`) and the sampler (`sampler.rs`).

use ringmq_client::wire::code::Status;
use ringmq_client::Error as ClientError;
use serde_json::{json, Value};

use super::http::{self, Params, Refusal};
use crate::cli::GroupArg;
use crate::error::CtlError;
use crate::output::Report;

/// JSON, or the error response to send instead.
pub type Answer = Result<Value, Refusal>;

/// Whether a command's failure is the brokers refusing this account.
pub fn not_allowed(e: &CtlError) -> bool {
    match e {
        CtlError::Client {
            source: ClientError::Broker { status, .. },
            ..
        } => *status == Status::NoPermission,
        other => other.to_string().contains("NO_PERMISSION"),
    }
}

/// The answer for a failed command.
pub fn failure(e: &CtlError) -> Refusal {
    let text = e.to_string();
    if not_allowed(e) {
        return Refusal {
            status: 403,
            body: json!({ "error": format!("not allowed: {text}"), "not_allowed": true }),
        };
    }
    let status = match e {
        CtlError::Usage(_) => 400,
        CtlError::Refused(_) => 409,
        CtlError::Client { source, .. } => match source {
            ClientError::NotFound { .. } | ClientError::NoRoute { .. } => 404,
            ClientError::Broker { .. } | ClientError::UnknownStatus { .. } => 409,
            ClientError::InvalidMessage(_) | ClientError::Encode(_) => 400,
            _ => 502,
        },
    };
    Refusal::new(status, &text)
}

/// A report as JSON, with its notes.
pub fn report(r: Result<Report, CtlError>) -> Answer {
    let r = r.map_err(|e| failure(&e))?;
    let mut v = r.to_json();
    if let Some(o) = v.as_object_mut() {
        o.insert("notes".into(), json!(r.notes));
    }
    Ok(v)
}

/// Parameter `name`, which must be given and not empty.
pub fn param<'a>(params: &'a Params, name: &str) -> Result<&'a str, Refusal> {
    match http::param(params, name) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Refusal::new(400, &format!("give ?{name}=..."))),
    }
}

pub fn group_arg(g: &str) -> GroupArg {
    GroupArg {
        group: Some(g.to_string()),
        group_opt: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_permission_is_403() {
        let e = CtlError::Refused("asking who this client is: NO_PERMISSION from x".into());
        assert!(not_allowed(&e));
        assert_eq!(failure(&e).status, 403);
        assert_eq!(failure(&e).body["not_allowed"], true);
        assert_eq!(failure(&CtlError::Usage("x".into())).status, 400);
    }
}
