//! The releases one node failed, kept for another try: which to keep, when
//! each is due again, when to give up, and the bound on how many are kept.
//! Sans-IO: the time comes in as `now`; the node workers and the simulator
//! both drive it.

use std::time::{Duration, Instant};

use crate::decide::deadline::later;

/// The first pause before a failed release is tried again.
pub const FIRST_RETRY: Duration = Duration::from_millis(10);

/// The longest pause between two tries of a failed release (the pause
/// doubles from [`FIRST_RETRY`] up to this).
pub const LAST_RETRY: Duration = Duration::from_secs(1);

/// What a node's worker with nothing queued does ([`Kept::idle`]).
///
/// # Examples
///
/// See [`Kept::idle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Wait for a request.
    Park,
    /// Wait for a request, or until this instant, when a kept release is
    /// due.
    Until(Instant),
    /// Stop: the manager is gone and nothing kept is due before its exit
    /// drain ends.
    Exit,
}

/// The most failed releases one node keeps for another try (the figure
/// [`Event::ReleasesDropped`](crate::Event::ReleasesDropped) and
/// `NodeStats::releases_dropped` document): past it, the oldest is dropped
/// and its keys on the node are left to their TTL. Without a bound, a node
/// down under steady churn would keep rate x TTL of them.
pub const KEPT_RELEASES: usize = 4096;

/// How a release that failed before is tried again: handed out with each
/// release [`Kept`] gives back, and passed back to [`Kept::failed`] if that
/// try fails too.
///
/// # Examples
///
/// See [`Kept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    give_up: Instant,
    pause: Duration,
    /// Its place among the node's failed releases, oldest first.
    seq: u64,
}

impl Retry {
    /// When every key the release could delete has surely expired: it is
    /// not tried after this.
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn give_up(&self) -> Instant {
        self.give_up
    }

    /// The pause that came before this try.
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn pause(&self) -> Duration {
        self.pause
    }
}

/// A failed release, kept.
#[derive(Debug)]
struct Entry<T> {
    release: T,
    retry: Retry,
    next_try: Instant,
}

/// The releases one node failed, kept for another try until the node
/// answers them or every key they could delete has expired: the first try
/// again [`FIRST_RETRY`] after the failure, the pause doubling up to
/// [`LAST_RETRY`]; at most [`KEPT_RELEASES`], the oldest (by first failure)
/// dropped first. `T` is what a driver needs to send the release again.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::engine::{Kept, FIRST_RETRY};
///
/// let mut kept = Kept::new();
/// let now = Instant::now();
/// // The release of "job" failed; its keys live 30 s at most.
/// kept.failed(now, "job", Duration::from_secs(30), None);
/// assert_eq!(kept.next_due(), Some(now + FIRST_RETRY));
/// assert!(kept.take_due(now).is_empty());
/// // Due: tried again, and it fails again: the pause doubles.
/// let mut due = kept.take_due(now + FIRST_RETRY);
/// let (release, retry) = due.pop().expect("due");
/// assert_eq!(retry.pause(), FIRST_RETRY);
/// kept.failed(now + FIRST_RETRY, release, Duration::from_secs(30), Some(retry));
/// assert_eq!(kept.next_due(), Some(now + FIRST_RETRY * 3));
/// // A flush takes every one left, due or not.
/// assert_eq!(kept.take_all(now + FIRST_RETRY).len(), 1);
/// assert!(kept.is_empty());
/// assert_eq!(kept.take_dropped(), 0);
/// ```
#[derive(Debug)]
pub struct Kept<T> {
    releases: Vec<Entry<T>>,
    /// The number the next release to fail gets.
    next_seq: u64,
    /// Releases kept at their first failure since the last
    /// [`Kept::take_kept`].
    kept: u64,
    /// Releases dropped since the last [`Kept::take_dropped`].
    dropped: u64,
    cap: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept::new()
    }
}

