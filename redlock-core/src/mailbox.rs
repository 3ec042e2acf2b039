//! Where the node workers deliver replies: into the machine itself, under a
//! lock, so that only a reply that gives the driving thread something to do
//! (a decision, a request to send) wakes it: one wake-up per round however
//! many nodes answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::engine::{Acquire, Entropy, RoundId, Single, Timer, Transmit};
use crate::{Clock, NodeFailure, Response};

/// A machine as the shell drives it.
pub(crate) trait Machine<E>: Send {
    type Output;
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    );
    fn handle_expired(&mut self, now: Instant, round: RoundId);
    fn handle_timeout(&mut self, now: Instant, entropy: &mut dyn Entropy);
    fn poll_transmit(&mut self) -> Option<Transmit>;
    fn poll_timeout(&self) -> Option<Timer>;
    fn poll(&mut self) -> Option<Self::Output>;
    fn needs_driver(&self) -> bool;
}

impl<E: Send + Sync> Machine<E> for Acquire<E> {
    type Output = Result<crate::engine::Acquired, crate::LockError<E>>;
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) {
        Acquire::handle_reply(self, now, round, node, result);
    }
    fn handle_expired(&mut self, now: Instant, round: RoundId) {
        Acquire::handle_expired(self, now, round);
    }
    fn handle_timeout(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        Acquire::handle_timeout(self, now, entropy);
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Acquire::poll_transmit(self)
    }
    fn poll_timeout(&self) -> Option<Timer> {
        Acquire::poll_timeout(self)
    }
    fn poll(&mut self) -> Option<Self::Output> {
        Acquire::poll(self)
    }
    fn needs_driver(&self) -> bool {
        Acquire::needs_driver(self)
    }
}

impl<E: Send + Sync> Machine<E> for Single<E> {
    type Output = crate::engine::Decided<E>;
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) {
        Single::handle_reply(self, now, round, node, result);
    }
    fn handle_expired(&mut self, now: Instant, round: RoundId) {
        Single::handle_expired(self, now, round);
    }
    fn handle_timeout(&mut self, _: Instant, _: &mut dyn Entropy) {}
    fn poll_transmit(&mut self) -> Option<Transmit> {
        Single::poll_transmit(self)
    }
    fn poll_timeout(&self) -> Option<Timer> {
        Single::poll_timeout(self)
    }
    fn poll(&mut self) -> Option<Self::Output> {
        Single::poll(self)
    }
    fn needs_driver(&self) -> bool {
        Single::needs_driver(self)
    }
}

/// What a node worker delivers replies to.
pub(crate) trait Inbox<E>: Send + Sync {
    fn deliver(&self, round: RoundId, node: usize, result: Result<Response, NodeFailure<E>>);
}

/// A machine shared by its driving thread and the node workers.
pub(crate) struct Mailbox<M> {
    machine: Mutex<M>,
    clock: Arc<dyn Clock>,
    /// Mirrors `machine.needs_driver()`, for the driver to spin on.
    attention: AtomicBool,
    driver: Thread,
}

impl<M> Mailbox<M> {
    /// A mailbox for `machine`, driven by the thread `driver`.
    pub(crate) fn new(machine: M, clock: Arc<dyn Clock>, driver: Thread) -> Self {
        Mailbox {
            machine: Mutex::new(machine),
            clock,
            attention: AtomicBool::new(true),
            driver,
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

impl<E, M: Machine<E>> Inbox<E> for Mailbox<M> {
    fn deliver(&self, round: RoundId, node: usize, result: Result<Response, NodeFailure<E>>) {
        let mut machine = self.machine.lock();
        machine.handle_reply(self.clock.now(), round, node, result);
        let wake = machine.needs_driver();
        drop(machine);
        if wake {
            self.attention.store(true, Ordering::Release);
            self.driver.unpark();
        }
    }
}
