//! Login sessions of the dashboard (brokers with ACL on): a random token in an `HttpOnly`,
//! `SameSite=Strict` cookie names an [`Admin`] built with the credentials the person typed,
//! held in this process's memory only. A session ends after [`SESSION_IDLE`] without a
//! request, at logout, or when [`SESSIONS_MAX`] are open and a newer one needs room (the
//! least recently used goes). Secrets stay inside the `Admin`'s `ClientConfig`; nothing
//! here prints them.

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringmq_client::{Admin, ClientConfig};

/// Name of the session cookie.
pub const COOKIE: &str = "ringmq_session";
/// A session unused this long is dropped.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Most sessions held at once.
pub const SESSIONS_MAX: usize = 64;
/// Random bytes of a token (hex in the cookie).
const TOKEN_BYTES: usize = 32;

/// One logged-in browser.
pub struct Session {
    pub admin: Admin,
    pub cfg: ClientConfig,
    pub access_key: String,
}

/// Every open session, by token, with when it was last used.
#[derive(Default)]
pub struct Sessions {
    by_token: HashMap<String, (Arc<Session>, Instant)>,
}

impl Sessions {
    /// Keeps a new session; its token. Drops expired sessions, and the least recently used
    /// one when full.
    pub fn open(
        &mut self,
        admin: Admin,
        cfg: ClientConfig,
        access_key: String,
    ) -> std::io::Result<String> {
        self.expire(Instant::now());
        if self.by_token.len() >= SESSIONS_MAX {
            let oldest = self
                .by_token
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(t, _)| t.clone());
            if let Some(t) = oldest {
                self.close(&t);
            }
        }
        let token = random_token()?;
        let s = Session {
            admin,
            cfg,
            access_key,
        };
        self.by_token
            .insert(token.clone(), (Arc::new(s), Instant::now()));
        Ok(token)
    }

    /// The live session of `token`, marked used now.
    pub fn get(&mut self, token: &str, now: Instant) -> Option<Arc<Session>> {
        self.expire(now);
        let (s, used) = self.by_token.get_mut(token)?;
        *used = now;
        Some(Arc::clone(s))
    }

    pub fn close(&mut self, token: &str) {
        if let Some((s, _)) = self.by_token.remove(token) {
            s.admin.close();
        }
    }

    fn expire(&mut self, now: Instant) {
        let dead: Vec<String> = self
            .by_token
            .iter()
            .filter(|(_, (_, used))| now.duration_since(*used) > SESSION_IDLE)
            .map(|(t, _)| t.clone())
            .collect();
        for t in dead {
            self.close(&t);
        }
    }
}

/// `Set-Cookie` value for a new session.
pub fn set_cookie(token: &str) -> String {
    format!(
        "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_IDLE.as_secs()
    )
}

/// `Set-Cookie` value that removes the cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// [`TOKEN_BYTES`] from the kernel's random source, as hex.
fn random_token() -> std::io::Result<String> {
    let mut b = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex() {
        let a = random_token().unwrap_or_default();
        let b = random_token().unwrap_or_default();
        assert_eq!(a.len(), TOKEN_BYTES * 2);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let c = set_cookie(&a);
        assert!(
            c.contains("HttpOnly") && c.contains("SameSite=Strict"),
            "{c}"
        );
    }
}
