//! Where the replies of one round land. The node workers record each reply
//! straight into the round's [`Tally`](crate::Tally), and the worker whose
//! reply finishes the round wakes the waiting caller: one wake-up per round,
//! however many nodes answer, instead of one per reply.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, Thread};
use std::time::Instant;

use crossbeam_utils::Backoff;
use parking_lot::Mutex;

use crate::fanout::Round;
use crate::{Decision, NodeFailure, Response};

/// When a round is finished.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Until {
    /// The tally decided: a quorum granted, or can no longer grant.
    Decided,
    /// This many nodes answered, whatever they said.
    Answers(usize),
}

/// The replies of one round, shared by the waiting caller and the workers.
pub(crate) struct Pending<E> {
    inner: Mutex<Inner<E>>,
    /// Mirrors `Inner::done`, for the waiter to spin on without the lock.
    finished: AtomicBool,
    waiter: Thread,
}

struct Inner<E> {
    round: Option<Round<E>>,
    until: Until,
    answers: usize,
    done: bool,
}

impl<E> Pending<E> {
    /// A pending `round` that `waiter` (the thread that will call
    /// [`Pending::wait`]) waits on until `until`.
    pub(crate) fn new(round: Round<E>, until: Until, waiter: Thread) -> Self {
        let done = matches!(until, Until::Answers(0));
        Pending {
            inner: Mutex::new(Inner {
                round: Some(round),
                until,
                answers: 0,
                done,
            }),
            finished: AtomicBool::new(done),
            waiter,
        }
    }

    /// Records `node`'s answer and, if it finishes the round, wakes the
    /// waiter. Answers after that are ignored.
    pub(crate) fn deliver(&self, node: usize, result: Result<Response, NodeFailure<E>>) {
        if self.record(node, result) {
            self.waiter.unpark();
        }
    }

    /// Records `node`'s answer without waking anybody (for the waiter itself,
    /// before it waits); returns whether the round just finished.
    pub(crate) fn record(&self, node: usize, result: Result<Response, NodeFailure<E>>) -> bool {
        let mut inner = self.inner.lock();
        let Inner {
            round,
            until,
            answers,
            done,
        } = &mut *inner;
        let Some(round) = round.as_mut() else {
            return false;
        };
        if *done || round.tally.has_voted(node) {
            return false;
        }
        round.record(node, result);
        *answers += 1;
        *done = match *until {
            Until::Decided => round.tally.decision() != Decision::Pending,
            Until::Answers(n) => *answers >= n,
        };
        if *done {
            self.finished.store(true, Ordering::Release);
        }
        *done
    }

    /// Waits (on the calling thread, which must be the waiter) until the
    /// round is finished or `deadline` passes, and takes the round as far as
    /// it got; with `spin`, spins briefly before parking. When a round waiting for a decision times out, the nodes
    /// silent by then are counted as timed out.
    pub(crate) fn wait(&self, deadline: Instant, spin: bool) -> Option<Round<E>> {
        // Answers may come within microseconds: a lone waiter spins and
        // yields briefly (as a channel would) before parking, which costs a
        // wake-up. With many waiters, spinning would only take the CPU from
        // the threads that produce the answers.
        let backoff = Backoff::new();
        while spin && !backoff.is_completed() && !self.finished.load(Ordering::Acquire) {
            backoff.snooze();
        }
        loop {
            let mut inner = self.inner.lock();
            let now = Instant::now();
            if inner.done || now >= deadline {
                let timed_out = !inner.done && matches!(inner.until, Until::Decided);
                inner.done = true;
                let mut round = inner.round.take()?;
                drop(inner);
                if timed_out {
                    for node in 0..round.tally.nodes() {
                        round.record(node, Err(NodeFailure::TimedOut));
                    }
                }
                return Some(round);
            }
            drop(inner);
            thread::park_timeout(deadline - now);
        }
    }
}
