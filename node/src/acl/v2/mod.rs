//! ACL 2.0, RocketMQ 5's access control: users (the username is the access key and the
//! password the secret key of the signatures every protocol already carries) and, per user,
//! policies of resource / action / source address / decision entries ([`model`], decided by
//! [`eval`], changed by [`ops`]). On when `authenticationEnabled` or `authorizationEnabled`
//! is true; [`crate::acl::Acl`] then asks this module instead of `plain_acl.yml`, so native,
//! remoting and gRPC requests are all judged here.
//!
//! ## Where the users and policies live, and why there
//!
//! One JSON file, `<storePathRootDir>/config/auth.json` (RocketMQ's `UserInfo`s with
//! passwords and `AclInfo`s, and a version), replaced whole on each change: written to a
//! temporary file, fsynced, renamed over the old one, the directory fsynced, and only then
//! put in force and answered SUCCESS. After a kill -9 the broker reads either the old or the
//! new file, never a torn one. A slave copies its master's users and policies the way it
//! copies the topic table: every few seconds it asks AUTH_SNAPSHOT (super users only; the
//! broker signs with its inner credentials) and, when the version differs, replaces its own
//! file the same way. The CommitLog was the other candidate (records of a system topic,
//! replicated by HA): it would need compaction against retention (`fileReservedTime` deletes
//! old segments, and the users with them) and a replay at start; the set is small and
//! changes rarely, so a file is the simpler design that survives a crash.
//!
//! At start: the file is read (a file that does not parse stops the broker, saying why);
//! `initAuthenticationUser` and `innerClientAuthenticationCredentials` are created as super
//! users when absent; with `migrateAuthFromV1Enabled`, each `plain_acl.yml` account whose
//! access key is not a user yet becomes one, with its permissions as policies
//! ([`migrate`]).

pub mod check;
pub mod eval;
mod migrate;
pub mod model;
pub mod ops;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use ringmq_wire::auth::Secret;
use ringmq_wire::command::{AuthSnapshot, UserInfo};
use ringmq_wire::remoting::body::JsonBody;

use model::{Action, Resource, SubjectAcl, User, UserStatus, UserType};

/// File name of the users and policies, under `<storePathRootDir>/config/`.
pub const FILE_NAME: &str = "auth.json";

/// Settings from the broker's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    pub authentication: bool,
    pub authorization: bool,
    /// Request codes served without credentials (`authenticationWhitelist`).
    pub whitelist: Vec<u16>,
    /// `initAuthenticationUser`: created as a super user when absent.
    pub init_user: Option<(String, String)>,
    /// `innerClientAuthenticationCredentials`: created as a super user when absent.
    pub inner_user: Option<(String, String)>,
    /// `migrateAuthFromV1Enabled`: the `plain_acl.yml` to import.
    pub migrate_from: Option<PathBuf>,
    /// `<storePathRootDir>/config`.
    pub dir: PathBuf,
    /// `brokerClusterName`: admin requests are actions on `Cluster:<name>`.
    pub cluster: String,
}

/// Users and ACLs in force.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub version: u64,
    pub users: BTreeMap<String, User>,
    /// Username -> its ACL.
    pub acls: BTreeMap<String, SubjectAcl>,
}

impl State {
    /// Everything, passwords included (the file, and AUTH_SNAPSHOT).
    pub fn snapshot(&self) -> AuthSnapshot {
        AuthSnapshot {
            version: self.version,
            users: self.users.values().map(|u| u.info(true)).collect(),
            acls: self
                .acls
                .iter()
                .map(|(n, a)| a.info(&format!("User:{n}"), ""))
                .collect(),
        }
    }

    pub fn from_snapshot(s: &AuthSnapshot) -> Result<State, String> {
        let mut st = State {
            version: s.version,
            ..State::default()
        };
        for u in &s.users {
            let name = u.username.clone().unwrap_or_default();
            st = ops::create_user(&st, &name, u).map_err(|e| format!("user {name}: {e}"))?;
        }
        for a in &s.acls {
            let subject = a.subject.clone().unwrap_or_default();
            st = ops::put_acl(&st, &subject, a).map_err(|e| format!("{subject}: {e}"))?;
        }
        st.version = s.version;
        Ok(st)
    }
}

/// Why a change was not made.
#[derive(Debug)]
pub enum ChangeError {
    /// The request is refused (the client reads why).
    Refused(String),
    /// The file could not be written; nothing changed.
    Io(String),
}