impl<T> Kept<T> {
    /// Nothing kept, at most [`KEPT_RELEASES`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::engine::Kept;
    /// assert!(Kept::<()>::new().is_empty());
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Kept {
            releases: Vec::new(),
            next_seq: 0,
            kept: 0,
            dropped: 0,
            cap: KEPT_RELEASES,
        }
    }

    /// A release failed at `now`: keeps it for another try. `ttl` is the
    /// longest TTL the release's keys were ever set with; `retry` is what
    /// came with it if it was itself a try again (from
    /// [`take_due`](Self::take_due) or [`take_all`](Self::take_all)).
    /// Nothing is kept once every key it could delete has expired. Keeping
    /// one too many drops the oldest (counted for
    /// [`take_dropped`](Self::take_dropped)).
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    pub fn failed(&mut self, now: Instant, release: T, ttl: Duration, retry: Option<Retry>) {
        let first = retry.is_none();
        let retry = match retry {
            Some(retry) => Retry {
                pause: retry.pause.saturating_mul(2).min(LAST_RETRY),
                ..retry
            },
            // Keys set by requests this node ran before the failure expire by
            // then (a backend keeps one node's requests in order).
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                Retry {
                    give_up: later(now, ttl),
                    pause: FIRST_RETRY,
                    seq,
                }
            }
        };
        if now < retry.give_up {
            if first {
                self.kept += 1;
            }
            self.keep(Entry {
                release,
                next_try: later(now, retry.pause),
                retry,
            });
        }
    }

    /// Keeps `entry`, dropping the oldest kept one when that makes one
    /// too many (`entry` itself, if it is the oldest).
    fn keep(&mut self, entry: Entry<T>) {
        self.releases.push(entry);
        if self.releases.len() > self.cap {
            let oldest = self
                .releases
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| r.retry.seq)
                .map(|(i, _)| i);
            if let Some(oldest) = oldest {
                self.releases.swap_remove(oldest);
                self.dropped += 1;
            }
        }
    }

    /// Takes the releases due at `now` to send again, forgetting those
    /// whose keys have surely expired.
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn take_due(&mut self, now: Instant) -> Vec<(T, Retry)> {
        self.releases.retain(|r| now < r.retry.give_up);
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.releases.len() {
            if self.releases[i].next_try <= now {
                let entry = self.releases.swap_remove(i);
                due.push((entry.release, entry.retry));
            } else {
                i += 1;
            }
        }
        due
    }

    /// Takes every release still worth sending at `now`, due or not (a
    /// flush asks whether the node caught up).
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn take_all(&mut self, now: Instant) -> Vec<(T, Retry)> {
        self.releases.retain(|r| now < r.retry.give_up);
        self.releases
            .drain(..)
            .map(|entry| (entry.release, entry.retry))
            .collect()
    }

    /// When the next kept release is due (for a timer).
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn next_due(&self) -> Option<Instant> {
        self.releases.iter().map(|r| r.next_try).min()
    }

    /// What a node's worker with nothing queued does at `now`: wait for
    /// work ([`Idle::Park`]), or until the next kept release is due
    /// ([`Idle::Until`]). Once its manager is gone and the exit drain runs
    /// until `closing` ([`Settings::exit_deadline`](crate::engine::Settings::exit_deadline)),
    /// it still waits for kept releases due before then, and otherwise
    /// stops ([`Idle::Exit`]): what is kept past the drain is left to its
    /// TTL.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// use redlock_core::engine::{Idle, Kept, FIRST_RETRY};
    /// let now = Instant::now();
    /// let mut kept = Kept::new();
    /// assert_eq!(kept.idle(now, None), Idle::Park);
    /// assert_eq!(kept.idle(now, Some(now + Duration::from_secs(1))), Idle::Exit);
    /// kept.failed(now, "job", Duration::from_secs(30), None);
    /// let due = kept.next_due().expect("kept");
    /// assert_eq!(kept.idle(now, None), Idle::Until(due));
    /// // The drain waits for it only when it is due before the drain ends.
    /// assert_eq!(kept.idle(now, Some(due + FIRST_RETRY)), Idle::Until(due));
    /// assert_eq!(kept.idle(now, Some(due)), Idle::Exit);
    /// ```
    #[must_use]
    pub fn idle(&self, now: Instant, closing: Option<Instant>) -> Idle {
        match (self.next_due(), closing) {
            (None, None) => Idle::Park,
            (Some(at), None) => Idle::Until(at),
            (Some(at), Some(by)) if at < by && now < by => Idle::Until(at),
            (_, Some(_)) => Idle::Exit,
        }
    }

    /// The releases kept at their first failure since the last call (to
    /// report them once; a release that fails again is not counted again).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::engine::Kept;
    /// let mut kept = Kept::new();
    /// kept.failed(Instant::now(), "job", Duration::from_secs(30), None);
    /// assert_eq!(kept.take_kept(), 1);
    /// assert_eq!(kept.take_kept(), 0, "counted once");
    /// ```
    pub fn take_kept(&mut self) -> u64 {
        std::mem::take(&mut self.kept)
    }

    /// The releases dropped for the bound since the last call (to report
    /// them once).
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }

    /// How many are kept.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::engine::Kept;
    /// assert_eq!(Kept::<()>::new().len(), 0);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.releases.len()
    }

    /// Whether none is kept.
    ///
    /// # Examples
    ///
    /// See [`Kept`].
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.releases.is_empty()
    }

    /// Gives back memory kept from a large backlog once few are left.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::engine::Kept;
    /// Kept::<()>::new().shrink(64);
    /// ```
    pub fn shrink(&mut self, to: usize) {
        if self.releases.capacity() > to && self.releases.len() < to / 4 {
            self.releases.shrink_to(to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_releases_are_capped_oldest_first_wherever_they_sit() {
        let now = Instant::now();
        let release = |seq| Entry {
            release: seq,
            retry: Retry {
                give_up: now + Duration::from_secs(60),
                pause: FIRST_RETRY,
                seq,
            },
            next_try: now,
        };
        let mut kept = Kept::new();
        // Full with 1 first and 3.. after it.
        for seq in [1].into_iter().chain(3..KEPT_RELEASES as u64 + 2) {
            kept.keep(release(seq));
        }
        assert_eq!((kept.len(), kept.dropped), (KEPT_RELEASES, 0));
        // Retries come back out of order: 2 drops 1 (at the front), and 0,
        // older than any kept, drops itself.
        kept.keep(release(2));
        kept.keep(release(0));
        assert_eq!(kept.len(), KEPT_RELEASES);
        assert_eq!(kept.dropped, 2);
        let oldest = kept.releases.iter().map(|r| r.retry.seq).min();
        assert_eq!(oldest, Some(2), "the two oldest went");
        // One more drops the oldest left.
        kept.keep(release(KEPT_RELEASES as u64 + 2));
        assert_eq!(kept.take_dropped(), 3);
        assert_eq!(kept.take_dropped(), 0, "counted once");
        assert!(kept.releases.iter().all(|r| r.retry.seq != 2));
    }

    #[test]
    fn the_pause_doubles_to_the_last_and_gives_up_at_the_ttl() {
        let start = Instant::now();
        let ttl = Duration::from_secs(3);
        let mut kept = Kept::new();
        kept.failed(start, (), ttl, None);
        let mut pauses = Vec::new();
        while let Some(at) = kept.next_due() {
            let mut due = kept.take_due(at);
            let Some(((), retry)) = due.pop() else { break };
            assert_eq!(retry.give_up(), start + ttl);
            pauses.push(retry.pause());
            kept.failed(at, (), ttl, Some(retry));
        }
        assert_eq!(
            pauses[..8]
                .iter()
                .map(Duration::as_millis)
                .collect::<Vec<_>>(),
            [10, 20, 40, 80, 160, 320, 640, 1000]
        );
        assert!(pauses.iter().all(|p| *p <= LAST_RETRY));
        assert!(kept.is_empty(), "given up at the TTL");
        kept.failed(start + ttl, (), Duration::ZERO, None);
        assert!(
            kept.is_empty(),
            "a release with nothing left to delete is not kept"
        );
    }
}
