//! Waiting marks of queued acquires ([`Queued`]), as the Redis scripts keep
//! them, in one place for both the in-memory [`MockNode`](crate::MockNode)
//! and the simulator's nodes. Each key has a line of waiting managers in
//! the order of their tickets ([`Queued::ticket`], the same on every node
//! for one call, so the nodes' lines agree), each with its own expiry (the
//! mark TTL from its last refusal); the first live one *owns* the key:
//!
//! - a yielding queued acquire gives way (is refused) while another
//!   manager owns one of its keys, and waits in those keys' lines;
//! - a queued acquire refused because a key is held waits in every key's
//!   line;
//! - waiting again refreshes the manager's expiry (and its ticket); an
//!   expired manager leaves the line (a waiter gone away holds nobody up
//!   for longer than the mark TTL);
//! - a granted queued acquire keeps its place, so that when its round
//!   failed on other nodes the lines still agree across the nodes for its
//!   next round;
//! - the release of a queued claim (the lock's own release; a failed
//!   round's release carries no mark, `Claim::unqueued`) takes its manager
//!   out of its keys' lines, so the next one owns them: the release then
//!   notifies it (see `LockBackend::release_feed`).
//!
//! A mark never grants anything: it only makes other managers' yielding
//! acquires step aside, so that managers take turns.

use redlock_core::backend::Queued;

/// The most managers one key's line holds; more wait without a place.
pub(crate) const LINE_MAX: usize = 16;

/// A manager waiting in a key's line: its ticket, and when its wait
/// expires (on the node's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark<T> {
    pub(crate) manager: u64,
    pub(crate) ticket: u64,
    pub(crate) expires: T,
}

/// A node's marks: a line of waiting managers per key.
#[derive(Debug, Clone)]
pub(crate) struct Marks<K, T> {
    lines: Vec<(K, Vec<Mark<T>>)>,
}

impl<K, T> Default for Marks<K, T> {
    fn default() -> Self {
        Marks { lines: Vec::new() }
    }
}

impl<K: PartialEq + Clone, T: Ord + Copy> Marks<K, T> {
    /// No marks.
    pub(crate) fn new() -> Self {
        Marks { lines: Vec::new() }
    }

    /// Drops every mark (a flush, a restart without them).
    pub(crate) fn clear(&mut self) {
        self.lines.clear();
    }

    /// Drops the waits whose expiry the node's clock (`now`) has reached.
    pub(crate) fn purge(&mut self, now: T) {
        for (_, line) in &mut self.lines {
            line.retain(|m| m.expires > now);
        }
        self.lines.retain(|(_, line)| !line.is_empty());
    }

