//! The shell of the local lines ([`engine::Lines`](crate::engine::Lines)):
//! waiting callers park on their thread, and a release that hands over
//! starts the next caller's acquisition and queues its first round right
//! behind the release.

use std::sync::{Arc, Weak};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::decide::deadline::later;
use crate::engine::{Acquire, Decided, HandOff, Handing, Joined, Look, Message, Transmit, Waiting};
use crate::events::{Event, ManagerCounters};
use crate::runtime::context::{Deadlines, FullQueues, Shared};
use crate::runtime::mailbox::{Inbox, Mailbox};
use crate::runtime::state::LockState;
use crate::{Cancel, Claim, Resources, Ttl};

/// The longest a waiter parks before it looks at its line again; waits are
/// in real time, so this also keeps a simulated clock's waiters moving.
const RECHECK: Duration = Duration::from_millis(100);

/// The engine's lines with the shell's handles: a parked caller, a lock.
type EngineLines<E> = crate::engine::Lines<Arc<Waiter<E>>, Weak<LockState<E>>>;

/// Every line of one manager.
pub(crate) struct Lines<E> {
    lines: Mutex<EngineLines<E>>,
}

/// How a waiting caller is woken, and what it finds.
pub(crate) struct Waiter<E> {
    thread: Thread,
    /// Set (under the lines' lock) when the waiter's turn comes.
    baton: Mutex<Option<Baton<E>>>,
}

/// What a waiter finds when its turn comes.
pub(crate) enum Baton<E> {
    /// Acquire through the nodes.
    Turn,
    /// An acquisition was started for it, its first round right behind a
    /// release: drive it.
    Round(Arc<Mailbox<Acquire<E>>>, Deadlines),
}

/// Where a caller of `lock` stands.
pub(crate) enum Place<E> {
    /// It owns the line: acquire through the nodes.
    Owner(u64),
    /// It waits behind others.
    Waiting(u64, Arc<Waiter<E>>),
}

impl<E> Lines<E> {
    /// Lines for a manager whose node timeout is `node_timeout` and whose
    /// longest retry pause is `streak`.
    pub(crate) fn new(node_timeout: Duration, streak: Duration) -> Self {
        Lines {
            // An owner whose acquiring outlived its deadline by this is gone.
            lines: Mutex::new(crate::engine::Lines::new(
                node_timeout.saturating_mul(4),
                streak,
            )),
        }
    }
}

/// Wakes what a line operation dropped as expired, so it notices at once.
fn wake_all<E>(expired: Vec<Arc<Waiter<E>>>) {
    for waiter in expired {
        waiter.thread.unpark();
    }
}

