//! One request and its response on a fresh connection, the way a broker calls its name
//! servers and its master: the opener frame first, signed with the broker's own credentials
//! when it has them, over TLS when asked, bounded by [`CALL_TIMEOUT_MS`].

use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;
use ringmq_wire::frame;

use crate::io::net::Conn;
use crate::io::rt;

/// How long one call may take.
pub const CALL_TIMEOUT_MS: u64 = 3_000;

/// One request/response exchange on a fresh connection, bounded by `CALL_TIMEOUT_MS`,
/// signed with `inner` (the broker's `innerAccessKey`) when given, over TLS when `tls` is
/// given (`tls.enable`).
pub async fn call(
    addr: SocketAddr,
    code: RequestCode,
    header: &impl Encode,
    body: &[u8],
    inner: Option<&ringmq_wire::auth::Credentials>,
    tls: Option<&crate::io::tls::TlsClient>,
) -> Result<(Status, Vec<u8>, Vec<u8>), String> {
    let mut out = ringmq_wire::command::opener_frame("ringmq-broker");
    let mut request = Vec::new();
    frame::encode_request(&mut request, code, false, 1, header, body).map_err(|e| e.to_string())?;
    if let Some(creds) = inner {
        let mut signer = crate::acl::signer(creds);
        let now = u64::try_from(crate::io::clock::now_ms()).unwrap_or(0);
        signer.sign(&mut out, now).map_err(|e| e.to_string())?;
        signer.sign(&mut request, now).map_err(|e| e.to_string())?;
    }
    out.extend_from_slice(&request);
    let exchange = async {
        let conn = Conn::connect_with(addr, tls)
            .await
            .map_err(|e| e.to_string())?;
        let (res, _) = conn.write_all(out).await;
        res.map_err(|e| e.to_string())?;
        let mut buf = Vec::with_capacity(4096);
        loop {
            if let Some(n) =
                frame::check(&buf, frame::FRAME_BYTES_MAX).map_err(|e| e.to_string())?
            {
                let f = frame::parse(&buf[..n]).map_err(|e| e.to_string())?;
                if f.request_id == ringmq_wire::command::OPENER_REQUEST_ID {
                    buf.drain(..n);
                    continue;
                }
                let status = f.status().map_err(|e| e.to_string())?;
                let header = f.header.to_vec();
                let body = f.body.to_vec();
                return Ok((status, header, body));
            }
            buf.reserve(4096);
            let (res, b) = conn.read_append(buf).await;
            buf = b;
            match res {
                Ok(0) => return Err("connection closed before the reply".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    rt::timeout(Duration::from_millis(CALL_TIMEOUT_MS), exchange)
        .await
        .unwrap_or_else(|| Err(format!("no reply within {CALL_TIMEOUT_MS} ms")))
}
