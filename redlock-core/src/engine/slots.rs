//! The keys of a semaphore's permits and the acquisition of one of them:
//! in one place for [`Redlock::semaphore`](crate::Redlock::semaphore) and
//! the simulator.

use std::sync::Arc;
use std::time::Instant;

use crate::engine::{Acquire, Settings};
use crate::{ConfigError, Queued, Resources, Ttl};

/// The most permits a semaphore may have: a call that finds every permit
/// taken makes one round per permit (see [`Semaphore`](crate::Semaphore)).
pub const MAX_PERMITS: u32 = 64;

pub(crate) use crate::keys::PERMIT_INFIX;

/// The key of permit `slot` of semaphore `name`.
pub(crate) fn permit_key(name: &str, slot: u32) -> String {
    format!("{name}{PERMIT_INFIX}{slot}")
}

/// The permits of a semaphore (permit `i` is the key `name`, U+001F,
/// `permit:i`: see [`keys`](crate::keys)),
/// each a lock of its own, and how a caller takes one of them
/// ([`Slots::acquire_one`]).
///
/// At most [`Slots::count`] callers hold a slot at a time, because each
/// slot is a Redlock mutex (see `docs/safety.md`).
///
/// # Examples
///
/// ```
/// use redlock_core::engine::Slots;
/// let permits = Slots::permits("jobs", 3)?;
/// assert_eq!(permits.count(), 3);
/// assert_eq!(permits.slots()[2].keys(), ["jobs\u{1f}permit:2"]);
/// assert_eq!(permits.all().keys(), ["jobs\u{1f}permit:0", "jobs\u{1f}permit:1", "jobs\u{1f}permit:2"]);
/// assert_eq!(permits.slot_of(&permits.slots()[1]), Some(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    /// Each slot's resources, by slot.
    slots: Arc<[Resources]>,
    /// Every slot at once.
    all: Resources,
}

impl Slots {
    /// The `permits` permits of semaphore `name`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoPermits`], [`ConfigError::TooManyPermits`] (more
    /// than [`MAX_PERMITS`]), [`ConfigError::EmptyKey`].
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{engine::Slots, ConfigError};
    /// assert_eq!(Slots::permits("s", 2)?.slots()[0].keys(), ["s\u{1f}permit:0"]);
    /// assert_eq!(Slots::permits("s", 0), Err(ConfigError::NoPermits));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn permits(name: &str, permits: u32) -> Result<Slots, ConfigError> {
        if permits == 0 {
            return Err(ConfigError::NoPermits);
        }
        if permits > MAX_PERMITS {
            return Err(ConfigError::TooManyPermits {
                permits,
                max: MAX_PERMITS,
            });
        }
        Self::of(name, permits, permit_key)
    }

    fn of(name: &str, count: u32, key: fn(&str, u32) -> String) -> Result<Slots, ConfigError> {
        crate::keys::check_name(name)?;
        let slots: Vec<Resources> = (0..count)
            .map(|slot| Resources::internal(vec![key(name, slot)]))
            .collect();
        let all = Resources::internal(
            slots
                .iter()
                .flat_map(|slot| slot.keys().iter().cloned())
                .collect(),
        );
        Ok(Slots {
            slots: slots.into(),
            all,
        })
    }

    /// How many slots there are (at least one).
    ///
    /// # Examples
    ///
    /// See [`Slots`].
    #[must_use]
    pub fn count(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// Each slot's resources (one key each), by slot.
    ///
    /// # Examples
    ///
    /// See [`Slots`].
    #[must_use]
    pub fn slots(&self) -> &Arc<[Resources]> {
        &self.slots
    }

    /// Every slot at once, as one multi-key resource set.
    ///
    /// # Examples
    ///
    /// See [`Slots`].
    #[must_use]
    pub fn all(&self) -> &Resources {
        &self.all
    }

    /// Which slot `resources` is, if it is one.
    ///
    /// # Examples
    ///
    /// See [`Slots`].
    #[must_use]
    pub fn slot_of(&self, resources: &Resources) -> Option<u32> {
        let slot = self.slots.iter().position(|slot| slot == resources)?;
        u32::try_from(slot).ok()
    }

    /// The acquisition of one slot, as a semaphore's permit takes it: one
    /// [`Acquire`] over the slots as alternatives ([`Acquire::one_of`]: the
    /// first slot at random, the next one at once when refused, a pause
    /// only after every slot was refused in a row). With `queued`, every
    /// round, the first too ([`Acquire::queue_first`]), carries the
    /// waiting mark and gives way to other managers' marks.
    /// `deadline` as in [`Acquire::new`] (`None`: one sweep).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::{NodeId, Ttl, engine::{Entropy, Machine, Settings, Slots}};
    /// use redlock_core::backend::{AcquireOutcome, Response, Token};
    /// # struct Zero;
    /// # impl Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 1 }
    /// # }
    /// let slots = Slots::permits("s", 3)?;
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let now = Instant::now();
    /// let mut acquire = slots.acquire_one::<std::io::Error>(settings, ttl, None, None);
    /// acquire.start(now, &mut Zero);
    /// let round = acquire.poll_transmit().unwrap();
    /// assert_eq!(round.claim().resources(), &slots.slots()[1], "the random first slot");
    /// let granted = Response::Acquire(AcquireOutcome::Granted { fence: None });
    /// acquire.handle_reply(now, round.round(), 0, Ok(granted));
    /// let permit = acquire.poll().unwrap()?;
    /// assert_eq!(slots.slot_of(permit.claim.resources()), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn acquire_one<E>(
        &self,
        settings: Settings,
        ttl: Ttl,
        deadline: Option<Instant>,
        queued: Option<Queued>,
    ) -> Acquire<E> {
        let first = self.slots.first().unwrap_or(&self.all).clone();
        let mut acquire = Acquire::new(settings, first, ttl, deadline, queued);
        acquire.one_of(Arc::clone(&self.slots));
        acquire.queue_first();
        acquire
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_limits() {
        let permits = Slots::permits("a:b", 2).unwrap_or_else(|_| unreachable!());
        assert_eq!(permits.slots()[1].keys(), ["a:b\u{1f}permit:1"]);
        assert_eq!(permits.slot_of(&permits.all), None);
        assert_eq!(Slots::permits("", 1), Err(ConfigError::EmptyKey));
        assert!(matches!(
            Slots::permits("a\u{1f}permit:0", 1),
            Err(ConfigError::ReservedChar { .. })
        ));
        assert_eq!(
            Slots::permits("r", MAX_PERMITS + 1),
            Err(ConfigError::TooManyPermits {
                permits: MAX_PERMITS + 1,
                max: MAX_PERMITS
            })
        );
        assert!(Slots::permits("s", MAX_PERMITS).is_ok());
    }
}
