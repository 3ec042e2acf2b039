//! The guardian: a small process that stops the command's process group
//! when `redlock` dies without doing so itself (SIGKILL, the OOM killer, a
//! crash), so that the command never runs on unsupervised after its lock
//! can no longer be kept alive.
//!
//! `redlock run` starts it before the command, as the hidden subcommand
//! `redlock guard` of its own executable, in a process group of its own
//! (so that signals to `redlock`'s group or to the command's do not reach
//! it), with the read end of a pipe as its stdin. Only `redlock` holds the
//! write end (close-on-exec: the command never inherits it), so the kernel
//! closes it when `redlock` ends, however it ends. Over the pipe `redlock`
//! names the process group to watch (`watch PGID`), and says `done` once it
//! has dealt with the command itself. End of file before `done` means
//! `redlock` died: the guardian sends the group SIGTERM (and SIGCONT, so
//! that a stopped process sees it) and, if any of it is left after the
//! grace, SIGKILL.
//!
//! Only safe code: no `pre_exec` hook (a parent-death signal would need
//! one, and would reach the command's own process only, not its children).

use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How often the guardian looks whether the group is gone during the
/// grace.
const POLL: Duration = Duration::from_millis(10);

/// `redlock`'s end: the guardian's pid and the pipe to it.
#[derive(Debug)]
pub(crate) struct Guardian {
    pid: Pid,
    pipe: io::PipeWriter,
}

impl Guardian {
    /// Starts a guardian that gives a watched group `grace` between
    /// SIGTERM and SIGKILL.
    pub(crate) fn start(grace: Duration) -> io::Result<Self> {
        let (reader, pipe) = io::pipe()?;
        let child = Command::new(own_executable()?)
            .arg0("redlock")
            .args(["guard", "--grace"])
            .arg(format!("{}ms", grace.as_millis()))
            .stdin(reader)
            .stdout(Stdio::null())
            .current_dir("/")
            .process_group(0)
            .spawn()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        Ok(Guardian { pid, pipe })
    }

    /// The guardian's process id (it is `redlock`'s child: reaped with the
    /// others).
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// Tells the guardian which process group to stop if `redlock` dies.
    pub(crate) fn watch(&mut self, group: Pid) -> io::Result<()> {
        writeln!(self.pipe, "watch {group}")
    }

    /// Tells the guardian that `redlock` dealt with the command itself: it
    /// exits without touching the group.
    pub(crate) fn stand_down(mut self) {
        let _ = writeln!(self.pipe, "done");
    }
}

/// This process's executable: `/proc/self/exe` on Linux (it works even
/// when the file was replaced or deleted since), else what the OS says.
fn own_executable() -> io::Result<std::path::PathBuf> {
    if cfg!(target_os = "linux") {
        Ok("/proc/self/exe".into())
    } else {
        std::env::current_exe()
    }
}

/// `redlock guard`: reads `watch PGID` and `done` lines from stdin; at end
/// of file before `done`, stops the watched group. Always exits 0.
pub(crate) fn guard(grace: Duration) -> u8 {
    let mut group = None;
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim().split_once(' ') {
            // Never a group id that means something else to kill(2).
            Some(("watch", id)) => group = id.parse::<i32>().ok().filter(|&id| id > 1),
            _ if line.trim() == "done" => return 0,
            _ => {}
        }
    }
    if let Some(group) = group {
        stop_group(Pid::from_raw(group), grace);
    }
    0
}

/// SIGTERM (and SIGCONT) to `group`, then SIGKILL if any of it is left
/// after `grace`.
fn stop_group(group: Pid, grace: Duration) {
    if killpg(group, Signal::SIGTERM).is_err() {
        // Gone already (the usual case when redlock exited on an error).
        return;
    }
    crate::say!(
        "redlock: the redlock running the command ended without stopping it: \
         sent SIGTERM to its process group {group}"
    );
    let _ = killpg(group, Signal::SIGCONT);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if killpg(group, None) == Err(Errno::ESRCH) {
            return;
        }
        std::thread::sleep(POLL);
    }
    if killpg(group, Signal::SIGKILL).is_ok() {
        crate::say!("redlock: sent SIGKILL to process group {group} after {grace:?}");
    }
}
