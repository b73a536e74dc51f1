//! Progress and cancellation of a build ([`Control`]).
//!
//! A build made with a [`Control`] reports each stage (the child cargo and the crates it
//! compiles, the LLVM passes, the checks) with the time since the build began and the stage's
//! own time, and stops at the next poll (every 20 ms while a child runs, or while it waits for
//! another build of the same files) once [`Control::cancel`] is called: the running child —
//! cargo with every rustc it started, or an LLVM tool — is killed with its whole process
//! group, and the build returns a [`BuildErrorKind::Cancelled`] error. Nothing the build wrote becomes a cache entry then
//! (the stamps and the inline cache's entries are written only after a build completes).
//!
//! Without a `Control` (the default of [`PtxBuilder`](crate::PtxBuilder)), children run as
//! before: in the caller's process group, so that a terminal's Ctrl-C reaches them too.

use crate::{BuildError, BuildErrorKind};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a running child (or a wait for a lock) is polled for cancellation.
pub(crate) const POLL: Duration = Duration::from_millis(20);

type Report = dyn Fn(&str) + Send + Sync;

struct Inner {
    cancelled: AtomicBool,
    report: Box<Report>,
    start: Instant,
    own_group: bool,
}

/// Progress reports and cancellation of one build; cheap to clone (clones share the state).
#[derive(Clone, Default)]
pub struct Control {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("active", &self.inner.is_some())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// The output of a child run through [`Control::output`].
pub(crate) struct Output {
    pub status: ExitStatus,
    #[cfg_attr(not(test), allow(dead_code))]
    pub stdout: Vec<u8>,
    /// Standard error, less the lines the run's filter took.
    pub stderr: Vec<u8>,
}

impl Control {
    /// A control whose progress lines go to `report` (each line without a trailing newline,
    /// e.g. `"[  3.1 s] llc: done in 0.4 s"`). Its children run in process groups of their
    /// own, so that cancelling kills every process they started.
    pub fn new(report: impl Fn(&str) + Send + Sync + 'static) -> Control {
        Control::make(Box::new(report), true)
    }

    /// Like [`new`](Self::new), but the children stay in the caller's process group: a
    /// terminal's Ctrl-C reaches them as it reaches the caller (for a program that lets
    /// SIGINT end it, such as the `ferrocuda` binary).
    pub fn in_caller_group(report: impl Fn(&str) + Send + Sync + 'static) -> Control {
        Control::make(Box::new(report), false)
    }

    fn make(report: Box<Report>, own_group: bool) -> Control {
        Control {
            inner: Some(Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                report,
                start: Instant::now(),
                own_group,
            })),
        }
    }

    /// No progress, no cancellation (the default).
    pub fn none() -> Control {
        Control { inner: None }
    }

    /// Asks the build to stop (from any thread): the running child is killed at the next
    /// poll, and the build returns a [`BuildErrorKind::Cancelled`] error.
    pub fn cancel(&self) {
        if let Some(i) = &self.inner {
            i.cancelled.store(true, Ordering::SeqCst);
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.cancelled.load(Ordering::SeqCst))
    }

    /// `Err(Cancelled)` once cancelled.
    pub fn check(&self) -> Result<(), BuildError> {
        if self.is_cancelled() {
            return Err(cancelled());
        }
        Ok(())
    }

    /// Seconds since the control was made.
    pub fn elapsed(&self) -> f64 {
        self.inner
            .as_ref()
            .map_or(0.0, |i| i.start.elapsed().as_secs_f64())
    }

    /// Reports `line`, prefixed with the elapsed time.
    pub fn report(&self, line: &str) {
        if let Some(i) = &self.inner {
            (i.report)(&format!(
                "[{:6.1} s] {line}",
                i.start.elapsed().as_secs_f64()
            ));
        }
    }

    /// Runs one stage: checks for cancellation, reports `name …`, runs `f`, reports
    /// `name: done in X s` (or `name: failed after X s`).
    pub fn stage<T>(
        &self,
        name: &str,
        f: impl FnOnce() -> Result<T, BuildError>,
    ) -> Result<T, BuildError> {
        self.check()?;
        if self.inner.is_none() {
            return f();
        }
        self.report(&format!("{name} …"));
        let t = Instant::now();
        let out = f();
        let secs = t.elapsed().as_secs_f64();
        match &out {
            Ok(_) => self.report(&format!("{name}: done in {secs:.2} s")),
            Err(e) if e.kind() == BuildErrorKind::Cancelled => {}
            Err(_) => self.report(&format!("{name}: failed after {secs:.2} s")),
        }
        out
    }

    /// Runs `cmd` to completion with its standard output and error captured, like
    /// [`Command::output`], killing it (and its process group) when the build is cancelled.
    /// Each line of standard error for which `take` returns `true` is reported as progress
    /// (through `take` itself) and left out of the returned error text.
    pub(crate) fn output(
        &self,
        cmd: &mut Command,
        take: &mut dyn FnMut(&Control, &str) -> bool,
    ) -> Result<Output, std::io::Error> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.inner.as_ref().is_some_and(|i| i.own_group) {
            own_group(cmd);
        }
        let mut child = cmd.spawn()?;
        let mut out = child.stdout.take();
        let err = child.stderr.take();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let err_reader = std::thread::spawn(move || {
            if let Some(err) = err {
                let mut buf = std::io::BufReader::new(err);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match std::io::BufRead::read_until(&mut buf, b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
                        }
                    }
                }
            }
        });
        let out_reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_end(&mut v);
            }
            v
        });
        let mut stderr = Vec::new();
        let mut handle = |line: String| {
            if !take(self, line.trim_end()) {
                stderr.extend_from_slice(line.as_bytes());
            }
        };
        let status = loop {
            while let Ok(line) = rx.try_recv() {
                handle(line);
            }
            if self.is_cancelled() {
                kill(&mut child, self.inner.as_ref().is_some_and(|i| i.own_group));
                let _ = child.wait();
                // The readers end when the pipes close (not waited for: a process outside the
                // group could hold them open).
                drop((err_reader, out_reader));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    CANCELLED,
                ));
            }
            match child.try_wait()? {
                Some(status) => break status,
                None => {
                    // Wait for a line or the poll interval, whichever comes first.
                    if let Ok(line) = rx.recv_timeout(POLL) {
                        handle(line);
                    }
                }
            }
        };
        let _ = err_reader.join();
        for line in rx.try_iter() {
            handle(line);
        }
        let stdout = out_reader.join().unwrap_or_default();
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

