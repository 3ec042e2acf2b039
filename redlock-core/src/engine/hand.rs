//! The hand-off of a line's lock ([`Handing::Next`](super::Handing::Next)):
//! the owner's release and the next waiter's first acquire round, made
//! into one ordered batch.
//!
//! Both drivers (the blocking shell and the simulator) send the batch as
//! it comes, in order, on each node's ordered connection: the release runs
//! on every node before the acquire that is meant to find the keys free.
//! The order is decided here, once, so that a mistake in it (an acquire
//! without the release before it) is a mistake of the engine that the
//! simulator sees.

use std::sync::Arc;
use std::time::Instant;

use super::line::Waiting;
use super::{Acquire, Entropy, Machine as _, Message, Settings, Transmit};
use crate::Queued;

/// A hand-off that was made: the next owner's acquisition, started, and
/// what to send to every node, in this order, as one batch.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use redlock_core::engine::{Entropy, HandOff, Machine, Message, Settings, Single, Until, Waiting};
/// use redlock_core::{EntropyError, NodeId, Resources, Ttl};
/// use redlock_core::backend::{Claim, Queued, Token};
///
/// struct Fixed;
/// impl Entropy for Fixed {
///     fn token(&mut self) -> Result<Token, EntropyError> { Ok(Token::from_bytes([7; 20])) }
///     fn holder(&mut self) -> Result<u64, EntropyError> { Ok(1) }
///     fn jitter(&mut self) -> u64 { 0 }
/// }
///
/// let settings = Settings::new(vec![NodeId::new("a"), NodeId::new("b"), NodeId::new("c")].into());
/// let (now, ttl) = (Instant::now(), Ttl::new(Duration::from_secs(1))?);
/// let mine = Arc::new(Claim::new(Resources::one("k")?, Token::from_bytes([1; 20])));
/// let mut release = Single::<std::io::Error>::new(&settings, Message::Release(ttl), mine, Until::Decided);
/// release.start(now);
/// let sent = release.poll_transmit().expect("a round");
/// let next = Waiting { ticket: 2, ttl, deadline: now + Duration::from_secs(5), who: "b" };
/// let queued = Queued::new(1, ttl, true);
/// let hand = HandOff::<std::io::Error>::start(sent, &next, false, &settings, queued, now, &mut Fixed)
///     .expect("a token");
/// // The release first, then the next owner's acquire.
/// assert!(matches!(hand.batch[0].message(), Message::Release(_)));
/// assert!(matches!(hand.batch[1].message(), Message::Acquire { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct HandOff<E> {
    /// The next owner's acquisition; its first round is in `batch`.
    pub acquire: Acquire<E>,
    /// What to send to every node, in this order, in one batch: the
    /// owner's release, then the next owner's first acquire round.
    pub batch: Vec<Transmit>,
}

impl<E> HandOff<E> {
    /// Hands the line over to `next` at `now`: starts its acquisition with
    /// a fresh token from `entropy` and puts its first round right behind
    /// `release` (the owner's release round). `queued` is how the
    /// manager's line callers acquire ([`Queued`], yielding); the first
    /// round carries it only when `yields` (the line's streak is over),
    /// else it is a plain acquire. Gives `release` back when the hand-off
    /// cannot be made (no token): the release then goes alone, and `next`
    /// acquires through the nodes itself.
    ///
    /// # Errors
    ///
    /// The release transmit, given back, when no hand-off was made.
    ///
    /// # Examples
    ///
    /// See [`HandOff`].
    pub fn start<W>(
        release: Transmit,
        next: &Waiting<W>,
        yields: bool,
        settings: &Settings,
        queued: Queued,
        now: Instant,
        entropy: &mut dyn Entropy,
    ) -> Result<Self, Transmit> {
        debug_assert!(matches!(release.message(), Message::Release(_)));
        let Ok(token) = entropy.token() else {
            return Err(release);
        };
        let resources = release.claim().resources().clone();
        // A plain acquire (the fast path) unless it must look for other
        // managers' waiting marks.
        let mut claim = settings.claim(resources.clone(), token);
        if yields {
            claim = claim.queued(queued);
        }
        let mut acquire = Acquire::new(
            settings.clone(),
            resources,
            next.ttl,
            Some(next.deadline),
            Some(queued),
        );
        acquire.start_with(now, Arc::new(claim), entropy);
        let Some(first) = acquire.poll_transmit() else {
            return Err(release);
        };
        Ok(HandOff {
            acquire,
            batch: vec![release, first],
        })
    }
}
