//! What a holder knows about its lock: validity, TTLs sent, loss, and how
//! extend and release rounds change that.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decide::deadline::later;
use crate::engine::{Decided, Message, Settings};
use crate::{LockError, LostReason, RoundReport, Ttl, Verdict};

/// A held lock's state, as the guard, the keeper and the simulator see it.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::{NodeId, Ttl, engine::{Lease, Settings}};
/// let now = Instant::now();
/// let ttl = Ttl::new(Duration::from_secs(10))?;
/// let mut lease = Lease::<std::io::Error>::new(ttl, now + Duration::from_secs(9));
/// assert!(lease.ensure_held(now).is_ok());
/// assert!(lease.ensure_held(now + Duration::from_secs(9)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Lease<E> {
    ttl: Ttl,
    /// The longest TTL ever sent: how long a key may outlive a failed release.
    longest: Ttl,
    valid_until: Instant,
    /// While an extend is under way: the most it can leave of the
    /// validity, its start plus its TTL less the drift (the nodes may set
    /// that TTL at any moment from its start).
    extending: Option<Instant>,
    released: bool,
    lost: Option<(LostReason, Option<Arc<LockError<E>>>)>,
    /// The nodes that refused the winning round (see [`Lease::skipping`]).
    skips: Option<Arc<[bool]>>,
}

