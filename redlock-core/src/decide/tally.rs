//! The sans-IO vote counter that decides a round as early as possible.

use crate::decide::quorum::quorum;

/// One node's answer to one request of a round.
///
/// # Examples
///
/// ```
/// use redlock_core::decide::{Decision, Tally, Vote};
/// let mut tally = Tally::new(3);
/// assert_eq!(tally.record(0, Vote::Granted), Decision::Pending);
/// assert_eq!(tally.record(2, Vote::Granted), Decision::Won);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vote {
    /// The node did what was asked: set the key, extended it or deleted it.
    Granted,
    /// The node answered, but the key is held by another holder (acquire) or
    /// does not hold our token (extend, release).
    Refused,
    /// The node failed to answer usefully: an error, a timeout, no worker.
    Failed,
}

/// What a [`Tally`] can say about its round so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Neither outcome is certain yet.
    Pending,
    /// A quorum granted. More votes cannot change this.
    Won,
    /// So many nodes refused or failed that a quorum can no longer grant.
    /// More votes cannot change this.
    Lost,
}

/// Counts per-node votes of one round and decides `Won` or `Lost` as soon as
/// the votes so far make the outcome certain.
///
/// Each node votes at most once; a second vote from the same node, or a vote
/// from an index out of range, is ignored, so a confused caller cannot make a
/// tally claim a quorum it does not have.
///
/// # Examples
///
/// ```
/// use redlock_core::decide::{Decision, Tally, Vote};
/// let mut tally = Tally::new(5);
/// tally.record(0, Vote::Failed);
/// tally.record(1, Vote::Refused);
/// assert_eq!(tally.decision(), Decision::Pending);
/// // Only two nodes are left: a quorum of three is out of reach.
/// assert_eq!(tally.record(4, Vote::Failed), Decision::Lost);
/// assert_eq!(tally.failed(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    votes: Vec<Option<Vote>>,
    quorum: usize,
    granted: usize,
    refused: usize,
    failed: usize,
}

impl Tally {
    /// A tally for a round over `nodes` nodes.
    ///
    /// # Examples
    ///
    /// ```
    /// let tally = redlock_core::decide::Tally::new(5);
    /// assert_eq!(tally.quorum(), 3);
    /// ```
    #[must_use]
    pub fn new(nodes: usize) -> Self {
        Tally {
            votes: vec![None; nodes],
            quorum: quorum(nodes),
            granted: 0,
            refused: 0,
            failed: 0,
        }
    }

    /// Records `node`'s vote and returns the decision that follows.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::decide::{Decision, Tally, Vote};
    /// let mut tally = Tally::new(1);
    /// assert_eq!(tally.record(0, Vote::Granted), Decision::Won);
    /// // A repeated vote is ignored.
    /// assert_eq!(tally.record(0, Vote::Failed), Decision::Won);
    /// ```
    pub fn record(&mut self, node: usize, vote: Vote) -> Decision {
        if let Some(slot @ None) = self.votes.get_mut(node) {
            *slot = Some(vote);
            match vote {
                Vote::Granted => self.granted += 1,
                Vote::Refused => self.refused += 1,
                Vote::Failed => self.failed += 1,
            }
        }
        self.decision()
    }

    /// The decision the votes so far allow.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::decide::{Decision, Tally};
    /// assert_eq!(Tally::new(3).decision(), Decision::Pending);
    /// ```
    #[must_use]
    pub fn decision(&self) -> Decision {
        if self.granted >= self.quorum {
            Decision::Won
        } else if self.granted + self.pending() < self.quorum {
            Decision::Lost
        } else {
            Decision::Pending
        }
    }

    /// Whether `node` has voted.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::decide::{Tally, Vote};
    /// let mut tally = Tally::new(2);
    /// tally.record(1, Vote::Refused);
    /// assert!(tally.has_voted(1) && !tally.has_voted(0));
    /// ```
    #[must_use]
    pub fn has_voted(&self, node: usize) -> bool {
        matches!(self.votes.get(node), Some(Some(_)))
    }

