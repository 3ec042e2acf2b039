//! Local lines: callers of one manager that wait for the same resources
//! queue here, first come first served, instead of all polling the nodes.
//!
//! One caller at a time (the line's owner) acquires through the nodes, with
//! jittered retries against other processes; the others wait. When the
//! owner releases, the next in line gets its acquire queued on every node
//! right behind the release, so that both travel in one write and a
//! hand-off costs one round trip. A line only schedules: every caller still
//! wins its own quorum round before it holds the lock.
//!
//! An owner that stops without handing over (a guard leaked with
//! `mem::forget`, a lock lost or expired while its guard lives) is noticed
//! by the first waiter once the owner's lock is no longer valid: it takes
//! over and acquires through the nodes, where the TTL has freed the key.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::later;
use crate::engine::{Acquire, Decided, Message, Single, Until};
use crate::fanout::{Deadlines, Shared};
use crate::guard::LockState;
use crate::mailbox::{Inbox, Mailbox};
use crate::{Claim, Resources, Token, Ttl};

/// The longest a waiter parks before it looks at its line again; waits are
/// in real time, so this also keeps a simulated clock's waiters moving.
const RECHECK: Duration = Duration::from_millis(100);

/// Every line of one manager.
pub(crate) struct Lines<E> {
    map: Mutex<HashMap<Resources, Line<E>>>,
    next_ticket: AtomicU64,
}

struct Line<E> {
    owner: u64,
    /// The owner's lock, once it holds one.
    holder: Option<Weak<LockState<E>>>,
    /// When the owner's own acquiring ends at the latest (manager's clock).
    owner_deadline: Instant,
    /// Since when the lock has passed from caller to caller of this line
    /// without an acquire of its own in between: once that lasted the
    /// longest pause between rounds, hand-offs give way to other managers
    /// that left a waiting mark (so that a busy line cannot starve other
    /// processes, as cohort locks bound local passing).
    streak_since: Option<Instant>,
    waiters: VecDeque<Arc<Waiter<E>>>,
}

/// One caller waiting in a line.
pub(crate) struct Waiter<E> {
    ticket: u64,
    ttl: Ttl,
    deadline: Instant,
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
    Waiting(Arc<Waiter<E>>),
}

impl<E> Lines<E> {
    pub(crate) fn new() -> Self {
        Lines {
            map: Mutex::new(HashMap::new()),
            next_ticket: AtomicU64::new(1),
        }
    }
}

impl<E> Waiter<E> {
    pub(crate) fn ticket(&self) -> u64 {
        self.ticket
    }
}

impl<E> Line<E> {
    /// When the owner stops counting as alive: once its lock's validity
    /// ended (it handed over before that unless it leaked its guard, or
    /// lost or outlived its lock), or a while after its acquiring should
    /// have ended.
    fn owner_lapses(&self, now: Instant, grace: Duration) -> Instant {
        match self.holder.as_ref().map(Weak::upgrade) {
            Some(Some(state)) => state.life.lock().valid_until(),
            // Nothing holds the lock any more, yet it did not hand over.
            Some(None) => now,
            None => self.owner_deadline + grace,
        }
    }
}

