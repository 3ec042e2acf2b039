//! One shared keeper thread per manager extends every kept-alive lock.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::engine::{Keep, KeepStep};
use crate::events::Event;
use crate::runtime::context::Shared;
use crate::runtime::state::{self, LockState};
use crate::{KeepAlive, LockError, LostReason, SpawnError};

/// One kept-alive lock and its schedule.
pub(crate) struct Entry<E> {
    state: Weak<LockState<E>>,
    on_lost: Option<Box<dyn FnOnce(LostReason) + Send>>,
    keep: Keep,
}

/// The manager's handle on its keeper thread, started on first use.
pub(crate) struct Keeper<E> {
    sender: Mutex<Option<Sender<Entry<E>>>>,
}

impl<E> Keeper<E> {
    pub(crate) fn new() -> Self {
        Keeper {
            sender: Mutex::new(None),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> Keeper<E> {
    /// Hands `state` to the keeper thread, starting it if needed; it
    /// extends through `shared`.
    pub(crate) fn register(
        &self,
        shared: &Arc<Shared<E>>,
        state: &Arc<LockState<E>>,
        policy: KeepAlive,
    ) -> Result<(), SpawnError> {
        register(self, shared, state, policy)
    }
}

fn register<E: std::error::Error + Send + Sync + 'static>(
    keeper: &Keeper<E>,
    shared: &Arc<Shared<E>>,
    state: &Arc<LockState<E>>,
    policy: KeepAlive,
) -> Result<(), SpawnError> {
    let now = shared.config.clock.now();
    let valid_until = state.life.lock().valid_until();
    let entry = Entry {
        state: Arc::downgrade(state),
        on_lost: policy.on_lost,
        keep: Keep::new(
            now,
            valid_until,
            shared.config.settings.node_timeout,
            policy.max_hold,
            policy.max_extensions,
        ),
    };
    let mut sender = keeper.sender.lock();
    if sender.is_none() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let weak = Arc::downgrade(shared);
        std::thread::Builder::new()
            .name("redlock-keeper".into())
            .spawn(move || run(&weak, &rx))
            .map_err(|e| SpawnError::new("redlock-keeper", e.kind()))?;
        *sender = Some(tx);
    }
    if let Some(tx) = sender.as_ref() {
        // The keeper only stops when the manager is gone, which `shared` is not.
        let _ = tx.send(entry);
    }
    Ok(())
}

/// The keeper loop: sleeps until the earliest due lock or a new one, extends
/// what is due, and ends when the manager is dropped.
fn run<E: std::error::Error + Send + Sync + 'static>(
    shared: &Weak<Shared<E>>,
    queue: &Receiver<Entry<E>>,
) {
    let mut entries: Vec<Entry<E>> = Vec::new();
    loop {
        let next_due = entries.iter().map(|e| e.keep.due()).min();
        let received = match next_due {
            None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(due) => {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                let wait = due.saturating_duration_since(shared.config.clock.now());
                drop(shared);
                queue.recv_timeout(wait)
            }
        };
        match received {
            Ok(entry) => {
                entries.push(entry);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = shared.config.clock.now();
        entries.retain_mut(|entry| entry.keep.due() > now || tend(&shared, entry));
    }
}

/// Does what one due lock needs; returns whether to keep tending it.
fn tend<E: std::error::Error + Send + Sync + 'static>(
    shared: &Shared<E>,
    entry: &mut Entry<E>,
) -> bool {
    let Some(state) = entry.state.upgrade() else {
        return false;
    };
    let clock = &shared.config.clock;
    let (ttl, step) = {
        let life = state.life.lock();
        if life.is_released() || life.lost().is_some() {
            return false;
        }
        (life.ttl(), entry.keep.step(clock.now(), life.valid_until()))
    };
    match step {
        KeepStep::Wait(_) => true,
        KeepStep::Lose(reason) => {
            lose(shared, &state, entry, reason, None);
            false
        }
        KeepStep::Extend => match state::extend(shared, &state, ttl) {
            Ok(validity) => {
                let valid_until = state.life.lock().valid_until();
                entry.keep.extended(clock.now(), valid_until);
                shared.observer.emit(|| Event::KeptAlive {
                    resources: state.claim.resources(),
                    validity,
                });
                true
            }
            Err(e) => {
                lose(shared, &state, entry, LostReason::ExtendFailed, Some(e));
                false
            }
        },
    }
}

fn lose<E: std::error::Error + Send + Sync + 'static>(
    shared: &Shared<E>,
    state: &LockState<E>,
    entry: &mut Entry<E>,
    reason: LostReason,
    cause: Option<LockError<E>>,
) {
    // The first loss recorded wins, whoever recorded it (an extend that
    // found the lock expired records that itself); a released lock is not
    // lost.
    let (newly, recorded) = {
        let mut life = state.life.lock();
        let newly = life.mark_lost(reason, cause);
        (newly, life.lost())
    };
    if newly {
        shared.observe_lost(state.claim.resources(), reason);
    }
    if let Some(reason) = recorded {
        if let Some(callback) = entry.on_lost.take() {
            let _ = catch_unwind(AssertUnwindSafe(|| callback(reason)));
        }
    }
}
