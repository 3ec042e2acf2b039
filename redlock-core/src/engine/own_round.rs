//! A lone caller's own round: it sends the round's requests to the nodes
//! itself and reads their answers on its own thread, without waking a node
//! worker. What is decided here, with time passed in: whether a round is
//! the caller's own ([`OwnRound::applies`]), which nodes it sends to itself
//! ([`OwnRound::takes`]), and in which order and for how long it waits for
//! each answer ([`OwnRound::next`]).
//!
//! The caller reads the answers in node order, waiting on each a short
//! slice ([`WAIT_SLICE`]) while others are still out, so that a node that
//! froze since its last answer holds the round only until the others
//! decided it. The poller, which reads many callers' rounds the same way,
//! waits on all its nodes' connections at once where the backend offers
//! their descriptors
//! ([`Started::readiness`](crate::backend::Started::readiness)), and reads
//! whichever answer came first, from the node [`OwnRound::position`] on
//! ([`OwnRound::pending`], [`OwnRound::point`]). Once the round is decided, nobody waits for the nodes not
//! read yet ([`OwnRound::rest`]): a backend that can leaves their answers
//! on their connections, to be read before anything else sent there
//! ([`Started::detach`](crate::backend::Started::detach)), so the caller
//! returns at once. A backend that cannot reads them within a grace of
//! four times the round's time so far, at least [`DECIDED_GRACE`] and
//! never past the round's deadline ([`OwnRound::by`]): their answers were
//! sent with the others' and are normally in already. A node silent by
//! the end of its wait counts as failed for this round, and goes through
//! its worker until it answers again ([`OwnRound::takes`]).

use std::time::{Duration, Instant};

use crate::decide::deadline::later;

/// How long a caller waits for one node's answer at a time while others
/// are still out.
///
/// # Examples
///
/// ```
/// assert!(redlock_core::engine::WAIT_SLICE < redlock_core::engine::DECIDED_GRACE);
/// ```
pub const WAIT_SLICE: Duration = Duration::from_millis(1);

/// The least time a decided round still waits for the answers of the
/// nodes not read yet.
///
/// # Examples
///
/// See [`WAIT_SLICE`].
pub const DECIDED_GRACE: Duration = Duration::from_millis(2);

/// The next answer to read: wait for `node`'s until `until`; an `until`
/// not after now means take what the node has (its answer, or a timeout).
///
/// # Examples
///
/// See [`OwnRound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextRead {
    /// The node to read.
    pub node: usize,
    /// How long to wait for it.
    pub until: Instant,
}

/// The reading of one own round's answers: the nodes not read yet, each
/// with what the driver needs to read it (`T`: its request under way).
///
/// # Examples
///
/// Three nodes; node 0 answers at once, node 1 only after a slice, and the
/// round is decided with node 2's answer, which leaves node 1 a grace:
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::engine::{OwnRound, NextRead, WAIT_SLICE};
///
/// let sent = Instant::now();
/// let deadline = sent + Duration::from_millis(50);
/// let mut own = OwnRound::new(sent, deadline, vec![(0, "a"), (1, "b"), (2, "c")]);
/// let next = own.next(sent).expect("node 0");
/// assert_eq!(next, NextRead { node: 0, until: sent + WAIT_SLICE });
/// assert_eq!(own.current(), Some(&mut "a"));
/// assert_eq!(own.take(), Some((0, "a")));
/// // Node 1 does not answer within its slice: node 2 is read next.
/// assert_eq!(own.next(sent).map(|r| r.node), Some(1));
/// own.not_yet();
/// assert_eq!(own.take(), Some((2, "c")));
/// // The round is decided 1 ms after it was sent: node 1 gets 4 ms more.
/// let now = sent + Duration::from_millis(1);
/// own.decided(now);
/// let last = own.next(now).expect("node 1");
/// assert_eq!(last, NextRead { node: 1, until: now + Duration::from_millis(4) });
/// assert_eq!(own.take(), Some((1, "b")));
/// assert_eq!(own.next(last.until), None);
/// ```
#[derive(Debug, Clone)]
pub struct OwnRound<T> {
    /// The nodes not read yet, in node order, with their requests.
    pending: Vec<(usize, T)>,
    /// The position in `pending` of the node to read next.
    cursor: usize,
    sent_at: Instant,
    deadline: Instant,
    /// The deadline, or the end of the grace once the round is decided.
    by: Instant,
}

