//! `redlock run`: acquire, run the command (in a process group of its
//! own, see [`crate::group`]) with the lock kept alive, stop the group if
//! the lock is lost, release, exit with the command's code. With
//! `--limit K` the lock is one of the K permits of the semaphore KEY, a
//! lock of its own (`KEY␟permit:i`, ␟ being U+001F), so all the rest is the same.

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use nix::sys::signal::Signal;
use redlock_redis::{
    Cancel, Identity, KeepAlive, Lock, LockError, LostReason, Permit, Redlock, Semaphore,
};
use signal_hook::consts::{SIGCHLD, SIGCONT, SIGINT};
use signal_hook::iterator::Signals;

use crate::cli::{ElectArgs, RunArgs};
use crate::exit::{self, Exit, CANNOT_RUN, LOST, NOT_FOUND, SOFTWARE, UNAVAILABLE};
use crate::group::{self, Ended, Group, Reaped};
use crate::guard::Guardian;
use crate::waiting::{self, Watcher};

/// What the main loop waits for.
enum Event {
    Signal(i32),
    Lost(LostReason),
}

/// The longest the main loop waits without looking at the command and the
/// lock's validity (a backstop: exits and losses also come as events).
const TICK: Duration = Duration::from_millis(100);

/// After SIGKILL to the command's group on a lost lock, how long `redlock`
/// waits for the last of it to be gone (a process in an uninterruptible
/// sleep dies late) before it exits anyway, saying so.
const GROUP_GONE: Duration = Duration::from_secs(10);

/// Progress on stderr with `-v`.
struct Progress {
    on: bool,
    key: String,
}

/// What `run` waits for: the lock KEY, or a permit of the semaphore KEY.
enum Target {
    Lock,
    Permit(Semaphore),
}

/// The lock held, and which permit it is with `--limit`.
struct Held {
    lock: Lock,
    slot: Option<u32>,
}

impl Held {
    fn lock(lock: Lock) -> Self {
        Held { lock, slot: None }
    }

    fn permit(permit: Permit) -> Self {
        let slot = Some(permit.slot());
        Held {
            lock: permit.into_lock(),
            slot,
        }
    }

    /// "" or " permit i of K" (numbered from 0), for the progress messages.
    fn which(&self, args: &RunArgs) -> String {
        match (self.slot, args.limit) {
            (Some(slot), Some(k)) => format!(" permit {slot} of {k}"),
            _ => String::new(),
        }
    }
}

