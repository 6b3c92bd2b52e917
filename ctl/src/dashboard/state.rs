//! What every dashboard request shares ([`State`]: the admin client, sessions, the
//! sampler's samples) and who one runs as ([`Ctx`]). Below the routes (`api.rs`) and the
//! views (`views.rs`).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use ringmq_client::{Admin, ClientConfig};

use super::sampler::Samples;
use super::session::Sessions;

/// What every request shares.
pub struct State {
    /// Built with the credentials ringmq-ctl was started with (the sampler's too).
    pub admin: Admin,
    pub cfg: ClientConfig,
    pub sessions: RefCell<Sessions>,
    pub samples: Rc<RefCell<Samples>>,
    pub refresh: Duration,
    pub history: Duration,
}

/// Who a request runs as.
pub struct Ctx {
    pub admin: Admin,
    pub cfg: ClientConfig,
    /// The session's access key; `None` without ACL.
    pub access_key: Option<String>,
}