impl<E: Send + Sync + 'static> Shared<E> {
    /// Joins the line for `resources`: owner at once when nobody else of
    /// this manager wants them, otherwise a waiter at the back.
    pub(crate) fn join_line(&self, resources: &Resources, ttl: Ttl, deadline: Instant) -> Place<E> {
        let ticket = self.lines.next_ticket.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lines.map.lock();
        match map.entry(resources.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(Line {
                    owner: ticket,
                    holder: None,
                    owner_deadline: deadline,
                    streak_since: None,
                    waiters: VecDeque::new(),
                });
                Place::Owner(ticket)
            }
            Entry::Occupied(mut line) => {
                let waiter = Arc::new(Waiter {
                    ticket,
                    ttl,
                    deadline,
                    thread: thread::current(),
                    baton: Mutex::new(None),
                });
                line.get_mut().waiters.push_back(Arc::clone(&waiter));
                Place::Waiting(waiter)
            }
        }
    }

    /// Waits for `waiter`'s turn: `None` when its deadline came first (it
    /// has then left the line).
    pub(crate) fn await_turn(&self, resources: &Resources, waiter: &Waiter<E>) -> Option<Baton<E>> {
        let clock = &self.config.clock;
        // An owner whose acquiring outlived its deadline by this is gone.
        let grace = self.config.node_timeout * 4;
        loop {
            let wake_at = {
                let mut map = self.lines.map.lock();
                if let Some(baton) = waiter.baton.lock().take() {
                    return Some(baton);
                }
                let now = clock.now();
                let line = map.get_mut(resources)?;
                let Some(at) = line.waiters.iter().position(|w| w.ticket == waiter.ticket) else {
                    // Dropped from the line as expired by a hand-off.
                    return None;
                };
                if now >= waiter.deadline {
                    line.waiters.remove(at);
                    return None;
                }
                let lapses = line.owner_lapses(now, grace);
                if now >= lapses {
                    if at == 0 {
                        line.waiters.pop_front();
                        line.owner = waiter.ticket;
                        line.holder = None;
                        line.owner_deadline = waiter.deadline;
                        return Some(Baton::Turn);
                    }
                    // The first waiter takes over; look again soon after.
                    later(now, self.config.node_timeout)
                } else {
                    lapses
                }
            };
            let wait = wake_at.min(waiter.deadline) - clock.now().min(wake_at);
            thread::park_timeout(wait.clamp(Duration::from_micros(100), RECHECK));
        }
    }

    /// The owner `ticket` acquired (`handed`: through a hand-off): it stays
    /// the owner while `state` lives. Returns whether it is still the line's
    /// owner (it always is unless it was taken for gone).
    pub(crate) fn hold_line(
        &self,
        resources: &Resources,
        ticket: u64,
        state: &Arc<LockState<E>>,
        handed: bool,
    ) -> bool {
        let mut map = self.lines.map.lock();
        match map.get_mut(resources) {
            Some(line) if line.owner == ticket => {
                line.holder = Some(Arc::downgrade(state));
                if !handed || line.streak_since.is_none() {
                    line.streak_since = Some(self.config.clock.now());
                }
                true
            }
            _ => false,
        }
    }

    /// The owner `ticket` gives up without a lock: the next waiter acquires
    /// through the nodes itself.
    pub(crate) fn leave_line(&self, resources: &Resources, ticket: u64) {
        let mut map = self.lines.map.lock();
        let Some(line) = map.get_mut(resources) else {
            return;
        };
        if line.owner != ticket {
            return;
        }
        let now = self.config.clock.now();
        match next_waiter(line, now) {
            Some(next) => {
                line.owner = next.ticket;
                line.holder = None;
                line.owner_deadline = next.deadline;
                *next.baton.lock() = Some(Baton::Turn);
                next.thread.unpark();
            }
            None => remove_line(&mut map, resources),
        }
    }

    /// Releases `claim` on every node with `message` (its release). When
    /// `line` is the ticket of the line's owner and somebody waits, the next
    /// waiter's acquisition starts with a round queued on every node right
    /// behind the release, in the same batch. With `wait`, returns the
    /// release's decided round.
    pub(crate) fn release_handing_off(
        &self,
        claim: &Arc<Claim>,
        message: Message,
        line: Option<u64>,
        wait: bool,
    ) -> Option<Decided<E>> {
        let clock = &self.config.clock;
        let mut release = Single::new(&self.settings, message, Arc::clone(claim), Until::Decided);
        release.start(clock.now());
        let sent = release.poll_transmit()?;
        let mine =
            wait.then(|| Arc::new(Mailbox::new(release, Arc::clone(clock), thread::current())));
        let my_inbox = mine.clone().map(|m| m as Arc<dyn Inbox<E>>);
        let mut map = self.lines.map.lock();
        let resources = claim.resources();
        let next = match (line, map.get_mut(resources)) {
            (Some(ticket), Some(line)) if line.owner == ticket => {
                match next_waiter(line, clock.now()) {
                    Some(next) => Some((line, next)),
                    None => {
                        remove_line(&mut map, resources);
                        None
                    }
                }
            }
            _ => None,
        };
        let token = next.as_ref().map(|_| Token::random());
        let (line, next, token) = match (next, token) {
            (Some((line, next)), Some(Ok(token))) => (line, next, token),
            (next, _) => {
                // No hand-off: nobody waits, or no token for them (then they
                // acquire through the nodes themselves).
                if let Some((line, next)) = next {
                    line.owner = next.ticket;
                    line.holder = None;
                    line.owner_deadline = next.deadline;
                    *next.baton.lock() = Some(Baton::Turn);
                    next.thread.unpark();
                }
                // Queued before the line's lock is let go, so that whoever
                // joins the line next has its acquire behind this release.
                let deadline = self.send(&sent, my_inbox.as_ref());
                drop(map);
                return mine.map(|m| self.drive(&m, Deadlines::of(sent.round(), deadline)));
            }
        };
        let now = clock.now();
        let yields = line
            .streak_since
            .is_none_or(|since| now.saturating_duration_since(since) >= self.config.retry.max());
        let theirs = Arc::new(Claim::new(resources.clone(), token).queued(self.queued(yields)));
        let mut acquire = Acquire::new(
            self.settings.clone(),
            resources.clone(),
            next.ttl,
            Some(next.deadline),
            Some(self.queued(true)),
        );
        acquire.start_with(now, theirs, &mut self.entropy());
        let Some(first) = acquire.poll_transmit() else {
            // It could not even start (no entropy): it acquires itself.
            line.owner = next.ticket;
            line.holder = None;
            line.owner_deadline = next.deadline;
            *next.baton.lock() = Some(Baton::Turn);
            next.thread.unpark();
            let deadline = self.send(&sent, my_inbox.as_ref());
            drop(map);
            return mine.map(|m| self.drive(&m, Deadlines::of(sent.round(), deadline)));
        };
        let their_box = Arc::new(Mailbox::new(
            acquire,
            Arc::clone(clock),
            next.thread.clone(),
        ));
        let their_inbox: Arc<dyn Inbox<E>> = Arc::clone(&their_box) as Arc<dyn Inbox<E>>;
        let deadline = self.send_pair((&sent, my_inbox.as_ref()), (&first, &their_inbox));
        line.owner = next.ticket;
        line.holder = None;
        line.owner_deadline = next.deadline;
        *next.baton.lock() = Some(Baton::Round(
            their_box,
            Deadlines::of(first.round(), deadline),
        ));
        drop(map);
        next.thread.unpark();
        mine.map(|m| self.drive(&m, Deadlines::of(sent.round(), deadline)))
    }
}

/// Removes the line for `resources`, and gives back the map's memory once
/// it is mostly empty (after many locks were held at once).
fn remove_line<E>(map: &mut HashMap<Resources, Line<E>>, resources: &Resources) {
    map.remove(resources);
    if map.capacity() > 64 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// Takes the first waiter whose deadline has not passed; expired ones are
/// dropped from the line (and find out when they next look).
fn next_waiter<E>(line: &mut Line<E>, now: Instant) -> Option<Arc<Waiter<E>>> {
    while let Some(next) = line.waiters.pop_front() {
        if now < next.deadline {
            return Some(next);
        }
        next.thread.unpark();
    }
    None
}
