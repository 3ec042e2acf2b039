//! Waiting marks of queued acquires ([`Queued`]), as the Redis scripts keep
//! them, in one place for both the in-memory [`MockNode`](crate::MockNode)
//! and the simulator's nodes:
//!
//! - a yielding queued acquire gives way (is refused) while another
//!   manager's live mark is on one of its keys;
//! - a queued acquire refused because a key is held leaves its manager's
//!   mark on every key, for the mark TTL;
//! - a granted queued acquire removes its own manager's marks from its keys.
//!
//! A mark never grants anything: it only makes other managers' yielding
//! hand-offs step aside, so that a manager whose callers pass the lock
//! among themselves cannot starve the others.

use redlock_core::backend::Queued;

/// One key's mark: the manager that left it and when it expires (on the
/// node's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark<T> {
    pub(crate) manager: u64,
    pub(crate) expires: T,
}

/// A node's marks, by key.
#[derive(Debug, Clone)]
pub(crate) struct Marks<K, T> {
    marks: Vec<(K, Mark<T>)>,
}

impl<K, T> Default for Marks<K, T> {
    fn default() -> Self {
        Marks { marks: Vec::new() }
    }
}

impl<K: PartialEq + Clone, T: Ord + Copy> Marks<K, T> {
    /// No marks.
    pub(crate) fn new() -> Self {
        Marks { marks: Vec::new() }
    }

    /// Drops every mark (a flush, a restart without them).
    pub(crate) fn clear(&mut self) {
        self.marks.clear();
    }

    /// Drops the marks whose expiry the node's clock (`now`) has reached.
    pub(crate) fn purge(&mut self, now: T) {
        self.marks.retain(|(_, m)| m.expires > now);
    }

    /// Whether an acquire of `keys` with `queued` must give way: it yields
    /// and another manager's mark is on one of its keys.
    pub(crate) fn gives_way<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k K>,
        queued: Option<Queued>,
    ) -> bool
    where
        K: 'k,
    {
        let Some(queued) = queued.filter(Queued::yields) else {
            return false;
        };
        keys.into_iter().any(|key| {
            self.marks
                .iter()
                .any(|(k, m)| k == key && m.manager != queued.manager())
        })
    }

    /// An acquire of `keys` with `queued` was refused because a key is
    /// held: a queued one marks every key for its manager until `expires`.
    pub(crate) fn refused<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K>,
        queued: Option<Queued>,
        expires: T,
    ) where
        K: 'k,
    {
        let Some(queued) = queued else {
            return;
        };
        let mark = Mark {
            manager: queued.manager(),
            expires,
        };
        for key in keys {
            match self.marks.iter_mut().find(|(k, _)| k == key) {
                Some((_, m)) => *m = mark,
                None => self.marks.push((key.clone(), mark)),
            }
        }
    }

    /// An acquire of `keys` with `queued` was granted: its manager's marks
    /// on them are gone.
    pub(crate) fn granted<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K>,
        queued: Option<Queued>,
    ) where
        K: 'k,
    {
        let Some(queued) = queued else {
            return;
        };
        for key in keys {
            self.marks
                .retain(|(k, m)| !(k == key && m.manager == queued.manager()));
        }
    }

    /// How many keys carry a mark.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.marks.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::backend::Queued;
    use redlock_core::Ttl;

    use super::Marks;

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
        assert!(marks.gives_way(&[1u8], Some(theirs)));
        assert!(!marks.gives_way(&[1u8], Some(mine)));
        assert!(!marks.gives_way(&[1u8], Some(plain)));
        assert!(!marks.gives_way(&[1u8], None));
        assert!(!marks.gives_way(&[2u8], Some(theirs)));
        // Someone else's grant leaves my marks; mine removes them.
        marks.granted(&keys, Some(theirs));
        assert_eq!(marks.len(), 2);
        marks.granted(&[0u8], Some(mine));
        assert_eq!(marks.len(), 1);
        marks.purge(100);
        assert_eq!(marks.len(), 0);
        Ok(())
    }
}