impl Progress {
    fn say(&self, message: std::fmt::Arguments<'_>) {
        if self.on {
            crate::say!("redlock: {}: {message}", self.key);
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Result<u8, Exit> {
    run_once(args).0
}

/// `redlock elect NAME -- COMMAND`: `run` on the lock NAME with fencing
/// and no bound on the hold (the leadership of the library's
/// `Redlock::election`, a kept-alive fenced lock on the name, its term the
/// fencing token), the term in `REDLOCK_TERM`; with `--again`, once more
/// after each end, until a signal stops redlock.
pub(crate) fn elect(args: &ElectArgs) -> Result<u8, Exit> {
    let run_args = RunArgs {
        servers: args.servers.clone(),
        ttl: args.ttl,
        wait: args.wait,
        no_quorum_timeout: args.no_quorum_timeout,
        no_wait: false,
        conflict_exit_code: exit::CONFLICT,
        // A leader leads until it loses or its command ends.
        max_hold: Duration::MAX,
        kill_grace: args.kill_grace,
        fencing: true,
        identity: args.identity.clone(),
        limit: None,
        verbose: args.verbose,
        node_timeout: args.node_timeout,
        key: args.name.clone(),
        command: args.command.clone(),
        term: true,
    };
    loop {
        let (result, interrupted) = run_once(run_args.clone());
        let again = match &result {
            // The command ended, or the leadership was lost: again.
            Ok(_) => true,
            Err(exit) => exit.code == LOST,
        };
        if !args.again || interrupted || !again {
            return result;
        }
        if let Err(exit) = &result {
            crate::say!("redlock: {}", exit.message);
        }
    }
}

/// [`run`], and whether a signal for redlock itself came meanwhile.
fn run_once(args: RunArgs) -> (Result<u8, Exit>, bool) {
    let cancel = Cancel::new();
    let result = run_with(args, &cancel);
    (result, cancel.is_cancelled())
}

fn run_with(args: RunArgs, cancel: &Cancel) -> Result<u8, Exit> {
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
    // Before any handler: the signals ignored at start stay ignored.
    let passed_on = crate::signals::to_handle();
    let mut signals = Signals::new(passed_on.iter().copied().chain([SIGCHLD, SIGCONT]))
        .map_err(|e| Exit::new(SOFTWARE, format!("cannot handle signals: {e}")))?;
    let handle = signals.handle();
    {
        let cancel = cancel.clone();
        let events_tx = events_tx.clone();
        std::thread::spawn(move || {
            for signal in signals.forever() {
                let _ = events_tx.send(Event::Signal(signal));
                if passed_on.contains(&signal) {
                    // Stops a wait for the lock (after the event, which
                    // names the signal); a held lock is not affected.
                    cancel.cancel();
                }
            }
        });
    }
    // Checked here, not by the parser, which would echo a bad value raw.
    let identity = args
        .identity
        .as_deref()
        .map(Identity::new)
        .transpose()
        .map_err(|e| Exit::usage(e.to_string()))?;
    let (hook, rounds) = waiting::hook();
    let locks = crate::servers::connect(
        &urls,
        args.node_timeout,
        args.fencing,
        identity,
        Arc::new(hook.clone()),
    )?;
    let target = match args.limit {
        None => Target::Lock,
        Some(k) => Target::Permit(
            locks
                .semaphore(&args.key, k)
                .map_err(|e| Exit::usage(format!("{}: {e}", args.key)))?,
        ),
    };
    let watch = Watch {
        hook: &hook,
        rounds,
        cancel,
    };
    let held = acquire(
        &locks,
        &target,
        &args,
        watch,
        &events,
        &progress,
        urls.len(),
    );
    let Held { lock, slot } = match held {
        Ok(held) => held,
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
    let result = supervise(&lock, slot, &args, &events, &progress);
    handle.close();
    let released = lock.release();
    match &released {
        Ok(()) => progress.say(format_args!(
            "released{}",
            slot.map_or_else(String::new, |slot| format!(" permit {slot}"))
        )),
        // Worth knowing without -v: the lock was gone before the end, or
        // some server missed the release (its key then expires).
        Err(e) => crate::say!("redlock: {}: release: {e}", args.key),
    }
    result
}

/// What a wait is watched with: the manager's event hook, the rounds it
/// passes on, and the wait's cancel handle.
struct Watch<'a> {
    hook: &'a waiting::Hook,
    rounds: Receiver<waiting::Seen>,
    cancel: &'a Cancel,
}

/// Waits for the lock (or a permit) as the options say.
fn acquire(
    locks: &Redlock,
    target: &Target,
    args: &RunArgs,
    watch: Watch<'_>,
    events: &Receiver<Event>,
    progress: &Progress,
    n: usize,
) -> Result<Held, Exit> {
    let cancel = watch.cancel;
    let start = Instant::now();
    let what = match args.limit {
        Some(k) => format!("for one of {k} permits "),
        None => String::new(),
    };
    progress.say(format_args!(
        "waiting {what}on {n} servers (quorum {}), ttl {}",
        locks.quorum(),
        humantime::format_duration(args.ttl)
    ));
    let result = match (target, args.no_wait) {
        (Target::Lock, true) => locks.try_lock(args.key.as_str(), args.ttl).map(Held::lock),
        (Target::Permit(semaphore), true) => semaphore.try_acquire(args.ttl).map(Held::permit),
        (_, false) => {
            let deadline = args.wait.map(|wait| later(start, wait));
            let settings = waiting::Settings {
                key: args.key.clone(),
                verbose: args.verbose,
                no_quorum_timeout: args.no_quorum_timeout,
            };
            let watcher = Watcher::start(watch.hook, watch.rounds, settings, cancel.clone())
                .map_err(|e| Exit::new(SOFTWARE, format!("cannot start a thread: {e}")))?;
            let result = wait(locks, target, args, deadline, cancel);
            if let Some(why) = watcher.finish() {
                if matches!(result, Err(LockError::Cancelled)) {
                    return Err(Exit::new(UNAVAILABLE, why));
                }
            }
            result
        }
    };
    match result {
        Ok(held) => {
            progress.say(format_args!(
                "acquired{} after {}, valid for {}",
                held.which(args),
                ms(start.elapsed()),
                ms(held.lock.validity())
            ));
            Ok(held)
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
                format!(
                    "{}: interrupted while waiting for {}",
                    args.key,
                    if args.limit.is_some() {
                        "a permit"
                    } else {
                        "the lock"
                    }
                ),
            ))
        }
        Err(err) => Err(refusal(args, &err)),
    }
}

/// `lock_cancellable` (or `acquire_cancellable` for a permit) until
/// `deadline`, in one call: the watcher reports progress meanwhile.
fn wait(
    locks: &Redlock,
    target: &Target,
    args: &RunArgs,
    deadline: Option<Instant>,
    cancel: &Cancel,
) -> Result<Held, LockError> {
    match target {
        Target::Lock => locks
            .lock_cancellable(args.key.as_str(), args.ttl, deadline, cancel)
            .map(Held::lock),
        Target::Permit(semaphore) => semaphore
            .acquire_cancellable(args.ttl, deadline, cancel)
            .map(Held::permit),
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

/// The exit for a lock (or permit) that was not acquired.
fn refusal(args: &RunArgs, err: &LockError) -> Exit {
    let key = &args.key;
    let last = match err {
        LockError::Timeout { last, .. } => last.as_ref(),
        other => other,
    };
    match last {
        LockError::Contended(_) => {
            let held = match args.limit {
                Some(k) => format!("all {k} permits held by other holders"),
                None => "held by another holder".to_owned(),
            };
            Exit::new(
                args.conflict_exit_code,
                format!("{key}: {held} ({})", describe(err)),
            )
        }
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
    slot: Option<u32>,
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
    if let Some(slot) = slot {
        command.env("REDLOCK_PERMIT", slot.to_string());
    }
    if let Some(token) = lock.fencing_token() {
        command.env("REDLOCK_FENCING_TOKEN", token.to_string());
        if args.term {
            command.env("REDLOCK_TERM", token.to_string());
        }
    }
    // Started first, so that the command is never without it.
    let mut guardian = match Guardian::start(guardian_grace(args)) {
        Ok(guardian) => Some(guardian),
        Err(e) => {
            crate::say!(
                "redlock: {}: cannot start the guardian ({e}): the command would run on if redlock died",
                args.key
            );
            None
        }
    };
    let mut group = match Group::spawn(&mut command) {
        Ok(group) => group,
        Err(e) => {
            if let Some(guardian) = guardian {
                guardian.stand_down();
            }
            let code = if e.kind() == io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_RUN
            };
            return Err(Exit::new(
                code,
                format!("cannot run {}: {e}", program.to_string_lossy()),
            ));
        }
    };
    if let Some(watching) = guardian.as_mut() {
        if let Err(e) = watching.watch(group.leader()) {
            crate::say!("redlock: {}: the guardian does not listen ({e})", args.key);
        }
    }
    let guardian_pid = guardian.as_ref().map(Guardian::pid);
    let result = watch_command(&mut group, guardian_pid, lock, slot, args, events, progress);
    group.give_back_terminal();
    if let Some(guardian) = guardian {
        guardian.stand_down();
    }
    result
}

/// The grace the guardian gives the command after SIGTERM when `redlock`
/// died: `--kill-grace`, cut to a tenth of the TTL (while the lock is kept
/// alive, at least about a third of its validity is left).
fn guardian_grace(args: &RunArgs) -> Duration {
    args.kill_grace.min(args.ttl / 10)
}

/// The main loop while the command runs: reaps, passes signals on, stops
/// the group when the lock is lost, and waits for the group to be gone
/// then.
fn watch_command(
    group: &mut Group,
    guardian: Option<nix::unistd::Pid>,
    lock: &Lock,
    slot: Option<u32>,
    args: &RunArgs,
    events: &Receiver<Event>,
    progress: &Progress,
) -> Result<u8, Exit> {
    let leader = group.leader();
    let mut ended: Option<Ended> = None;
    let mut lost: Option<LostReason> = None;
    let mut kill_at: Option<Instant> = None;
    let mut killed_at: Option<Instant> = None;
    let mut valid_until = later(Instant::now(), lock.validity());
    let status = loop {
        for seen in group::reap() {
            match seen {
                Reaped::Ended(pid, how) if pid == leader => ended = Some(how),
                Reaped::Stopped(pid, signal) if pid == leader && lost.is_none() => {
                    stopped(group, signal, &args.key);
                }
                Reaped::Ended(pid, _) if Some(pid) == guardian => crate::say!(
                    "redlock: {}: the guardian ended: the command would run on if redlock died",
                    args.key
                ),
                _ => {}
            }
        }
        // A loss the keeper reported, or one it could not (the validity
        // ran out first): stop the command.
        if lost.is_none() && ended.is_none() && (lock.is_lost() || !lock.is_valid()) {
            lost = Some(LostReason::Expired);
            kill_at = Some(stop(group, lock, args.kill_grace));
        }
        if let Some(status) = ended {
            // With the lock lost, nothing of the group may run on.
            if lost.is_none() || group.is_empty() {
                break status;
            }
            if killed_at.is_some_and(|at| at.elapsed() >= GROUP_GONE) {
                crate::say!(
                    "redlock: {}: processes of the command's group {leader} are still there {} after SIGKILL",
                    args.key,
                    humantime::format_duration(GROUP_GONE)
                );
                break status;
            }
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            group.signal(Signal::SIGKILL);
            killed_at = Some(Instant::now());
            kill_at = None;
        }
        let now = Instant::now();
        let mut wait = TICK;
        if let Some(at) = kill_at {
            wait = wait.min(at.saturating_duration_since(now));
        }
        match events.recv_timeout(wait) {
            Ok(Event::Signal(SIGCHLD)) | Err(RecvTimeoutError::Timeout) => {}
            Ok(Event::Signal(SIGCONT)) => {
                // Continued (`fg`, `bg`) after a stop from the terminal.
                if lost.is_none() {
                    group.resume(false);
                }
            }
            Ok(Event::Signal(signal)) => {
                // Passed on; the lock is released once the command exits.
                if let Ok(signal) = Signal::try_from(signal) {
                    group.signal(signal);
                }
            }
            Ok(Event::Lost(reason)) => {
                if lost.is_none() && ended.is_none() {
                    lost = Some(reason);
                    kill_at = Some(stop(group, lock, args.kill_grace));
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
        let what = slot.map_or_else(|| "the lock".to_owned(), |slot| format!("permit {slot}"));
        return Err(Exit::new(
            LOST,
            format!(
                "{}: lost {what} while the command ran ({reason}); the command was stopped ({})",
                args.key,
                describe_status(status)
            ),
        ));
    }
    Ok(code_of(status))
}

/// The command was stopped by `signal` (see [`Group::stopped`]); says so
/// when it is left stopped.
fn stopped(group: &mut Group, signal: Signal, key: &str) {
    if !group.stopped(signal) {
        crate::say!(
            "redlock: {key}: the command is stopped ({signal}): it uses the terminal, \
             and redlock is not in its foreground; bring redlock to the foreground (fg) to go on"
        );
    }
}

/// Sends SIGTERM to the command's group (and SIGCONT, so that a stopped
/// process sees it); returns when SIGKILL is due: after the grace, but
/// before the lock's validity ends.
fn stop(group: &Group, lock: &Lock, grace: Duration) -> Instant {
    group.signal(Signal::SIGTERM);
    group.signal(Signal::SIGCONT);
    let validity = lock.validity();
    let before_expiry = validity.saturating_sub(validity / 10);
    later(Instant::now(), grace.min(before_expiry))
}

fn code_of(status: Ended) -> u8 {
    match status {
        Ended::Code(code) => u8::try_from(code & 0xff).unwrap_or(SOFTWARE),
        Ended::Signal(signal) => exit::of_signal(signal),
    }
}

fn describe_status(status: Ended) -> String {
    match status {
        Ended::Code(code) => format!("it exited with {code}"),
        Ended::Signal(signal) => match Signal::try_from(signal) {
            Ok(signal) => format!("ended by {signal}"),
            Err(_) => format!("ended by signal {signal}"),
        },
    }
}

fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
