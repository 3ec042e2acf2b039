//! Process checks and signals, without unsafe code (through `nix`).

use std::time::Duration;

use anyhow::Context as _;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

/// Whether a process with this id exists (zombies included): `kill(pid, 0)`
/// succeeds or is refused for lack of permission.
///
/// Once a harness server is dropped its process is gone and reaped, so this
/// returns `false` for its old pid (barring pid reuse).
///
/// # Examples
///
/// ```
/// assert!(redlock_tests::harness::process_exists(std::process::id()));
/// ```
pub fn process_exists(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match signal::kill(Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(errno) => errno == nix::errno::Errno::EPERM,
    }
}

/// Sends `sig` to `pid`.
pub(crate) fn send(pid: u32, sig: Signal) -> anyhow::Result<()> {
    let raw = i32::try_from(pid).context("pid out of range")?;
    signal::kill(Pid::from_raw(raw), sig).with_context(|| format!("sending {sig} to pid {pid}"))
}

/// The one-letter state from `/proc/<pid>/stat` (`R`, `S`, `T` for stopped,
/// `Z` ...), or `None` when the process is gone.
pub(crate) fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": comm may hold spaces and parentheses.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.trim_start().chars().next()
}

/// Waits until the process is stopped by a signal (`stopped`) or no longer
/// stopped (`!stopped`).
pub(crate) fn wait_stopped(pid: u32, stopped: bool) -> anyhow::Result<()> {
    let what = if stopped {
        format!("pid {pid} to stop")
    } else {
        format!("pid {pid} to continue")
    };
    super::wait_until(Duration::from_secs(5), &what, || {
        matches!(state(pid), Some('T' | 't')) == stopped
    })
}