/// The ACL 2.0 store of one broker.
pub struct Auth {
    settings: AuthSettings,
    state: ArcSwap<State>,
    writes: Mutex<()>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("dir", &self.settings.dir)
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// Reads the file, creates the configured users, migrates `plain_acl.yml` when asked,
    /// and writes the file if anything was added.
    pub fn open(settings: AuthSettings) -> Result<Auth, String> {
        let path = settings.dir.join(FILE_NAME);
        let mut st = match std::fs::read(&path) {
            Ok(bytes) => AuthSnapshot::from_json(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|s| State::from_snapshot(&s))
                .map_err(|e| format!("ACL 2.0 file {}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(format!("ACL 2.0 file {}: {e}", path.display())),
        };
        let before = st.users.len() + st.acls.len();
        for (what, u) in [
            ("initAuthenticationUser", &settings.init_user),
            ("innerClientAuthenticationCredentials", &settings.inner_user),
        ] {
            if let Some((name, password)) = u {
                if !st.users.contains_key(name) {
                    let info = UserInfo {
                        username: Some(name.clone()),
                        password: Some(password.clone()),
                        user_type: Some("Super".to_owned()),
                        user_status: None,
                    };
                    st = ops::create_user(&st, name, &info).map_err(|e| format!("{what}: {e}"))?;
                    log::info!("ACL 2.0: super user {name} created from {what}");
                }
            }
        }
        if let Some(v1) = &settings.migrate_from {
            st = migrate::from_v1(st, v1)?;
        }
        let auth = Auth {
            settings,
            state: ArcSwap::from_pointee(State::default()),
            writes: Mutex::new(()),
        };
        if st.users.len() + st.acls.len() != before {
            st.version += 1;
            auth.persist(&st)?;
        }
        log::info!(
            "ACL 2.0 on (authentication {}, authorization {}): {} user(s), {} ACL(s) from {}",
            auth.settings.authentication,
            auth.settings.authorization,
            st.users.len(),
            st.acls.len(),
            path.display()
        );
        auth.state.store(Arc::new(st));
        Ok(auth)
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    pub fn state(&self) -> Arc<State> {
        self.state.load_full()
    }

    /// The user `name`, when it exists.
    pub fn user(&self, name: &str) -> Option<User> {
        self.state.load().users.get(name).cloned()
    }

    /// Is `name` an enabled user whose password is `secret`? (No copy of the user.)
    pub fn holds_password(&self, name: &str, secret: &Secret) -> bool {
        let st = self.state.load();
        st.users
            .get(name)
            .is_some_and(|u| u.status == UserStatus::Enable && u.password == *secret)
    }

    /// The password (secret key) of an enabled user, for a protocol edge that verifies its
    /// own signatures.
    pub fn secret_of(&self, name: &str) -> Option<Secret> {
        let st = self.state.load();
        let u = st.users.get(name)?;
        (u.status == UserStatus::Enable).then(|| u.password.clone())
    }

    pub fn is_super(&self, name: &str) -> bool {
        self.state
            .load()
            .users
            .get(name)
            .is_some_and(User::is_super)
    }

    /// May `user` do one of `wanted` on `target` from `ip`? Super users may do anything;
    /// with `authorizationEnabled=false` every user may (ringmq still keeps user and policy
    /// management to super users, see [`crate::acl`]).
    pub fn allowed(
        &self,
        user: &str,
        target: &Resource,
        wanted: &[Action],
        ip: Option<IpAddr>,
    ) -> Result<(), String> {
        let st = self.state.load();
        let Some(u) = st.users.get(user) else {
            return Err(format!("User:{user} not found"));
        };
        if u.status == UserStatus::Disable {
            return Err(format!("User:{user} is disabled"));
        }
        if u.user_type == UserType::Super || !self.settings.authorization {
            return Ok(());
        }
        eval::decide(st.acls.get(user), target, wanted, ip).map_err(|why| {
            let from = ip.map_or_else(|| "an unknown address".to_owned(), |ip| ip.to_string());
            format!(
                "User:{user} has no permission to access {} from {from}, {why}",
                target.key()
            )
        })
    }

    /// Applies `change` to the state in force, writes the file, then puts it in force. One
    /// change at a time.
    pub fn change(
        &self,
        change: impl FnOnce(&State) -> Result<State, String>,
    ) -> Result<(), ChangeError> {
        let _one = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.state.load_full();
        let mut next = change(&now).map_err(ChangeError::Refused)?;
        next.version = now.version.wrapping_add(1);
        self.persist(&next).map_err(ChangeError::Io)?;
        self.state.store(Arc::new(next));
        Ok(())
    }

    /// A slave: puts its master's snapshot in force when its version differs. Returns
    /// whether anything changed.
    pub fn replace(&self, snapshot: &AuthSnapshot) -> Result<bool, String> {
        let _one = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        if self.state.load().version == snapshot.version {
            return Ok(false);
        }
        let next = State::from_snapshot(snapshot)?;
        self.persist(&next)?;
        self.state.store(Arc::new(next));
        Ok(true)
    }

    fn persist(&self, st: &State) -> Result<(), String> {
        let path = self.settings.dir.join(FILE_NAME);
        write_atomically(&path, &st.snapshot().to_json())
            .map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

/// Temporary file (owner-only: it holds passwords), fsync, rename, fsync of the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> AuthSettings {
        AuthSettings {
            authentication: true,
            authorization: true,
            whitelist: vec![],
            init_user: Some(("root".into(), "rootpw".into())),
            inner_user: Some(("inner".into(), "innerpw".into())),
            migrate_from: None,
            dir: dir.to_owned(),
            cluster: "c".into(),
        }
    }

    #[test]
    fn changes_survive_a_reopen_and_replace_follows_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let a = Auth::open(settings(dir.path())).unwrap();
        assert!(a.is_super("root") && a.is_super("inner"));
        let info = UserInfo {
            password: Some("apppw".into()),
            ..UserInfo::default()
        };
        a.change(|s| ops::create_user(s, "app", &info)).unwrap();
        let v = a.state().version;
        let b = Auth::open(settings(dir.path())).unwrap();
        assert_eq!(b.state().version, v);
        assert_eq!(b.secret_of("app").unwrap().expose(), "apppw");
        let other = tempfile::tempdir().unwrap();
        let mut s = settings(other.path());
        s.init_user = None;
        s.inner_user = None;
        let slave = Auth::open(s).unwrap();
        assert!(slave.replace(&a.state().snapshot()).unwrap());
        assert!(!slave.replace(&a.state().snapshot()).unwrap());
        assert!(slave.user("app").is_some());
        let lo: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        let t = Resource::literal(model::ResType::Topic, "t");
        assert!(slave.allowed("app", &t, &[Action::Pub], lo).is_err());
        assert!(slave.allowed("root", &t, &[Action::Pub], lo).is_ok());
        std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        assert!(Auth::open(settings(dir.path())).is_err());
    }
}
