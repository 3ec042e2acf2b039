//! One shared keeper thread per manager extends every kept-alive lock.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::engine::{Keep, KeepStep};
use crate::events::Event;
use crate::shared::Shared;
use crate::state::{self, LockState};
use crate::{LockError, LostReason, SpawnError};

/// How a lock is kept alive by automatic extension, and where that stops.
///
/// Extension is bounded, as the specification asks, so that a holder that
/// hangs cannot keep a resource forever: by total hold time (default one
/// hour) and by number of extensions (default unbounded). When a bound is
/// reached or an extension fails, the lock is marked lost and the optional
/// callback runs once, on the keeper thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::KeepAlive;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let policy = KeepAlive::new()
///     .max_hold(Duration::from_secs(300))
///     .max_extensions(100)
///     .on_lost(move |reason| {
///         let _ = tx.send(reason);
///     });
/// # drop((policy, rx));
/// ```
#[must_use]
pub struct KeepAlive {
    max_hold: Duration,
    max_extensions: u32,
    on_lost: Option<Box<dyn FnOnce(LostReason) + Send>>,
}

impl KeepAlive {
    /// The defaults: at most one hour of total hold time, no bound on the
    /// number of extensions, no callback.
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new();
    /// ```
    pub fn new() -> Self {
        KeepAlive {
            max_hold: Duration::from_secs(3600),
            max_extensions: u32::MAX,
            on_lost: None,
        }
    }

    /// The longest total hold time, from when the lock is kept alive: no
    /// extension starts after it. Defaults to one hour.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = redlock_core::KeepAlive::new().max_hold(Duration::from_secs(600));
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// The largest number of automatic extensions. Defaults to unbounded.
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new().max_extensions(10);
    /// ```
    pub fn max_extensions(mut self, max_extensions: u32) -> Self {
        self.max_extensions = max_extensions;
        self
    }

    /// Runs `callback` once, on the keeper thread, when the lock is lost.
    /// Keep it short (it delays other locks' extensions); a panic in it is
    /// contained. It runs with none of the manager's locks held, so it may
    /// call back into the manager (read
    /// [`Redlock::stats`](crate::Redlock::stats), take another lock), as
    /// an event hook may ([`Builder::events`](crate::Builder::events)).
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new().on_lost(|reason| eprintln!("lock lost: {reason}"));
    /// ```
    pub fn on_lost(mut self, callback: impl FnOnce(LostReason) + Send + 'static) -> Self {
        self.on_lost = Some(Box::new(callback));
        self
    }
}

impl Default for KeepAlive {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeepAlive")
            .field("max_hold", &self.max_hold)
            .field("max_extensions", &self.max_extensions)
            .field("on_lost", &self.on_lost.is_some())
            .finish()
    }
}

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
            shared.config.node_timeout,
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
