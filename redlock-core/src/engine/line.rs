//! Local lines: callers of one manager that wait for the same resources
//! queue first come first served instead of all polling the nodes.
//!
//! One caller at a time (the line's owner) acquires through the nodes; the
//! others wait. When the owner releases, the next waiter's acquisition
//! starts with a round that the driver queues on every node right behind the
//! release, so that both travel together and a hand-off costs one round
//! trip. A line only schedules: every caller still wins its own quorum
//! round before it holds the lock.
//!
//! An owner that stops without handing over (a guard leaked, a lock lost or
//! expired while its guard lives) is noticed by the first waiter once the
//! owner's lock is no longer valid: it takes over and acquires through the
//! nodes, where the TTL has freed the key.
//!
//! A line is per manager, so it must not starve other managers (other
//! processes): once the lock has passed from caller to caller of the line
//! for longer than `streak`, hand-off rounds yield to other managers'
//! waiting marks ([`Queued`](crate::Queued)), as cohort locks bound local
//! passing.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::decide::deadline::later;
use crate::{Resources, Ttl};

/// A caller waiting in a line, and whatever the driver needs to wake it.
///
/// # Examples
///
/// See [`Lines`].
#[derive(Debug)]
pub struct Waiting<W> {
    /// Its ticket.
    pub ticket: u64,
    /// The TTL it asks for.
    pub ttl: Ttl,
    /// When it gives up waiting (manager's clock).
    pub deadline: Instant,
    /// The driver's handle on it.
    pub who: W,
}

/// Where a caller stands after joining.
///
/// # Examples
///
/// See [`Lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// It owns the line: acquire through the nodes.
    Owner(u64),
    /// It waits behind others, with this ticket.
    Waiting(u64),
}

/// What a waiting caller finds when it looks at its line.
///
/// # Examples
///
/// See [`Lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Look again at this instant at the latest (or when woken).
    Wait(Instant),
    /// The owner is gone: it owns the line now and acquires through the
    /// nodes itself.
    TakeOver,
    /// Its deadline passed, or it was dropped from the line as expired: it
    /// left.
    Left,
}

/// What a release means for the line.
///
/// # Examples
///
/// See [`Lines`].
#[derive(Debug)]
pub enum Handing<W> {
    /// Not the owner of a line: a plain release.
    Plain,
    /// Nobody waits: the line is gone.
    Freed,
    /// The next waiter owns the line now: start its acquisition right behind
    /// the release, or, if that cannot be done, let it acquire itself. Its
    /// first round is a plain acquire, or, when `yields`, a queued one that
    /// gives way to other managers' waiting marks: that happens once the
    /// lock has passed locally for a streak, and a yielding hand-off that
    /// is granted starts a new streak, so the marks are looked at about
    /// once a streak.
    Next {
        /// The new owner.
        waiter: Waiting<W>,
        /// Whether the hand-off round gives way to other managers' marks.
        yields: bool,
    },
}

#[derive(Debug)]
struct Line<W, H> {
    owner: u64,
    /// The owner's lock, once it holds one.
    holder: Option<H>,
    /// When the owner's own acquiring ends at the latest.
    owner_deadline: Instant,
    /// Since when the lock has passed from caller to caller of this line
    /// without an acquisition of its own, or a hand-off that yielded, in
    /// between.
    streak_since: Option<Instant>,
    /// Whether the hand-off under way yields to other managers' marks.
    yielding: bool,
    waiters: VecDeque<Waiting<W>>,
}

/// Every line of one manager. `W` is the driver's handle on a waiting
/// caller; `H` its handle on a held lock.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::{Resources, Ttl};
/// use redlock_core::engine::{Handing, Joined, Lines, Look};
/// let mut lines: Lines<&str, ()> = Lines::new(Duration::from_millis(200), Duration::from_millis(200));
/// let (now, ttl, key) = (Instant::now(), Ttl::new(Duration::from_secs(1))?, Resources::one("k")?);
/// let deadline = now + Duration::from_secs(5);
/// let Joined::Owner(first) = lines.join(&key, ttl, deadline, "a") else { unreachable!() };
/// let Joined::Waiting(second) = lines.join(&key, ttl, deadline, "b") else { unreachable!() };
/// assert!(lines.hold(&key, first, (), now, false));
/// assert!(matches!(lines.look(&key, second, now, |_| Some(deadline)), Look::Wait(_)));
/// let mut expired = Vec::new();
/// match lines.release(&key, Some(first), now, &mut expired) {
///     Handing::Next { waiter, .. } => assert_eq!(waiter.who, "b"),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Lines<W, H> {
    map: HashMap<Resources, Line<W, H>>,
    next_ticket: u64,
    /// How long after its deadline an owner that never got a lock is taken
    /// for gone.
    grace: Duration,
    /// How long local passing goes on before hand-offs yield.
    streak: Duration,
}

impl<W, H> Lines<W, H> {
    /// No lines yet. `grace`: how long past its own deadline an owner that
    /// never got a lock counts as alive; `streak`: how long the lock may
    /// pass among the line's callers before hand-offs yield to other
    /// managers (the longest pause between rounds suits).
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    #[must_use]
    pub fn new(grace: Duration, streak: Duration) -> Self {
        Lines {
            map: HashMap::new(),
            next_ticket: 1,
            grace,
            streak,
        }
    }

