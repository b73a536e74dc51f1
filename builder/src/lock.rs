//! Exclusive file locks between builds that write the same files: two processes (or two
//! threads) building one kernel crate into one target directory, two `ferrocuda build`s of one
//! crate, two inline builds of one kernel, two downloads of the nvcc wheel.
//!
//! A lock is the OS's advisory lock on a `.lock` file (`flock` on Unix): released when its
//! [`File`] is dropped or the process ends, however it ends, so it is never stale, and the
//! file itself stays (removing it would let a third locker lock a file the second one no
//! longer sees). It is waited for by polling [`File::try_lock`] through the build's
//! [`Control`], so that a cancel ends the wait at once, and a progress line says what the
//! build waits for.
//!
//! Lock order, so that no two builds wait for each other: a build takes its locks outermost
//! first (a `ferrocuda build`'s or an inline kernel's, then the kernel crate's, then the nvcc
//! wheel's), and never runs anything that waits for one of them — the child cargo, which waits
//! for cargo's own lock of the target directory, runs inside them and holds nothing of ours.

use crate::control::{Control, POLL};
use crate::{BuildError, BuildErrorKind};
use std::fs::{File, TryLockError};
use std::path::Path;

/// Takes the exclusive lock of `path` (created, with its directory, when missing) and returns
/// the file holding it: the lock lasts until the file is dropped. While another process or
/// thread holds it, reports `waiting` once and waits, polling, until it is released or the
/// build is cancelled (a [`BuildErrorKind::Cancelled`] error).
pub(crate) fn exclusive(path: &Path, control: &Control, waiting: &str) -> Result<File, BuildError> {
    let io = |what: &str, p: &Path, e: std::io::Error| BuildError {
        kind: BuildErrorKind::Io,
        message: format!("cannot {what} {}: {e}", p.display()),
    };
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| io("create", d, e))?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io("open", path, e))?;
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) => {
                control.check()?;
                if !told {
                    control.report(waiting);
                    told = true;
                }
                std::thread::sleep(POLL);
            }
            Err(TryLockError::Error(e)) => return Err(io("lock", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    fn scratch(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("ferrocuda-lock-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_locker_waits_for_the_first() {
        let dir = scratch("wait");
        let path = dir.join("sub").join("k.lock");
        let first = exclusive(&path, &Control::none(), "unused").unwrap();
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let l = lines.clone();
        let control = Control::new(move |m| l.lock().unwrap().push(m.to_string()));
        let released = Arc::new(Mutex::new(None::<Instant>));
        let r = released.clone();
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            *r.lock().unwrap() = Some(Instant::now());
            drop(first);
        });
        let second = exclusive(&path, &control, "waiting for another build of k").unwrap();
        let got = Instant::now();
        holder.join().unwrap();
        let released = released
            .lock()
            .unwrap()
            .expect("the first lock was released");
        assert!(got >= released, "the second locker did not wait");
        let seen = lines.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(
            seen[0].ends_with("] waiting for another build of k"),
            "{seen:?}"
        );
        // Held now: a third locker (another open file, as another process has) must wait.
        let third = File::options().write(true).open(&path).unwrap();
        assert!(matches!(third.try_lock(), Err(TryLockError::WouldBlock)));
        drop(second);
        // Released with it — once no process holds a copy of the descriptor: another test's
        // child, forked meanwhile, holds one until its `exec` closes it (close-on-exec).
        let free = (0..200).any(|_| {
            third.try_lock().is_ok() || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(free, "the lock was not released with its guard");
        drop(third);
        // Free: taken at once, nothing reported.
        let quiet = Arc::new(Mutex::new(0));
        let q = quiet.clone();
        let c = Control::new(move |_| *q.lock().unwrap() += 1);
        drop(exclusive(&path, &c, "unused").unwrap());
        assert_eq!(*quiet.lock().unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cancel_ends_the_wait() {
        let dir = scratch("cancel");
        let path = dir.join("k.lock");
        let held = exclusive(&path, &Control::none(), "unused").unwrap();
        let control = Control::new(|_| {});
        let c = control.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c.cancel();
        });
        let t = Instant::now();
        let e = exclusive(&path, &control, "waiting").unwrap_err();
        canceller.join().unwrap();
        assert_eq!(e.kind(), BuildErrorKind::Cancelled, "{e}");
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // The holder keeps its lock; once released, an uncancelled control takes it.
        drop(held);
        drop(exclusive(&path, &Control::new(|_| {}), "unused").unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
