//! `redlock run`: acquire, run the command with the lock kept alive,
//! stop it if the lock is lost, release, exit with its code.

use std::io;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redlock_redis::{Cancel, KeepAlive, Lock, LockError, LostReason, Redlock};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::cli::RunArgs;
use crate::exit::{self, Exit, CANNOT_RUN, LOST, NOT_FOUND, SOFTWARE, UNAVAILABLE};

/// What the main loop waits for.
enum Event {
    Signal(i32),
    Lost(LostReason),
}

/// The longest the main loop waits without looking at the command and the
/// lock's validity (a backstop: exits and losses also come as events).
const TICK: Duration = Duration::from_millis(100);

/// Progress on stderr with `-v`.
struct Progress {
    on: bool,
    key: String,
}

impl Progress {
    fn say(&self, message: std::fmt::Arguments<'_>) {
        if self.on {
            eprintln!("redlock: {}: {message}", self.key);
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Result<u8, Exit> {
    if args.key.is_empty() {
        return Err(Exit::usage("the key must not be empty"));
    }
    redlock_redis::Ttl::new(args.ttl).map_err(|e| Exit::usage(format!("--ttl: {e}")))?;
    let urls = crate::servers::urls(&args.servers)?;
    let progress = Progress {
        on: args.verbose,
        key: args.key.clone(),
    };
    let (events_tx, events) = crossbeam_channel::unbounded();
    let cancel = Cancel::new();
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD])
        .map_err(|e| Exit::new(SOFTWARE, format!("cannot handle signals: {e}")))?;
    let handle = signals.handle();
    {
        let cancel = cancel.clone();
        let events_tx = events_tx.clone();
        std::thread::spawn(move || {
            for signal in signals.forever() {
                let _ = events_tx.send(Event::Signal(signal));
                if signal != SIGCHLD {
                    // Stops a wait for the lock (after the event, which
                    // names the signal); a held lock is not affected.
                    cancel.cancel();
                }
            }
        });
    }
    let locks = crate::servers::connect(&urls, args.node_timeout, args.fencing)?;
    let lock = acquire(&locks, &args, &cancel, &events, &progress, urls.len());
    let lock = match lock {
        Ok(lock) => lock,
        Err(exit) => {
            handle.close();
            return Err(exit);
        }
    };
    let lost_tx = events_tx.clone();
    let policy = KeepAlive::new()
        .max_hold(args.max_hold)
        .on_lost(move |reason| {
            let _ = lost_tx.send(Event::Lost(reason));
        });
    if let Err(e) = lock.keep_alive(policy) {
        let _ = lock.release();
        return Err(Exit::new(
            SOFTWARE,
            format!("cannot keep the lock alive: {e}"),
        ));
    }
    let result = supervise(&lock, &args, &events, &progress);
    handle.close();
    let released = lock.release();
    match &released {
        Ok(()) => progress.say(format_args!("released")),
        // Worth knowing without -v: the lock was gone before the end, or
        // some server missed the release (its key then expires).
        Err(e) => eprintln!("redlock: {}: release: {e}", args.key),
    }
    result
}

/// Waits for the lock as the options say.
fn acquire(
    locks: &Redlock,
    args: &RunArgs,
    cancel: &Cancel,
    events: &Receiver<Event>,
    progress: &Progress,
    n: usize,
) -> Result<Lock, Exit> {
    let start = Instant::now();
    progress.say(format_args!(
        "waiting on {n} servers (quorum {}), ttl {}",
        locks.quorum(),
        humantime::format_duration(args.ttl)
    ));
    let result = if args.no_wait {
        locks.try_lock(args.key.as_str(), args.ttl)
    } else {
        let deadline = args.wait.map(|wait| later(start, wait));
        wait(locks, args, deadline, cancel, progress)
    };
    match result {
        Ok(lock) => {
            progress.say(format_args!(
                "acquired after {}, valid for {}",
                ms(start.elapsed()),
                ms(lock.validity())
            ));
            Ok(lock)
        }
        Err(LockError::Cancelled) => {
            let signal = events
                .try_iter()
                .find_map(|e| match e {
                    Event::Signal(s) if s != SIGCHLD => Some(s),
                    _ => None,
                })
                .unwrap_or(SIGINT);
            Err(Exit::new(
                exit::of_signal(signal),
                format!("{}: interrupted while waiting for the lock", args.key),
            ))
        }
        Err(err) => Err(refusal(&args.key, args.conflict_exit_code, &err)),
    }
}

/// `lock_cancellable` until `deadline`; with `-v`, in slices of a second
/// that report the attempts and the last round.
fn wait(
    locks: &Redlock,
    args: &RunArgs,
    deadline: Option<Instant>,
    cancel: &Cancel,
    progress: &Progress,
) -> Result<Lock, LockError> {
    if !progress.on {
        return locks.lock_cancellable(args.key.as_str(), args.ttl, deadline, cancel);
    }
    let mut attempts: u64 = 0;
    loop {
        let slice = later(Instant::now(), Duration::from_secs(1));
        let until = deadline.map_or(slice, |d| d.min(slice));
        match locks.lock_cancellable(args.key.as_str(), args.ttl, Some(until), cancel) {
            Err(LockError::Timeout { attempts: a, last })
                if deadline.is_none_or(|d| Instant::now() < d) =>
            {
                attempts += u64::from(a);
                progress.say(format_args!(
                    "still waiting: {attempts} attempts; last round: {}",
                    describe(&last)
                ));
            }
            other => return other,
        }
    }
}

fn describe(err: &LockError) -> String {
    match err.report() {
        Some(report) => {
            let mut text = format!(
                "{} granted, {} refused (held by another holder)",
                report.granted(),
                report.refused()
            );
            for failure in report.failures() {
                text.push_str(&format!("; {failure}"));
            }
            text
        }
        None => err.to_string(),
    }
}

/// The exit for a lock that was not acquired.
fn refusal(key: &str, conflict: u8, err: &LockError) -> Exit {
    let last = match err {
        LockError::Timeout { last, .. } => last.as_ref(),
        other => other,
    };
    match last {
        LockError::Contended(_) => Exit::new(
            conflict,
            format!("{key}: held by another holder ({})", describe(err)),
        ),
        LockError::NoQuorum(_) | LockError::ValidityExhausted { .. } => {
            Exit::new(UNAVAILABLE, format!("{key}: no quorum: {err}"))
        }
        LockError::Config(e) => Exit::usage(format!("{key}: {e}")),
        _ => Exit::new(SOFTWARE, format!("{key}: {err}")),
    }
}

/// Runs the command and watches it, the signals and the lock.
fn supervise(
    lock: &Lock,
    args: &RunArgs,
    events: &Receiver<Event>,
    progress: &Progress,
) -> Result<u8, Exit> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Exit::usage("no command after --"))?;
    let mut command = Command::new(program);
    command.args(rest).env("REDLOCK_KEY", &args.key);
    if let Some(token) = lock.fencing_token() {
        command.env("REDLOCK_FENCING_TOKEN", token.to_string());
    }
    let mut child = command.spawn().map_err(|e| {
        let code = if e.kind() == io::ErrorKind::NotFound {
            NOT_FOUND
        } else {
            CANNOT_RUN
        };
        Exit::new(
            code,
            format!("cannot run {}: {e}", program.to_string_lossy()),
        )
    })?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let mut lost: Option<LostReason> = None;
    let mut kill_at: Option<Instant> = None;
    let mut valid_until = later(Instant::now(), lock.validity());
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Exit::new(SOFTWARE, e.to_string()))?
        {
            break status;
        }
        // A loss the keeper reported, or one it could not (the validity
        // ran out first): stop the command.
        if lost.is_none() && (lock.is_lost() || !lock.is_valid()) {
            lost = Some(LostReason::Expired);
            kill_at = Some(stop(pid, lock, args.kill_grace));
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            let _ = child.kill();
            kill_at = None;
        }
        let now = Instant::now();
        let mut wait = TICK;
        if let Some(at) = kill_at {
            wait = wait.min(at.saturating_duration_since(now));
        }
        match events.recv_timeout(wait) {
            Ok(Event::Signal(SIGCHLD)) | Err(RecvTimeoutError::Timeout) => {}
            Ok(Event::Signal(signal)) => {
                // Passed on; the lock is released once the command exits.
                if let Ok(signal) = Signal::try_from(signal) {
                    let _ = kill(pid, signal);
                }
            }
            Ok(Event::Lost(reason)) => {
                if lost.is_none() {
                    lost = Some(reason);
                    kill_at = Some(stop(pid, lock, args.kill_grace));
                }
            }
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
        let until = later(Instant::now(), lock.validity());
        if lost.is_none() && until > valid_until + Duration::from_millis(10) {
            progress.say(format_args!("extended, valid for {}", ms(lock.validity())));
        }
        valid_until = until;
    };
    if let Some(reason) = lost {
        return Err(Exit::new(
            LOST,
            format!(
                "{}: lost the lock while the command ran ({reason}); the command was stopped ({})",
                args.key,
                describe_status(status)
            ),
        ));
    }
    Ok(code_of(status))
}

/// Sends SIGTERM; returns when SIGKILL is due: after the grace, but before
/// the lock's validity ends.
fn stop(pid: Pid, lock: &Lock, grace: Duration) -> Instant {
    let _ = kill(pid, Signal::SIGTERM);
    let validity = lock.validity();
    let before_expiry = validity.saturating_sub(validity / 10);
    later(Instant::now(), grace.min(before_expiry))
}

fn code_of(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(SOFTWARE),
        (None, Some(signal)) => exit::of_signal(signal),
        (None, None) => SOFTWARE,
    }
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(signal) => format!("ended by {signal}"),
            Err(_) => format!("ended by signal {signal}"),
        },
        _ => status.to_string(),
    }
}

fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
