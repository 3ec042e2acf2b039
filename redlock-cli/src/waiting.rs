//! What `redlock run` tells while it waits for the lock, and when it gives
//! up because the servers do not answer.
//!
//! The manager's event hook passes each acquire round (and each server's
//! error) to a watcher thread, so the wait itself is one uninterrupted
//! call of the library, keeping its place in the servers' line. The
//! watcher says on stderr when no quorum of servers answers a round
//! (always: a wait that cannot succeed must not be silent), again every
//! [`NOTE_EVERY`] while that lasts, and when a quorum answers again. When
//! no quorum has answered for the whole `--no-quorum-timeout`, it cancels
//! the wait and records why, and `redlock` exits 69. With `-v` it also
//! reports the attempts and the last round every second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use redlock_core::engine::RoundKind;
use redlock_core::RoundSummary;
use redlock_redis::{Cancel, Event, EventHandler, FailureKind, NodeId};

/// How often a lasting outage is reported again.
const NOTE_EVERY: Duration = Duration::from_secs(10);
/// How often `-v` reports the attempts so far.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What the hook passes on to the watcher.
#[derive(Debug)]
pub(crate) enum Seen {
    /// An acquire round was decided.
    Round(RoundSummary),
    /// A server's request failed with this error.
    Failed(NodeId, String),
    /// The wait is over.
    Done,
}

/// The manager's event hook: passes acquire rounds and server errors on
/// to the watcher (a channel send; never blocks the library).
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    tx: Sender<Seen>,
}

impl EventHandler for Hook {
    fn on_event(&self, event: &Event<'_>) {
        let seen = match event {
            Event::Round(round) if round.kind == RoundKind::Acquire => {
                Seen::Round(round.summary.clone())
            }
            Event::NodeFailed {
                node,
                error: Some(error),
                ..
            } => Seen::Failed((*node).clone(), error.to_string()),
            _ => return,
        };
        // Fails once the watcher is gone (after the wait): nothing to do.
        let _ = self.tx.send(seen);
    }
}

/// The hook, and the receiving end for [`Watcher::start`].
pub(crate) fn hook() -> (Hook, Receiver<Seen>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    (Hook { tx }, rx)
}

/// What the watcher is told to do.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The key, for the messages.
    pub(crate) key: String,
    /// Report the attempts every second (`-v`).
    pub(crate) verbose: bool,
    /// Give up after no quorum answered for this long.
    pub(crate) no_quorum_timeout: Duration,
}

/// The watcher thread of one wait.
#[derive(Debug)]
pub(crate) struct Watcher {
    tx: Sender<Seen>,
    thread: Option<JoinHandle<()>>,
    gave_up: Arc<Mutex<Option<String>>>,
}

impl Watcher {
    /// Starts watching the rounds `hook` passes on; cancels `cancel` when
    /// no quorum answered for too long.
    pub(crate) fn start(
        hook: &Hook,
        rounds: Receiver<Seen>,
        settings: Settings,
        cancel: Cancel,
    ) -> std::io::Result<Self> {
        let gave_up = Arc::new(Mutex::new(None));
        let record = Arc::clone(&gave_up);
        let thread = std::thread::Builder::new()
            .name("redlock-wait".to_owned())
            .spawn(move || watch(&rounds, &settings, &cancel, &record))?;
        Ok(Watcher {
            tx: hook.tx.clone(),
            thread: Some(thread),
            gave_up,
        })
    }