impl<E> Lease<E> {
    /// A lock acquired with `ttl`, valid until `valid_until`.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn new(ttl: Ttl, valid_until: Instant) -> Self {
        Lease {
            ttl,
            longest: ttl,
            valid_until,
            extending: None,
            released: false,
            lost: None,
            skips: None,
        }
    }

    /// The lease of a lock whose winning round `refused` flags the nodes
    /// that refused ([`Acquired::refused`](crate::engine::Acquired)): those
    /// never held it, so its extend and release rounds need not go there
    /// (pass [`Lease::skips`] to [`Single::skipping`](crate::engine::Single::skipping)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::{engine::Lease, Ttl};
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let lease = Lease::<std::io::Error>::new(ttl, Instant::now())
    ///     .skipping(Some(vec![false, true, false].into()));
    /// assert_eq!(lease.skips().map(|s| s.to_vec()), Some(vec![false, true, false]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn skipping(mut self, refused: Option<Arc<[bool]>>) -> Self {
        self.skips = refused.filter(|refused| refused.contains(&true));
        self
    }

    /// The nodes its extends and release skip, if any (see
    /// [`Lease::skipping`]).
    ///
    /// # Examples
    ///
    /// See [`Lease::skipping`].
    #[must_use]
    pub fn skips(&self) -> Option<&Arc<[bool]>> {
        self.skips.as_ref()
    }

    /// The TTL of the last successful acquire or extend.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn ttl(&self) -> Ttl {
        self.ttl
    }

    /// When the validity ends (while an extend is under way, at most its
    /// start plus its TTL less the drift: a shorter extend shortens the
    /// lock on the nodes that run it, whatever its outcome).
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.extending
            .map_or(self.valid_until, |bound| self.valid_until.min(bound))
    }

    /// The validity left at `now`.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn validity(&self, now: Instant) -> Duration {
        self.valid_until().saturating_duration_since(now)
    }

    /// Whether it was released (or is being released).
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn is_released(&self) -> bool {
        self.released
    }

    /// The recorded loss, if any.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn lost(&self) -> Option<LostReason> {
        self.lost.as_ref().map(|(reason, _)| *reason)
    }

    /// Whether the lock is lost at `now`: a loss was recorded or the
    /// validity ended.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    #[must_use]
    pub fn is_lost(&self, now: Instant) -> bool {
        self.lost.is_some() || now >= self.valid_until()
    }

    /// `Ok` while held and valid at `now`.
    ///
    /// # Errors
    ///
    /// [`LockError::Lost`] with the reason.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn ensure_held(&self, now: Instant) -> Result<(), LockError<E>> {
        if let Some((reason, cause)) = &self.lost {
            return Err(LockError::Lost {
                reason: *reason,
                cause: cause.clone(),
            });
        }
        if now < self.valid_until() {
            Ok(())
        } else {
            Err(LockError::Lost {
                reason: LostReason::Expired,
                cause: None,
            })
        }
    }

    /// Records a loss (the first one wins; none once released); returns
    /// whether it was recorded now.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn mark_lost(&mut self, reason: LostReason, cause: Option<LockError<E>>) -> bool {
        if self.lost.is_some() || self.released {
            return false;
        }
        self.lost = Some((reason, cause.map(Arc::new)));
        true
    }

    /// Starts an extend to `ttl` at `now`: the message to send to every
    /// node. Until the round is over the validity is at most `now + ttl -
    /// drift` (the nodes may set `ttl` from now on). A lost or expired lock is not extended: an expired one is
    /// marked lost, since another client may have held it since.
    ///
    /// # Errors
    ///
    /// [`LockError::Lost`] for a lock marked lost, [`LockError::NotHeld`]
    /// (with no node tried) for one whose validity ended.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn begin_extend(
        &mut self,
        now: Instant,
        ttl: Ttl,
        settings: &Settings,
    ) -> Result<Message, LockError<E>> {
        if let Some((reason, cause)) = &self.lost {
            return Err(LockError::Lost {
                reason: *reason,
                cause: cause.clone(),
            });
        }
        if now >= self.valid_until() {
            self.lost = Some((LostReason::Expired, None));
            return Err(LockError::NotHeld(RoundReport::untried(
                settings.nodes.len(),
            )));
        }
        self.longest = self.longest.max(ttl);
        let left = ttl.as_duration().checked_sub(settings.drift(ttl));
        self.extending = Some(left.map_or(now, |left| later(now, left)));
        Ok(Message::Extend(ttl))
    }

    /// The extend round to `ttl` is over: the new validity, or why not.
    ///
    /// A failed round may still have set `ttl` on the nodes that granted or
    /// did not answer, so the validity becomes at most `start + ttl - drift`
    /// (a failed shorter extend shortens the lock; a longer one leaves it).
    /// A refusal by a quorum (the keys are gone) ends it at once.
    ///
    /// # Errors
    ///
    /// [`LockError::NotHeld`], [`LockError::NoQuorum`] or
    /// [`LockError::ValidityExhausted`].
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn end_extend(
        &mut self,
        ttl: Ttl,
        decided: Decided<E>,
        settings: &Settings,
    ) -> Result<Duration, LockError<E>> {
        let Decided { round, decided_at } = decided;
        let drift = settings.drift(ttl);
        self.extending = None;
        match round.verdict(decided_at, ttl, drift) {
            Verdict::Held { validity } => {
                if self.lost.is_none() {
                    self.ttl = ttl;
                    self.valid_until = later(decided_at, validity);
                }
                Ok(validity)
            }
            verdict => {
                let bound = ttl
                    .as_duration()
                    .checked_sub(drift)
                    .map_or(round.started, |left| later(round.started, left));
                self.valid_until = self.valid_until.min(bound);
                if verdict == Verdict::Refused {
                    self.valid_until = self.valid_until.min(decided_at);
                }
                Err(round.into_error(
                    verdict,
                    decided_at,
                    ttl,
                    &settings.nodes,
                    LockError::NotHeld,
                ))
            }
        }
    }

    /// Starts the release: the message to send to every node.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn begin_release(&mut self) -> Message {
        self.released = true;
        Message::Release(self.longest)
    }

    /// The release round is over: whether a quorum still held the lock.
    ///
    /// # Errors
    ///
    /// [`LockError::NotHeld`] when a quorum no longer held it (it had
    /// expired), [`LockError::NoQuorum`] when too many nodes failed.
    ///
    /// # Examples
    ///
    /// See [`Lease`].
    pub fn end_release(
        &self,
        decided: Decided<E>,
        settings: &Settings,
    ) -> Result<(), LockError<E>> {
        let Decided { round, decided_at } = decided;
        match round.verdict(decided_at, self.ttl, settings.drift(self.ttl)) {
            Verdict::Held { .. } | Verdict::ValidityExhausted => Ok(()),
            verdict => Err(round.into_error(
                verdict,
                decided_at,
                self.ttl,
                &settings.nodes,
                LockError::NotHeld,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Lease;
    use crate::engine::Settings;
    use crate::{NodeId, Ttl};

    #[test]
    fn a_shorter_extend_under_way_bounds_the_validity() -> Result<(), Box<dyn std::error::Error>> {
        let settings = Settings::new(vec![NodeId::new("a")].into());
        let now = Instant::now();
        let mut lease = Lease::<std::io::Error>::new(
            Ttl::new(Duration::from_secs(10))?,
            now + Duration::from_secs(9),
        );
        lease.begin_extend(now, Ttl::new(Duration::from_secs(1))?, &settings)?;
        assert!(lease.valid_until() <= now + Duration::from_secs(1));
        assert!(lease.is_lost(now + Duration::from_secs(1)));
        // A longer one leaves it as it was.
        let mut lease = Lease::<std::io::Error>::new(
            Ttl::new(Duration::from_secs(10))?,
            now + Duration::from_secs(9),
        );
        lease.begin_extend(now, Ttl::new(Duration::from_secs(20))?, &settings)?;
        assert_eq!(lease.valid_until(), now + Duration::from_secs(9));
        Ok(())
    }
}
