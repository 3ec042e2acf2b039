//! The command in a process group of its own: spawned as the group's
//! leader, signalled as a group (`kill(-pgid)`), reaped with every other
//! child of `redlock`, and given the terminal while it runs.
//!
//! A group of its own is what lets a lost lock, `--max-hold` and the
//! signals `redlock` passes on reach the command's children too (a shell
//! script's commands, `make`'s jobs), not only the process `redlock`
//! started. On Linux `redlock` is also a child subreaper while the command
//! runs, so children the command leaves behind are re-parented to it; it
//! reaps them, and so can tell when the group is empty.
//!
//! **The terminal.** A group that is not the terminal's foreground group
//! is stopped (SIGTTIN) when it reads from the terminal. So when `redlock`
//! runs in the foreground of its terminal, it makes the command's group
//! the foreground group (Ctrl-C then reaches the command from the terminal
//! directly, as it would without `redlock`) and takes the terminal back
//! when the command ends. When the command is stopped from the terminal
//! (Ctrl-Z, or reading from it while `redlock` is in the background),
//! `redlock` takes the terminal back and stops itself with the same
//! signal, so that the shell sees its job stopped. When continued (`fg`,
//! `bg`: `redlock` handles SIGCONT) it gives the terminal back to the
//! command's group if it is in the foreground again, and continues the
//! command; one stopped for reading the terminal only once it has the
//! terminal, since it would stop again at once.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{self, killpg, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, tcgetpgrp, tcsetpgrp, Pid};

/// How the command's own process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited with this code.
    Code(i32),
    /// Signal number `N` ended it.
    Signal(i32),
}

/// Something [`reap`] found out about a child of `redlock`.
#[derive(Debug)]
pub(crate) enum Reaped {
    /// The child ended.
    Ended(Pid, Ended),
    /// The child was stopped by this signal.
    Stopped(Pid, Signal),
}

/// The running command's process group.
#[derive(Debug)]
pub(crate) struct Group {
    /// The command's pid, which is also the group's id.
    leader: Pid,
    /// The terminal, while the group is its foreground group.
    terminal: Option<Terminal>,
}

impl Group {
    /// Spawns `command` as the leader of a new process group, and gives it
    /// the terminal if `redlock` is in the terminal's foreground.
    pub(crate) fn spawn(command: &mut Command) -> io::Result<Self> {
        #[cfg(target_os = "linux")]
        let _ = nix::sys::prctl::set_child_subreaper(true);
        let child = command.process_group(0).spawn()?;
        let leader = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let mut group = Group {
            leader,
            terminal: None,
        };
        group.take_terminal();
        Ok(group)
    }

    /// The command's pid and the group's id.
    pub(crate) fn leader(&self) -> Pid {
        self.leader
    }

    /// Sends `signal` to every process of the group.
    pub(crate) fn signal(&self, signal: Signal) {
        let _ = killpg(self.leader, signal);
    }

    /// Whether no process of the group is left (a zombie not yet reaped
    /// counts as left).
    pub(crate) fn is_empty(&self) -> bool {
        killpg(self.leader, None) == Err(Errno::ESRCH)
    }

    /// The command was stopped by `signal`. A stop from the terminal
    /// (SIGTSTP, SIGTTIN, SIGTTOU) stops `redlock` too, with the terminal
    /// given back to its group; once continued, `redlock` continues the
    /// command (see [`Group::resume`]). A SIGTTIN or SIGTTOU while the
    /// group has the terminal came from the moment before it got it: the
    /// group is only continued. Other stops (SIGSTOP) are left to whoever
    /// sent them. Returns false when the command was left stopped.
    pub(crate) fn stopped(&mut self, signal: Signal) -> bool {
        if !matches!(signal, Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
            return true;
        }
        if signal != Signal::SIGTSTP && self.has_terminal() {
            self.signal(Signal::SIGCONT);
            return true;
        }
        self.give_back_terminal();
        // Stops all of redlock until SIGCONT (`fg`, `bg`); the lock is not
        // kept alive meanwhile. The kernel discards it when redlock's group
        // is orphaned (no job control above it).
        let _ = signal::raise(signal);
        self.resume(signal == Signal::SIGTSTP)
    }

    /// `redlock` was continued: gives the group the terminal if `redlock`
    /// is in the foreground, and continues the group if it has the
    /// terminal, or `anyway` (after Ctrl-Z: `bg` continues it in the
    /// background). A command stopped for reading the terminal is not
    /// continued without it (it would stop again at once). Returns whether
    /// it was continued.
    pub(crate) fn resume(&mut self, anyway: bool) -> bool {
        self.take_terminal();
        if anyway || self.has_terminal() {
            self.signal(Signal::SIGCONT);
            true
        } else {
            false
        }
    }

    /// Whether the group is the terminal's foreground group.
    fn has_terminal(&self) -> bool {
        self.terminal
            .as_ref()
            .is_some_and(|t| t.foreground() == Some(self.leader))
    }

    /// Gives the terminal back to `redlock`'s group, if the command's group
    /// has it.
    pub(crate) fn give_back_terminal(&mut self) {
        if let Some(terminal) = self.terminal.take() {
            terminal.give_to(getpgrp());
        }
    }

    /// Makes the command's group the foreground group of `redlock`'s
    /// terminal, when `redlock`'s group is the foreground group now.
    fn take_terminal(&mut self) {
        if self.terminal.is_some() {
            return;
        }
        if let Some(terminal) = Terminal::ours() {
            if terminal.give_to(self.leader) {
                self.terminal = Some(terminal);
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.give_back_terminal();
    }
}

/// `redlock`'s controlling terminal (`/dev/tty`, whichever of the standard
/// streams are redirected).
#[derive(Debug)]
struct Terminal(std::fs::File);

impl Terminal {
    /// The controlling terminal, when `redlock`'s group is its foreground
    /// group.
    fn ours() -> Option<Terminal> {
        let terminal = Terminal(std::fs::File::open("/dev/tty").ok()?);
        (terminal.foreground() == Some(getpgrp())).then_some(terminal)
    }

    /// The terminal's foreground process group.
    fn foreground(&self) -> Option<Pid> {
        tcgetpgrp(&self.0).ok()
    }

    /// Makes `group` the foreground group; true when it worked. SIGTTOU is
    /// blocked meanwhile: a background group may then set it too (the
    /// kernel would otherwise stop `redlock` for trying).
    fn give_to(&self, group: Pid) -> bool {
        let mut ttou = SigSet::empty();
        ttou.add(Signal::SIGTTOU);
        let mut before = SigSet::empty();
        let blocked =
            signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut before)).is_ok();
        let set = tcsetpgrp(&self.0, group);
        if blocked {
            let _ = signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
        }
        set.is_ok()
    }
}

/// Every change of state among `redlock`'s children (the command, the
/// guardian, and the command's orphans adopted as subreaper) so far,
/// reaping those that ended. Never blocks.
pub(crate) fn reap() -> Vec<Reaped> {
    let mut seen = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)) {
            Ok(WaitStatus::Exited(pid, code)) => seen.push(Reaped::Ended(pid, Ended::Code(code))),
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                seen.push(Reaped::Ended(pid, Ended::Signal(signal as i32)));
            }
            Ok(WaitStatus::Stopped(pid, signal)) => seen.push(Reaped::Stopped(pid, signal)),
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return seen,
            Err(Errno::EINTR) | Ok(_) => {}
            Err(_) => return seen,
        }
    }
}