impl OwnRound<()> {
    /// Whether a round is the caller's own: own rounds are on
    /// ([`Builder::own_rounds`](crate::Builder::own_rounds)) and no more
    /// callers drive a machine of the manager (`waiting`) than the caller
    /// knows of (`drivers`: itself, when it drives one).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::engine::OwnRound;
    /// assert!(OwnRound::applies(true, 1, 1));
    /// assert!(!OwnRound::applies(true, 2, 1));
    /// assert!(!OwnRound::applies(false, 1, 1));
    /// ```
    #[must_use]
    pub fn applies(enabled: bool, waiting: usize, drivers: usize) -> bool {
        enabled && waiting <= drivers
    }

    /// Whether the caller sends a node its request itself: only when the
    /// node's worker has nothing queued (`queued` jobs unfinished), so that
    /// the request runs after what was queued before it, and the node's
    /// last request did not fail (`failing`): a frozen node would hold the
    /// caller until the round's deadline instead of letting it decide at a
    /// quorum.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::engine::OwnRound;
    /// assert!(OwnRound::takes(0, false));
    /// assert!(!OwnRound::takes(1, false));
    /// assert!(!OwnRound::takes(0, true));
    /// ```
    #[must_use]
    pub fn takes(queued: usize, failing: bool) -> bool {
        queued == 0 && !failing
    }
}

impl<T> OwnRound<T> {
    /// The reading of a round sent at `sent_at` to the nodes of `pending`
    /// (in node order, each with its request), whose answers are due by
    /// `deadline`.
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    #[must_use]
    pub fn new(sent_at: Instant, deadline: Instant, pending: Vec<(usize, T)>) -> Self {
        OwnRound {
            pending,
            cursor: 0,
            sent_at,
            deadline,
            by: deadline,
        }
    }

    /// The answer to read next, or `None` once every node was read.
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    #[must_use]
    pub fn next(&self, now: Instant) -> Option<NextRead> {
        let node = self.pending.get(self.cursor)?.0;
        let until = if now >= self.by || self.pending.len() == 1 {
            self.by
        } else {
            later(now, WAIT_SLICE).min(self.by)
        };
        Some(NextRead { node, until })
    }

    /// The wait for [`OwnRound::next`]'s node ended without its answer:
    /// the next node's turn.
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    pub fn not_yet(&mut self) {
        self.cursor += 1;
        if self.cursor >= self.pending.len() {
            self.cursor = 0;
        }
    }

    /// The request of [`OwnRound::next`]'s node, to wait on.
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    #[must_use]
    pub fn current(&mut self) -> Option<&mut T> {
        self.pending.get_mut(self.cursor).map(|(_, t)| t)
    }

    /// The nodes not read yet, in node order, with their requests: for a
    /// driver that waits on all of them at once, and then
    /// [points](OwnRound::point) at the one whose answer came.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::engine::OwnRound;
    /// let sent = Instant::now();
    /// let mut own = OwnRound::new(sent, sent + Duration::from_millis(50), vec![(0, 'a'), (3, 'b')]);
    /// assert_eq!(own.pending(), &[(0, 'a'), (3, 'b')]);
    /// own.point(1);
    /// assert_eq!(own.next(sent).map(|r| r.node), Some(3));
    /// assert_eq!(own.take(), Some((3, 'b')));
    /// ```
    #[must_use]
    pub fn pending(&self) -> &[(usize, T)] {
        &self.pending
    }

    /// The position in [`OwnRound::pending`] of [`OwnRound::next`]'s node.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::engine::OwnRound;
    /// let sent = Instant::now();
    /// let mut own = OwnRound::new(sent, sent + Duration::from_millis(50), vec![(0, ()), (1, ())]);
    /// own.not_yet();
    /// assert_eq!(own.position(), 1);
    /// ```
    #[must_use]
    pub fn position(&self) -> usize {
        self.cursor
    }