    /// Ends the watch; returns why the wait was given up, if it was.
    pub(crate) fn finish(mut self) -> Option<String> {
        let _ = self.tx.send(Seen::Done);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.gave_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The watcher's state.
#[derive(Debug, Default)]
struct State {
    /// Acquire rounds so far.
    attempts: u64,
    /// The last round.
    last: Option<RoundSummary>,
    /// Each server's last error.
    errors: HashMap<NodeId, String>,
    /// Since when no round had a quorum answering.
    unanswered_since: Option<Instant>,
}

impl State {
    /// The last round in words: votes, and each failed server with its
    /// error.
    fn last_round(&self) -> String {
        let Some(round) = &self.last else {
            return "none decided yet".to_owned();
        };
        let mut text = format!(
            "{} granted, {} refused (held by another holder), {} failed",
            round.granted,
            round.refused,
            round.failed.len()
        );
        for (node, kind) in &round.failed {
            match (kind, self.errors.get(node)) {
                // The error names its server.
                (FailureKind::Backend, Some(error)) if error.contains(node.as_str()) => {
                    text.push_str(&format!("; {error}"));
                }
                (FailureKind::Backend, Some(error)) => text.push_str(&format!("; {node}: {error}")),
                _ => text.push_str(&format!("; {node}: {kind}")),
            }
        }
        text
    }
}

/// Whether a quorum of servers answered the round (granted or refused),
/// rather than failing: the library's `NoQuorum` is the opposite.
fn quorum_answered(round: &RoundSummary) -> bool {
    answered(round.nodes, round.quorum, round.failed.len())
}

/// Whether `nodes - failed` servers make `quorum`.
fn answered(nodes: usize, quorum: usize, failed: usize) -> bool {
    nodes.saturating_sub(failed) >= quorum
}

fn watch(
    rounds: &Receiver<Seen>,
    settings: &Settings,
    cancel: &Cancel,
    gave_up: &Mutex<Option<String>>,
) {
    let key = &settings.key;
    let bound = settings.no_quorum_timeout;
    let mut state = State::default();
    let mut next_progress = later(Instant::now(), PROGRESS_EVERY);
    let mut next_note = None;
    loop {
        let mut until = next_progress;
        if let Some(since) = state.unanswered_since {
            until = until.min(later(since, bound));
        }
        if let Some(note) = next_note {
            until = until.min(note);
        }
        match rounds.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Seen::Round(round)) => {
                state.attempts += 1;
                let answered = quorum_answered(&round);
                state.last = Some(round);
                let now = Instant::now();
                match (answered, state.unanswered_since) {
                    (true, Some(_)) => {
                        state.unanswered_since = None;
                        next_note = None;
                        crate::say!("redlock: {key}: a quorum of servers answers again");
                    }
                    (false, None) => {
                        state.unanswered_since = Some(now);
                        next_note = Some(later(now, NOTE_EVERY));
                        crate::say!(
                            "redlock: {key}: no quorum of servers answers ({}); \
                             trying again for up to {} (--no-quorum-timeout)",
                            state.last_round(),
                            humantime::format_duration(bound)
                        );
                    }
                    _ => {}
                }
            }
            Ok(Seen::Failed(node, error)) => {
                state.errors.insert(node, error);
            }
            Ok(Seen::Done) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if let Some(since) = state.unanswered_since {
            let out = now.saturating_duration_since(since);
            if out >= bound {
                *gave_up.lock().unwrap_or_else(PoisonError::into_inner) = Some(format!(
                    "{key}: no quorum of servers answered for {} (--no-quorum-timeout); last round: {}",
                    humantime::format_duration(round_s(out)),
                    state.last_round()
                ));
                cancel.cancel();
                return;
            }
            if next_note.is_some_and(|note| now >= note) {
                next_note = Some(later(now, NOTE_EVERY));
                crate::say!(
                    "redlock: {key}: still no quorum after {}; last round: {}",
                    humantime::format_duration(round_s(out)),
                    state.last_round()
                );
            }
        }
        if now >= next_progress {
            next_progress = later(now, PROGRESS_EVERY);
            if settings.verbose {
                crate::say!(
                    "redlock: {key}: still waiting: {} attempts; last round: {}",
                    state.attempts,
                    state.last_round()
                );
            }
        }
    }
}

/// `d` in whole seconds, for the messages.
fn round_s(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_answered_unless_failures_alone_prevent_one() {
        assert!(answered(3, 2, 0));
        assert!(answered(3, 2, 1));
        assert!(!answered(3, 2, 2));
        assert!(answered(5, 3, 2));
        assert!(!answered(5, 3, 3));
        assert!(!answered(1, 1, 2));
    }
}