const CANCELLED: &str = "the build was cancelled";

/// The error of a cancelled build.
pub(crate) fn cancelled() -> BuildError {
    BuildError {
        kind: BuildErrorKind::Cancelled,
        message: CANCELLED.into(),
    }
}

/// Whether an I/O error is [`Control::output`]'s cancellation.
pub(crate) fn is_cancel(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted && e.to_string() == CANCELLED
}

#[cfg(unix)]
fn own_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

#[cfg(not(unix))]
fn own_group(_cmd: &mut Command) {}

/// Kills `child` and, on Unix, every process of its group (cargo's rustc and build scripts)
/// when it leads one.
fn kill(child: &mut Child, group: bool) {
    #[cfg(unix)]
    if group {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group the child leads
            // (it was spawned with `process_group(0)`); no memory is involved.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn stages_report_and_cancel_kills_the_group() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let l = lines.clone();
        let c = Control::new(move |m| l.lock().unwrap().push(m.to_string()));
        let got = c.stage("echo", || {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "echo out; echo '   Compiling x' >&2; echo bad >&2"]);
            c.output(&mut cmd, &mut |c, l| {
                let p = l.trim_start().starts_with("Compiling");
                if p {
                    c.report(l.trim());
                }
                p
            })
            .map_err(|e| BuildError {
                kind: BuildErrorKind::Io,
                message: e.to_string(),
            })
        });
        let got = got.unwrap();
        assert!(got.status.success());
        assert_eq!(got.stdout, b"out\n");
        assert_eq!(got.stderr, b"bad\n");
        let seen = lines.lock().unwrap().clone();
        assert!(seen[0].ends_with("] echo …"), "{seen:?}");
        assert!(seen[1].ends_with("] Compiling x"), "{seen:?}");
        assert!(seen[2].contains("echo: done in"), "{seen:?}");

        // A child that starts a grandchild: cancelling kills both, promptly.
        let dir = std::env::temp_dir().join(format!("fc-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("pid");
        let c2 = c.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c2.cancel();
        });
        let t = Instant::now();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let e = c.output(&mut cmd, &mut |_, _| false).err().unwrap();
        canceller.join().unwrap();
        assert!(is_cancel(&e), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(c.check().is_err());
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Gone, or a zombie waiting for its new parent to reap it.
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with(['R', 'S', 'D']))
        });
        assert!(!alive, "the grandchild {pid} survived the cancel");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_control_is_silent_and_never_cancelled() {
        let c = Control::none();
        c.cancel();
        assert!(!c.is_cancelled());
        assert_eq!(c.stage("x", || Ok(3)).unwrap(), 3);
    }
}
