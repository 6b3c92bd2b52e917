//! A small blocking RocketMQ remoting client on one connection, built on
//! `ringmq_wire::remoting` (the clients written by others are in `interop/`).

use super::*;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

/// A blocking remoting client on one connection.
pub struct Remoting {
    pub s: TcpStream,
    pub buf: Vec<u8>,
    pub opaque: i32,
    pub st: SerializeType,
}

impl Remoting {
    pub fn connect(addr: SocketAddr, st: SerializeType) -> Self {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connecting");
        s.set_read_timeout(Some(READ_TIMEOUT))
            .expect("a read timeout");
        Remoting {
            s,
            buf: Vec::new(),
            opaque: 0,
            st,
        }
    }

    pub fn call(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> (Command, Vec<u8>) {
        self.try_call(code, ext, body)
            .unwrap_or_else(|e| panic!("remoting request {code}: {e}"))
    }

    pub fn try_call(
        &mut self,
        code: i32,
        ext: &[(&str, &str)],
        body: &[u8],
    ) -> Result<(Command, Vec<u8>), String> {
        self.opaque += 1;
        let fields: BTreeMap<String, String> = ext
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut cmd = Command::request(code, self.opaque, fields);
        cmd.language = ringmq_wire::remoting::Language::Cpp;
        let f = rframe::encode(&cmd, self.st, body).expect("an encodable request");
        self.s.write_all(&f).map_err(|e| e.to_string())?;
        self.read_response(self.opaque)
    }

    pub fn read_response(&mut self, opaque: i32) -> Result<(Command, Vec<u8>), String> {
        loop {
            if let Some(n) =
                rframe::check(&self.buf, rframe::FRAME_BYTES_MAX).expect("a valid frame")
            {
                let frame: Vec<u8> = self.buf.drain(..n).collect();
                let p = rframe::parse(&frame).expect("a parsable frame");
                assert_eq!(
                    p.serialize_type, self.st,
                    "answered in another serialization"
                );
                if p.command.is_response() && p.command.opaque == opaque {
                    return Ok((p.command, p.body.to_vec()));
                }
                continue;
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err("connection closed".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}