    /// Whether an acquire of `keys` with `queued` must give way: it yields
    /// and another manager owns one of its keys. When it does, its manager
    /// waits in those keys' lines until `expires`.
    pub(crate) fn gives_way<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K> + Clone,
        queued: Option<Queued>,
        expires: T,
    ) -> bool
    where
        K: 'k,
    {
        let Some(queued) = queued.filter(Queued::yields) else {
            return false;
        };
        let me = queued.manager();
        let gives_way = keys
            .clone()
            .into_iter()
            .any(|key| self.owner(key).is_some_and(|owner| owner != me));
        if gives_way {
            self.wait(keys, queued, expires);
        }
        gives_way
    }

    /// Whether a shared acquire of `keys` with `queued` must give way: it
    /// yields and a key's line names another (live) manager, wherever in
    /// the line (as the Redis shared acquire script decides). Unlike
    /// [`Marks::gives_way`] it never waits in a line: readers leave no
    /// marks. Purge expired waits first.
    pub(crate) fn yields_to_others<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k K>,
        queued: Option<Queued>,
    ) -> bool
    where
        K: 'k,
    {
        let Some(me) = queued.filter(Queued::yields).map(|q| q.manager()) else {
            return false;
        };
        keys.into_iter().any(|key| {
            self.lines
                .iter()
                .filter(|(k, _)| k == key)
                .any(|(_, line)| line.iter().any(|m| m.manager != me))
        })
    }

    /// An acquire of `keys` with `queued` was refused because a key is
    /// held: a queued one waits in every key's line until `expires`.
    pub(crate) fn refused<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K>,
        queued: Option<Queued>,
        expires: T,
    ) where
        K: 'k,
    {
        if let Some(queued) = queued {
            self.wait(keys, queued, expires);
        }
    }

    /// `queued`'s manager waits in the lines of `keys`, at its ticket's
    /// place (behind equal tickets).
    fn wait<'k>(&mut self, keys: impl IntoIterator<Item = &'k K>, queued: Queued, expires: T)
    where
        K: 'k,
    {
        let mark = Mark {
            manager: queued.manager(),
            ticket: queued.ticket(),
            expires,
        };
        for key in keys {
            let at = match self.lines.iter().position(|(k, _)| k == key) {
                Some(at) => at,
                None => {
                    self.lines.push((key.clone(), Vec::new()));
                    self.lines.len() - 1
                }
            };
            let Some((_, line)) = self.lines.get_mut(at) else {
                continue;
            };
            line.retain(|m| m.manager != mark.manager);
            if line.len() < LINE_MAX {
                let place = line
                    .iter()
                    .position(|m| m.ticket > mark.ticket)
                    .unwrap_or(line.len());
                line.insert(place, mark);
            }
        }
        self.lines.retain(|(_, line)| !line.is_empty());
    }

    /// A lock of `keys` acquired with `queued` is released: its manager
    /// leaves their lines.
    pub(crate) fn left<'k>(&mut self, keys: impl IntoIterator<Item = &'k K>, manager: Option<u64>)
    where
        K: 'k,
    {
        let Some(me) = manager else {
            return;
        };
        for key in keys {
            for (_, line) in self.lines.iter_mut().filter(|(k, _)| k == key) {
                line.retain(|m| m.manager != me);
            }
        }
        self.lines.retain(|(_, line)| !line.is_empty());
    }

    /// Whether `key` carries a mark (purge expired ones first).
    #[cfg(test)]
    pub(crate) fn is_marked(&self, key: &K) -> bool {
        self.owner(key).is_some()
    }

    /// The manager first in `key`'s line (purge expired ones first).
    pub(crate) fn owner(&self, key: &K) -> Option<u64> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, line)| line.first())
            .map(|m| m.manager)
    }

    /// How many keys carry a mark.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::backend::Queued;
    use redlock_core::Ttl;

    use super::{Marks, LINE_MAX};

    #[test]
    fn marks_make_other_managers_yielding_acquires_give_way(
    ) -> Result<(), redlock_core::ConfigError> {
        let ttl = Ttl::new(Duration::from_millis(10))?;
        let (mine, theirs) = (Queued::new(1, ttl, true), Queued::new(2, ttl, true));
        let plain = Queued::new(2, ttl, false);
        let mut marks: Marks<u8, i64> = Marks::new();
        let keys = [0u8, 1];
        marks.refused(&keys, Some(mine), 100);
        assert_eq!(marks.len(), 2);
        // Another manager's yielding acquire gives way; mine, a plain or a
        // non-yielding one does not.
        assert!(!marks.gives_way(&[1u8], Some(mine), 100));
        assert!(!marks.gives_way(&[1u8], Some(plain), 100));
        assert!(!marks.gives_way(&[1u8], None, 100));
        assert!(!marks.gives_way(&[2u8], Some(theirs), 100));
        assert!(marks.gives_way(&[1u8], Some(theirs), 100));
        // Someone else's release leaves my marks; the release of my lock
        // takes me out of the lines (a grant alone does not).
        marks.left(&[0u8], Some(theirs.manager()));
        assert_eq!(marks.owner(&0), Some(1));
        marks.left(&keys, Some(mine.manager()));
        assert_eq!(marks.owner(&1), Some(2), "they waited behind me on 1");
        assert_eq!(marks.owner(&0), None);
        marks.purge(100);
        assert_eq!(marks.len(), 0);
        Ok(())
    }

    #[test]
    fn a_shared_acquire_yields_to_any_other_manager_in_line_and_never_waits(
    ) -> Result<(), redlock_core::ConfigError> {
        let ttl = Ttl::new(Duration::from_millis(10))?;
        let q = |m, ticket| Queued::new(m, ttl, true).with_ticket(ticket);
        let mut marks: Marks<u8, i64> = Marks::new();
        marks.refused(&[0u8], Some(q(1, 10)), 100);
        assert!(
            !marks.yields_to_others(&[0u8], Some(q(1, 0))),
            "its own mark"
        );
        assert!(marks.yields_to_others(&[0u8], Some(q(2, 0))));
        assert!(!marks.yields_to_others(&[0u8], Some(Queued::new(2, ttl, false))));
        assert!(
            !marks.yields_to_others(&[1u8], Some(q(2, 0))),
            "another key"
        );
        // Manager 2 waits behind manager 1: a reader of manager 1 gives
        // way to it too (as the Redis script decides), and leaves no mark.
        marks.refused(&[0u8], Some(q(2, 20)), 100);
        assert!(marks.yields_to_others(&[0u8], Some(q(1, 0))));
        assert!(marks.yields_to_others(&[0u8], Some(q(3, 0))));
        assert_eq!(marks.len(), 1);
        Ok(())
    }

    #[test]
    fn managers_take_turns_in_ticket_order() -> Result<(), redlock_core::ConfigError> {
        let ttl = Ttl::new(Duration::from_millis(10))?;
        let q = |m, ticket| Queued::new(m, ttl, true).with_ticket(ticket);
        let mut marks: Marks<u8, i64> = Marks::new();
        // Arriving 3, 1, 2 with tickets 30, 10, 20: the line is 1, 2, 3,
        // as on any node that saw them in another order.
        marks.refused(&[0u8], Some(q(3, 30)), 100);
        marks.refused(&[0u8], Some(q(1, 10)), 100);
        assert!(marks.gives_way(&[0u8], Some(q(2, 20)), 100));
        marks.refused(&[0u8], Some(q(2, 20)), 150);
        for turn in [1, 2, 3] {
            assert_eq!(marks.owner(&0), Some(turn));
            marks.left(&[0u8], Some(turn));
        }
        assert!(!marks.is_marked(&0));
        // A waiter gone away holds the line up only until its expiry.
        marks.refused(&[0u8], Some(q(4, 1)), 100);
        marks.refused(&[0u8], Some(q(5, 2)), 300);
        marks.purge(200);
        assert_eq!(marks.owner(&0), Some(5));
        // A line holds at most LINE_MAX managers.
        for m in 0..2 * LINE_MAX as u64 {
            marks.refused(&[1u8], Some(q(100 + m, m)), 1_000);
        }
        for m in 0..LINE_MAX as u64 {
            assert_eq!(marks.owner(&1), Some(100 + m));
            marks.left(&[1u8], Some(100 + m));
        }
        assert!(!marks.is_marked(&1));
        Ok(())
    }
}