impl<E: std::error::Error + Send + Sync + 'static> Lines<E> {
    /// Joins the line for `resources`: owner at once when nobody else of
    /// this manager wants them, otherwise a waiter at the back.
    pub(crate) fn join_line(&self, resources: &Resources, ttl: Ttl, deadline: Instant) -> Place<E> {
        let waiter = Arc::new(Waiter {
            thread: thread::current(),
            baton: Mutex::new(None),
        });
        let joined = self
            .lines
            .lock()
            .join(resources, ttl, deadline, Arc::clone(&waiter));
        match joined {
            Joined::Owner(ticket) => Place::Owner(ticket),
            Joined::Waiting(ticket) => Place::Waiting(ticket, waiter),
        }
    }

    /// Waits for the turn of waiter `ticket`: `None` when its deadline came
    /// first or, with `cancel` (the handle and the waiter's deadline), when
    /// it was cancelled (it has then left the line).
    pub(crate) fn await_turn(
        &self,
        shared: &Shared<E>,
        resources: &Resources,
        ticket: u64,
        waiter: &Waiter<E>,
        cancel: Option<(&Cancel, Instant)>,
    ) -> Option<Baton<E>> {
        let clock = &shared.config.clock;
        loop {
            let wake_at = {
                let mut lines = self.lines.lock();
                if let Some(baton) = waiter.baton.lock().take() {
                    return Some(baton);
                }
                let now = clock.now();
                if let Some((_, deadline)) = cancel.filter(|(c, _)| c.is_cancelled()) {
                    // Leaves as a waiter whose deadline passed.
                    lines.look(resources, ticket, deadline.max(now), |_| None);
                    return None;
                }
                let valid_until = |holder: &Weak<LockState<E>>| {
                    holder
                        .upgrade()
                        .map(|state| state.life.lock().valid_until())
                };
                match lines.look(resources, ticket, now, valid_until) {
                    Look::Left => return None,
                    Look::TakeOver => return Some(Baton::Turn),
                    Look::Wait(at) => at,
                }
            };
            let wait = wake_at.saturating_duration_since(clock.now());
            thread::park_timeout(wait.clamp(Duration::from_micros(100), RECHECK));
        }
    }

    /// The owner `ticket` acquired (`handed`: through a hand-off): it stays
    /// the owner while `state` lives. Returns whether it is still the line's
    /// owner (it always is unless it was taken for gone).
    pub(crate) fn hold_line(
        &self,
        shared: &Shared<E>,
        resources: &Resources,
        ticket: u64,
        state: &Arc<LockState<E>>,
        handed: bool,
    ) -> bool {
        let now = shared.config.clock.now();
        self.lines
            .lock()
            .hold(resources, ticket, Arc::downgrade(state), now, handed)
    }

    /// The owner `ticket` gives up without a lock: the next waiter acquires
    /// through the nodes itself.
    pub(crate) fn leave_line(&self, shared: &Shared<E>, resources: &Resources, ticket: u64) {
        let now = shared.config.clock.now();
        let mut expired = Vec::new();
        let mut lines = self.lines.lock();
        if let Some(next) = lines.leave(resources, ticket, now, &mut expired) {
            give_turn(&next);
        }
        drop(lines);
        wake_all(expired);
    }

    /// Releases `claim`, the lock of the line's owner `ticket`, on every
    /// node with `message` (its release). When somebody waits, the next
    /// waiter's acquisition starts with a round queued on every node right
    /// behind the release, in the same batch. With `wait`, returns the
    /// release's decided round. (A lock taken outside a line is released
    /// by [`Shared::release`].)
    ///
    /// Nothing that reaches user code (the event hook) runs while the
    /// lines' lock is held: full queues are reported after it is let go.
    pub(crate) fn release_handing_off(
        &self,
        shared: &Shared<E>,
        claim: &Arc<Claim>,
        (message, skips): (Message, Option<Arc<[bool]>>),
        ticket: u64,
        wait: bool,
    ) -> Option<Decided<E>> {
        let clock = &shared.config.clock;
        let (sent, mine) = shared.release_round(claim, (message, skips), wait)?;
        let my_inbox = mine.clone().map(|m| m as Arc<dyn Inbox<E>>);
        let resources = claim.resources();
        let now = clock.now();
        let mut expired = Vec::new();
        let mut lines = self.lines.lock();
        let handing = lines.release(resources, Some(ticket), now, &mut expired);
        let (next, yields) = match handing {
            Handing::Next { waiter, yields } => (waiter, yields),
            Handing::Plain | Handing::Freed => {
                // Sent (or queued) before the line's lock is let go, so
                // that whoever joins the line next has its acquire behind
                // this release; the answers are read (and full queues
                // reported) after.
                let round = shared.start_round(&sent, my_inbox.as_ref(), 0);
                drop(lines);
                let deadline = round.finish();
                wake_all(expired);
                return mine.map(|m| shared.drive(&m, Deadlines::of(sent.round(), deadline)));
            }
        };
        let mine_round = sent.round();
        let hand = HandOff::start(
            sent,
            &next,
            yields,
            &shared.config.settings,
            shared.queued(true),
            now,
            &mut shared.entropy(),
        );
        let mut full = FullQueues::default();
        let hand = match hand {
            Ok(hand) => hand,
            Err(sent) => {
                // No token for them: it acquires itself.
                give_turn(&next);
                let deadline = shared.send(&sent, my_inbox.as_ref(), &mut full);
                drop(lines);
                full.report(shared);
                wake_all(expired);
                return mine.map(|m| shared.drive(&m, Deadlines::of(sent.round(), deadline)));
            }
        };
        let HandOff { acquire, batch } = hand;
        let their_box = Arc::new(Mailbox::new(
            acquire,
            Arc::clone(clock),
            next.who.thread.clone(),
        ));
        let their_inbox: Arc<dyn Inbox<E>> = Arc::clone(&their_box) as Arc<dyn Inbox<E>>;
        // The engine's batch, in its order: the release, then their first
        // round, queued together on every node's worker.
        let inbox_of = |t: &Transmit| match t.message() {
            Message::Release(_) => my_inbox.clone(),
            _ => Some(Arc::clone(&their_inbox)),
        };
        let (mut deadline, mut their_round) =
            (later(now, shared.config.settings.node_timeout), None);
        match batch.as_slice() {
            [first, then] if !matches!(then.message(), Message::Release(_)) => {
                deadline = shared.send_pair(
                    (first, inbox_of(first).as_ref()),
                    (then, &their_inbox),
                    &mut full,
                );
                their_round = Some(then.round());
            }
            batch => {
                for t in batch {
                    deadline = shared.send(t, inbox_of(t).as_ref(), &mut full);
                    if !matches!(t.message(), Message::Release(_)) {
                        their_round = Some(t.round());
                    }
                }
            }
        }
        let their_deadlines =
            their_round.map_or_else(Deadlines::default, |round| Deadlines::of(round, deadline));
        *next.who.baton.lock() = Some(Baton::Round(their_box, their_deadlines));
        drop(lines);
        next.who.thread.unpark();
        full.report(shared);
        wake_all(expired);
        ManagerCounters::bump(&shared.observer.manager.handed_off);
        shared.observer.emit(|| Event::HandedOff { resources });
        mine.map(|m| shared.drive(&m, Deadlines::of(mine_round, deadline)))
    }
}

/// Tells the new owner of a line to acquire through the nodes itself.
fn give_turn<E>(next: &Waiting<Arc<Waiter<E>>>) {
    *next.who.baton.lock() = Some(Baton::Turn);
    next.who.thread.unpark();
}