    /// The vote `node` gave, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::decide::{Tally, Vote};
    /// let mut tally = Tally::new(2);
    /// tally.record(1, Vote::Refused);
    /// assert_eq!(tally.vote(1), Some(Vote::Refused));
    /// assert_eq!(tally.vote(0), None);
    /// ```
    #[must_use]
    pub fn vote(&self, node: usize) -> Option<Vote> {
        self.votes.get(node).copied().flatten()
    }

    /// The number of nodes in the round.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(7).nodes(), 7);
    /// ```
    #[must_use]
    pub fn nodes(&self) -> usize {
        self.votes.len()
    }

    /// The number of grants needed to win.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(7).quorum(), 4);
    /// ```
    #[must_use]
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Grants so far.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(3).granted(), 0);
    /// ```
    #[must_use]
    pub fn granted(&self) -> usize {
        self.granted
    }

    /// Refusals so far.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(3).refused(), 0);
    /// ```
    #[must_use]
    pub fn refused(&self) -> usize {
        self.refused
    }

    /// Failures so far.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(3).failed(), 0);
    /// ```
    #[must_use]
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// Nodes that have not voted yet.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::decide::Tally::new(3).pending(), 3);
    /// ```
    #[must_use]
    pub fn pending(&self) -> usize {
        self.votes.len() - self.granted - self.refused - self.failed
    }

    /// Whether the failures alone keep a quorum out of reach: the round was
    /// lost to an outage rather than to another holder.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::decide::{Tally, Vote};
    /// let mut tally = Tally::new(3);
    /// tally.record(0, Vote::Failed);
    /// tally.record(1, Vote::Failed);
    /// assert!(tally.failures_prevent_quorum());
    /// ```
    #[must_use]
    pub fn failures_prevent_quorum(&self) -> bool {
        self.votes.len() - self.failed < self.quorum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vote() -> impl Strategy<Value = Vote> {
        prop_oneof![Just(Vote::Granted), Just(Vote::Refused), Just(Vote::Failed)]
    }

    fn votes() -> impl Strategy<Value = Vec<Vote>> {
        (1usize..12).prop_flat_map(|n| proptest::collection::vec(vote(), n))
    }

    proptest! {
        #[test]
        fn never_won_below_quorum_never_lost_while_reachable(votes in votes()) {
            let mut tally = Tally::new(votes.len());
            for (node, vote) in votes.iter().enumerate() {
                let decision = tally.record(node, *vote);
                if decision == Decision::Won {
                    prop_assert!(tally.granted() >= tally.quorum());
                }
                if decision == Decision::Lost {
                    prop_assert!(tally.granted() + tally.pending() < tally.quorum());
                }
                if decision == Decision::Pending {
                    prop_assert!(tally.granted() < tally.quorum());
                    prop_assert!(tally.granted() + tally.pending() >= tally.quorum());
                }
            }
            prop_assert_ne!(tally.decision(), Decision::Pending);
        }

        #[test]
        fn order_does_not_change_the_decision(
            (votes, order) in votes().prop_flat_map(|v| {
                let n = v.len();
                (Just(v), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
            })
        ) {
            let mut in_order = Tally::new(votes.len());
            for (node, vote) in votes.iter().enumerate() {
                in_order.record(node, *vote);
            }
            let mut shuffled = Tally::new(votes.len());
            let mut first = Decision::Pending;
            for node in order {
                let d = shuffled.record(node, votes[node]);
                if first == Decision::Pending {
                    first = d;
                }
            }
            prop_assert_eq!(in_order.decision(), shuffled.decision());
            // The earliest decision is already the final one.
            prop_assert_eq!(first, shuffled.decision());
            let granted = votes.iter().filter(|v| **v == Vote::Granted).count();
            prop_assert_eq!(shuffled.decision() == Decision::Won, granted >= quorum(votes.len()));
        }

        #[test]
        fn repeated_or_stray_votes_are_ignored(votes in votes(), extra in vote(), stray in 0usize..40) {
            let mut tally = Tally::new(votes.len());
            for (node, vote) in votes.iter().enumerate() {
                tally.record(node, *vote);
                tally.record(node, extra);
            }
            tally.record(votes.len() + stray, Vote::Granted);
            let granted = votes.iter().filter(|v| **v == Vote::Granted).count();
            prop_assert_eq!(tally.granted(), granted);
            prop_assert_eq!(tally.pending(), 0);
        }
    }
}
