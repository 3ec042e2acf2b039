//! Where the node workers deliver replies: into the machine itself, under a
//! lock, so that only a reply that gives the driving thread something to do
//! (a decision, a request to send) wakes it: one wake-up per round however
//! many nodes answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::backend::feed::Flag;
use crate::decide::deadline::later;
use crate::engine::{Acquire, Entropy, RoundId, Single};
use crate::{Cancel, Clock, NodeFailure, Resources, Response};

/// A machine as the shell drives it: the engine's [`Machine`] and its
/// result.
pub(crate) trait Driven<E>: crate::engine::Machine<E> + Send {
    type Output;
    fn poll(&mut self) -> Option<Self::Output>;
    /// The result of a machine cancelled between rounds (see [`Cancel`]),
    /// or `None` for machines that run to their end regardless or that
    /// stopped with transmits still to send (their outcome then comes from
    /// [`Machine::poll`] once those are sent).
    fn cancelled(&mut self) -> Option<Self::Output> {
        None
    }
    /// The keys whose release ends this machine's pauses, if any.
    fn waits_for(&self) -> Option<&Resources> {
        None
    }
    /// One of [`Machine::waits_for`]'s keys was reported released.
    fn released(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        let _ = (now, entropy);
    }
}

impl<E: Send + Sync> Driven<E> for Acquire<E> {
    type Output = Result<crate::engine::Acquired, crate::LockError<E>>;
    fn poll(&mut self) -> Option<Self::Output> {
        Acquire::poll(self)
    }
    fn cancelled(&mut self) -> Option<Self::Output> {
        // The transmits that leave the lines go first; the driver then
        // polls the outcome.
        self.cancel();
        None
    }
    fn waits_for(&self) -> Option<&Resources> {
        Acquire::waits_for(self)
    }
    fn released(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        self.handle_released(now, entropy);
    }
}

impl<E: Send + Sync> Driven<E> for Single<E> {
    type Output = crate::engine::Decided<E>;
    fn poll(&mut self) -> Option<Self::Output> {
        Single::poll(self)
    }
}

/// How a pause between rounds ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pause {
    Elapsed,
    /// A key waited for was reported released.
    Woken,
    Cancelled,
}

/// How long a pause ended by a release waits, after the first node
/// reported it, for a quorum of nodes to report it (see
/// [`Mailbox::pause_until`]).
const SETTLE: Duration = Duration::from_millis(2);

/// How often a parked pause looks at its cancel.
const CANCEL_SLICE: Duration = Duration::from_millis(10);

/// What a node worker delivers replies to.
pub(crate) trait Inbox<E>: Send + Sync {
    /// Hands the machine `node`'s answer in `round`; returns whether the
    /// machine now has something for its driver (a decision, most often).
    fn deliver(
        &self,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) -> bool;

    /// Whether the machine has something for its driver now (its round
    /// decided through answers others delivered). The default says no.
    fn needs_driver(&self) -> bool {
        false
    }
}

/// A machine shared by its driving thread and the node workers.
pub(crate) struct Mailbox<M> {
    machine: Mutex<M>,
    clock: Arc<dyn Clock>,
    /// Mirrors `machine.needs_driver()`, for the driver to spin on.
    attention: AtomicBool,
    driver: Thread,
    /// Stops the machine's pauses between rounds, when set.
    cancel: OnceLock<Cancel>,
}

impl<M> Mailbox<M> {
    /// A mailbox for `machine`, driven by the thread `driver`.
    pub(crate) fn new(machine: M, clock: Arc<dyn Clock>, driver: Thread) -> Self {
        Mailbox {
            machine: Mutex::new(machine),
            clock,
            attention: AtomicBool::new(true),
            driver,
            cancel: OnceLock::new(),
        }
    }

    /// Lets `cancel` stop this machine's pauses between rounds.
    pub(crate) fn set_cancel(&self, cancel: &Cancel) {
        let _ = self.cancel.set(cancel.clone());
    }