    /// Makes the node at `position` in [`OwnRound::pending`] the one to
    /// read next (its answer came first); a position past the end is
    /// ignored.
    ///
    /// # Examples
    ///
    /// See [`OwnRound::pending`].
    pub fn point(&mut self, position: usize) {
        if position < self.pending.len() {
            self.cursor = position;
        }
    }

    /// Takes [`OwnRound::next`]'s node and its request out, to read its
    /// answer (or its failure); the next node's turn follows.
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    pub fn take(&mut self) -> Option<(usize, T)> {
        let taken = (self.cursor < self.pending.len()).then(|| self.pending.remove(self.cursor));
        if self.cursor >= self.pending.len() {
            self.cursor = 0;
        }
        taken
    }

    /// The round's machine has something for its driver (a decision, most
    /// often) since an answer read at `now`: the nodes not read yet get the
    /// grace (once).
    ///
    /// # Examples
    ///
    /// See [`OwnRound`].
    pub fn decided(&mut self, now: Instant) {
        if self.by == self.deadline {
            let grace = (now.saturating_duration_since(self.sent_at) * 4).max(DECIDED_GRACE);
            self.by = later(now, grace).min(self.deadline);
        }
    }

    /// Takes out the nodes not read yet, in node order, with their requests.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::engine::OwnRound;
    /// let sent = Instant::now();
    /// let mut own = OwnRound::new(sent, sent + Duration::from_millis(50), vec![(0, 'a'), (1, 'b')]);
    /// assert_eq!(own.take(), Some((0, 'a')));
    /// assert_eq!(own.rest(), vec![(1, 'b')]);
    /// assert_eq!(own.next(sent), None);
    /// ```
    pub fn rest(&mut self) -> Vec<(usize, T)> {
        self.cursor = 0;
        std::mem::take(&mut self.pending)
    }

    /// When the node being read counts as failed: the round's deadline, or
    /// the end of the grace once it is decided.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::engine::OwnRound;
    /// let sent = Instant::now();
    /// let own = OwnRound::new(sent, sent + Duration::from_millis(50), vec![(0, ())]);
    /// assert_eq!(own.by(), sent + Duration::from_millis(50));
    /// ```
    #[must_use]
    pub fn by(&self) -> Instant {
        self.by
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_grace_starts_once_and_stays_within_the_deadline() {
        let sent = Instant::now();
        let mut own = OwnRound::new(sent, sent + ms(10), vec![(0, ()), (1, ()), (2, ())]);
        own.decided(sent + ms(2));
        // Four times 2 ms would pass the deadline.
        assert_eq!(own.by(), sent + ms(10));
        let mut own = OwnRound::new(sent, sent + ms(50), vec![(0, ()), (1, ())]);
        own.decided(sent + ms(1));
        assert_eq!(own.by(), sent + ms(5));
        // A later decision does not move it again.
        own.decided(sent + ms(3));
        assert_eq!(own.by(), sent + ms(5));
    }

    #[test]
    fn past_its_end_every_node_left_is_taken_at_once() {
        let sent = Instant::now();
        let mut own = OwnRound::new(sent, sent + ms(5), vec![(0, 'a'), (1, 'b'), (2, 'c')]);
        own.not_yet();
        let late = sent + ms(6);
        let read = own.next(late).unwrap_or_else(|| unreachable!());
        assert_eq!(
            read,
            NextRead {
                node: 1,
                until: sent + ms(5)
            }
        );
        assert!(read.until <= late);
        assert_eq!(own.take(), Some((1, 'b')));
        assert_eq!(own.next(late).map(|r| r.node), Some(2));
        assert_eq!(own.take(), Some((2, 'c')));
        assert_eq!(own.next(late).map(|r| r.node), Some(0));
        assert_eq!(own.take(), Some((0, 'a')));
        assert_eq!(own.next(late), None);
        assert_eq!(own.take(), None);
    }

    #[test]
    fn the_last_node_is_waited_for_until_the_end() {
        let sent = Instant::now();
        let mut own = OwnRound::new(sent, sent + ms(50), vec![(3, ()), (4, ())]);
        assert_eq!(own.next(sent).map(|r| r.until), Some(sent + WAIT_SLICE));
        assert!(own.take().is_some());
        assert_eq!(
            own.next(sent),
            Some(NextRead {
                node: 4,
                until: sent + ms(50)
            })
        );
    }
}
