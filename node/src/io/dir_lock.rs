//! One process per data directory: an exclusive `flock` on the file `lock` in the directory
//! (RocketMQ's `storePathRootDir/lock`), taken without waiting when a node starts and held
//! until it exits. Two processes on one store would append to the same CommitLog segments
//! and overwrite each other's checkpoints; the second one is refused at start instead.
//!
//! The kernel drops a `flock` when the last descriptor of its file closes, and a dying
//! process closes all of its own, `kill -9` included: a lock file left behind never blocks
//! the next start. The file holds the holder's pid, for the refusal's message only.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Name of the lock file in a locked directory.
pub const LOCK_FILE_NAME: &str = "lock";

/// A held directory lock; released on drop (or when the process ends).
pub struct DirLock {
    _file: Flock<File>,
    path: PathBuf,
}

impl std::fmt::Debug for DirLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirLock").field("path", &self.path).finish()
    }
}

/// Locks `dir` (created if missing) for this process. `what` names the directory in the
/// refusal (`data directory`, `controller directory`).
pub fn lock(dir: &Path, what: &str) -> Result<DirLock, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{what} {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_FILE_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut held) => {
            // The pid is a courtesy for the message above; failing to write it is harmless.
            let _ = held
                .set_len(0)
                .and_then(|()| writeln!(&mut *held, "{}", std::process::id()));
            Ok(DirLock { _file: held, path })
        }
        Err((_, Errno::EWOULDBLOCK)) => {
            let holder = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
                .map_or_else(String::new, |pid| format!(" (pid {pid})"));
            Err(format!(
                "{what} {} is in use by another process{holder}: one process per directory \
                 (its lock file {} is held)",
                dir.display(),
                path.display()
            ))
        }
        Err((_, e)) => Err(format!("locking {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let first = lock(&root, "data directory").unwrap();
        let pid = std::fs::read_to_string(root.join(LOCK_FILE_NAME)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // flock locks belong to the open file, so a second open in this process conflicts
        // as another process's would.
        let refused = lock(&root, "data directory").unwrap_err();
        assert!(
            refused.contains("is in use by another process"),
            "{refused}"
        );
        assert!(
            refused.contains(&format!("(pid {})", std::process::id())),
            "{refused}"
        );
        drop(first);
        let again = lock(&root, "data directory").unwrap();
        drop(again);
    }
}