    /// Joins the line for `resources`: owner at once when nobody else wants
    /// them, otherwise a waiter at the back.
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    pub fn join(&mut self, resources: &Resources, ttl: Ttl, deadline: Instant, who: W) -> Joined {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        match self.map.entry(resources.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(Line {
                    owner: ticket,
                    holder: None,
                    owner_deadline: deadline,
                    streak_since: None,
                    yielding: false,
                    waiters: VecDeque::new(),
                });
                Joined::Owner(ticket)
            }
            Entry::Occupied(mut line) => {
                line.get_mut().waiters.push_back(Waiting {
                    ticket,
                    ttl,
                    deadline,
                    who,
                });
                Joined::Waiting(ticket)
            }
        }
    }

    /// A waiter `ticket` looks at its line at `now`; `valid_until` tells
    /// how long the owner's lock is valid (`None`: it is gone).
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    pub fn look(
        &mut self,
        resources: &Resources,
        ticket: u64,
        now: Instant,
        valid_until: impl FnOnce(&H) -> Option<Instant>,
    ) -> Look {
        let grace = self.grace;
        let Some(line) = self.map.get_mut(resources) else {
            return Look::Left;
        };
        let Some(at) = line.waiters.iter().position(|w| w.ticket == ticket) else {
            return Look::Left;
        };
        if now >= line.waiters[at].deadline {
            line.waiters.remove(at);
            return Look::Left;
        }
        // When the owner stops counting as alive: once its lock's validity
        // ended, or a while after its acquiring should have ended.
        let lapses = match line.holder.as_ref() {
            Some(holder) => valid_until(holder).unwrap_or(now),
            None => later(line.owner_deadline, grace),
        };
        if now < lapses {
            return Look::Wait(lapses);
        }
        if at == 0 {
            if let Some(me) = line.waiters.pop_front() {
                line.owner = me.ticket;
                line.holder = None;
                line.owner_deadline = me.deadline;
            }
            return Look::TakeOver;
        }
        // The first waiter takes over; look again soon after.
        Look::Wait(later(now, grace / 4))
    }

    /// The owner `ticket` acquired (`handed`: by its hand-off round): it
    /// stays the owner while `holder`'s lock lasts. Returns whether it is
    /// still the owner (it is unless it was taken for gone).
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    pub fn hold(
        &mut self,
        resources: &Resources,
        ticket: u64,
        holder: H,
        now: Instant,
        handed: bool,
    ) -> bool {
        match self.map.get_mut(resources) {
            Some(line) if line.owner == ticket => {
                line.holder = Some(holder);
                // A hand-off that yielded and was granted found no other
                // manager waiting: local passing may go on for another
                // streak before it looks again.
                if !handed || line.yielding || line.streak_since.is_none() {
                    line.streak_since = Some(now);
                }
                line.yielding = false;
                true
            }
            _ => false,
        }
    }

    /// The owner `ticket` gives up without a lock: the next waiter, if any,
    /// owns the line and acquires itself. Expired waiters dropped on the
    /// way go to `expired`.
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    pub fn leave(
        &mut self,
        resources: &Resources,
        ticket: u64,
        now: Instant,
        expired: &mut Vec<W>,
    ) -> Option<Waiting<W>> {
        let line = self.map.get_mut(resources)?;
        if line.owner != ticket {
            return None;
        }
        match next_waiter(line, now, expired) {
            Some(next) => {
                line.owner = next.ticket;
                line.holder = None;
                line.owner_deadline = next.deadline;
                Some(next)
            }
            None => {
                self.remove(resources);
                None
            }
        }
    }

    /// The lock of `ticket` (if it came through a line) is being released
    /// at `now`. Expired waiters dropped on the way go to `expired`.
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    pub fn release(
        &mut self,
        resources: &Resources,
        ticket: Option<u64>,
        now: Instant,
        expired: &mut Vec<W>,
    ) -> Handing<W> {
        let streak = self.streak;
        let Some(line) = self.map.get_mut(resources) else {
            return Handing::Plain;
        };
        if ticket != Some(line.owner) {
            return Handing::Plain;
        }
        match next_waiter(line, now, expired) {
            Some(waiter) => {
                let yields = line
                    .streak_since
                    .is_none_or(|since| now.saturating_duration_since(since) >= streak);
                line.owner = waiter.ticket;
                line.holder = None;
                line.owner_deadline = waiter.deadline;
                line.yielding = yields;
                Handing::Next { waiter, yields }
            }
            None => {
                self.remove(resources);
                Handing::Freed
            }
        }
    }

    /// How many lines there are.
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is no line.
    ///
    /// # Examples
    ///
    /// See [`Lines`].
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Removes a line, and gives back the map's memory once it is mostly
    /// empty (after many locks were held at once).
    fn remove(&mut self, resources: &Resources) {
        self.map.remove(resources);
        if self.map.capacity() > 64 && self.map.len() * 4 < self.map.capacity() {
            self.map.shrink_to(self.map.len() * 2);
        }
    }
}

/// Takes the first waiter whose deadline has not passed; expired ones go to
/// `expired`.
fn next_waiter<W, H>(
    line: &mut Line<W, H>,
    now: Instant,
    expired: &mut Vec<W>,
) -> Option<Waiting<W>> {
    while let Some(next) = line.waiters.pop_front() {
        if now < next.deadline {
            return Some(next);
        }
        expired.push(next.who);
    }
    None
}
