//! A bare RocketMQ remoting client for the admin tests: one request, one response, JSON
//! header serialization, on a fresh loopback connection each time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ringmq_client::wire::remoting::ext::ExtFields;
use ringmq_client::wire::remoting::frame::{self, Command, SerializeType};

/// A response: its code, remark, extFields and body as text.
#[derive(Debug)]
pub struct Answer {
    pub code: i32,
    pub remark: String,
    pub ext: ExtFields,
    pub body: String,
}

/// Sends request `code` with `ext` and `body` to `addr`, returns the response.
pub fn call(addr: &str, code: i32, ext: &[(&str, &str)], body: &[u8]) -> Answer {
    let ext: ExtFields = ext.iter().copied().collect();
    let req = Command::request(code, 1, ext);
    let bytes = frame::encode(&req, SerializeType::Json, body).expect("a request encodes");
    let mut s = TcpStream::connect(addr).expect("connecting to the node");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    s.write_all(&bytes).expect("sending the request");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("reading the response length");
    let n = u32::from_be_bytes(len) as usize;
    let mut rest = vec![0u8; n];
    s.read_exact(&mut rest).expect("reading the response");
    let mut whole = len.to_vec();
    whole.extend_from_slice(&rest);
    let parsed = frame::parse(&whole).expect("a response parses");
    Answer {
        code: parsed.command.code,
        remark: parsed.command.remark.clone().unwrap_or_default(),
        ext: parsed.command.ext_fields.clone(),
        body: String::from_utf8_lossy(parsed.body).into_owned(),
    }
}