    /// Sleeps until `at`: on the system clock, parked, when `woken` is
    /// given (its flag ends the pause early); otherwise on the configured
    /// clock.
    ///
    /// A release reported by one node ends the pause once `quorum` nodes
    /// reported it, or [`SETTLE`] after the first report: the releaser sent
    /// its release to every node at once, but they run it one after the
    /// other, and a round sent on the first report finds the key still held
    /// on the slower nodes, fails, and makes the waiters collide again.
    pub(crate) fn pause_until(&self, at: Instant, woken: Option<(&Flag, u32)>) -> Pause {
        let Some((flag, quorum)) = woken else {
            return if self.sleep_until(at) {
                Pause::Elapsed
            } else {
                Pause::Cancelled
            };
        };
        self.pause_settling(at, flag, quorum, SETTLE)
    }

    /// [`Mailbox::pause_until`] with a flag, waiting `settle` at most
    /// after the first report.
    pub(crate) fn pause_settling(
        &self,
        at: Instant,
        flag: &Flag,
        quorum: u32,
        settle: Duration,
    ) -> Pause {
        let mut settled: Option<Instant> = None;
        loop {
            if self.cancel.get().is_some_and(Cancel::is_cancelled) {
                return Pause::Cancelled;
            }
            // The pause's end is the machine's, on the configured clock
            // (the system clock: release notifications are off with a
            // clock of one's own, `Builder::clock`).
            let now = self.clock.now();
            if flag.take() && settled.is_none() {
                settled = Some(later(now, settle));
            }
            if let Some(by) = settled {
                if now >= by || flag.reports(false) >= quorum {
                    flag.reports(true);
                    return Pause::Woken;
                }
            }
            if now >= at {
                return Pause::Elapsed;
            }
            let at = settled.map_or(at, |by| by.min(at));
            // A cancel wakes only threads it watches: look again every
            // slice.
            let slice = if self.cancel.get().is_some() {
                CANCEL_SLICE
            } else {
                Duration::from_secs(3600)
            };
            std::thread::park_timeout((at - now).min(slice));
        }
    }

    /// Sleeps on the clock until `at`; `false` when cancelled first.
    fn sleep_until(&self, at: Instant) -> bool {
        match self.cancel.get() {
            Some(cancel) => cancel.sleep_until(self.clock.as_ref(), at),
            None => {
                let now = self.clock.now();
                if now < at {
                    self.clock.sleep(at - now);
                }
                true
            }
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, M> {
        self.machine.lock()
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Parks the driving thread until a worker gives it something to do or
    /// `deadline` (real time) passes; with `spin`, spins briefly first.
    pub(crate) fn park_until(&self, deadline: Instant, spin: bool) {
        // Answers may come within microseconds: a lone driver spins and
        // yields briefly (as a channel would) before parking, which costs a
        // wake-up. With many drivers, spinning would only take the CPU from
        // the threads that produce the answers.
        let backoff = crossbeam_utils::Backoff::new();
        while spin && !backoff.is_completed() && !self.attention.load(Ordering::Acquire) {
            backoff.snooze();
        }
        while !self.attention.swap(false, Ordering::AcqRel) {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            std::thread::park_timeout((deadline - now).min(Duration::from_secs(3600)));
        }
    }
}

impl<E, M: Driven<E>> Inbox<E> for Mailbox<M> {
    fn deliver(
        &self,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) -> bool {
        let mut machine = self.machine.lock();
        machine.handle_reply(self.clock.now(), round, node, result);
        let wake = machine.needs_driver();
        drop(machine);
        if wake {
            self.attention.store(true, Ordering::Release);
            if self.driver.id() != std::thread::current().id() {
                self.driver.unpark();
            }
        }
        wake
    }

    fn needs_driver(&self) -> bool {
        self.machine.lock().needs_driver()
    }
}
