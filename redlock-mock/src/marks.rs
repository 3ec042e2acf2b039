//! Waiting marks of queued acquires ([`Queued`]), as the Redis scripts keep
//! them, in one place for both the in-memory [`MockNode`](crate::MockNode)
//! and the simulator's nodes:
//!
//! - a yielding queued acquire gives way (is refused) while another
//!   manager's live mark is on one of its keys, and is noted on those marks
//!   as the next in line (the last to give way is);
//! - a queued acquire refused because a key is held leaves its manager's
//!   mark on every key, for the mark TTL (keeping the next in line);
//! - a granted queued acquire removes its own manager's marks from its
//!   keys, or hands each to the manager next in line on it (for the mark
//!   TTL), so that a waiter that gave way is still waited for: a release
//!   then notifies it (see `LockBackend::release_feed`).
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
    /// The last other manager that gave way to this mark.
    pub(crate) next: Option<u64>,
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
    /// and another manager's mark is on one of its keys. When it does, its
    /// manager becomes the next in line on those marks.
    pub(crate) fn gives_way<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K> + Clone,
        queued: Option<Queued>,
    ) -> bool
    where
        K: 'k,
    {
        let Some(queued) = queued.filter(Queued::yields) else {
            return false;
        };
        let me = queued.manager();
        let other = |m: &Mark<T>| m.manager != me;
        let gives_way = keys
            .clone()
            .into_iter()
            .any(|key| self.marks.iter().any(|(k, m)| k == key && other(m)));
        if gives_way {
            for key in keys {
                for (_, m) in self.marks.iter_mut().filter(|(k, _)| k == key) {
                    if other(m) {
                        m.next = Some(me);
                    }
                }
            }
        }
        gives_way
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
        let me = queued.manager();
        for key in keys {
            match self.marks.iter_mut().find(|(k, _)| k == key) {
                Some((_, m)) => {
                    *m = Mark {
                        manager: me,
                        next: m.next.filter(|&n| n != me),
                        expires,
                    }
                }
                None => self.marks.push((
                    key.clone(),
                    Mark {
                        manager: me,
                        next: None,
                        expires,
                    },
                )),
            }
        }
    }

    /// An acquire of `keys` with `queued` was granted: its manager's marks
    /// on them go to the manager next in line on each (until `expires`), or
    /// are gone.
    pub(crate) fn granted<'k>(
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
        let me = queued.manager();
        for key in keys {
            for (_, m) in self.marks.iter_mut().filter(|(k, _)| k == key) {
                if m.manager == me {
                    if let Some(next) = m.next.take() {
                        *m = Mark {
                            manager: next,
                            next: None,
                            expires,
                        };
                    }
                }
            }
            self.marks
                .retain(|(k, m)| !(k == key && m.manager == me && m.next.is_none()));
        }
    }

    /// Whether `key` carries a mark (purge expired ones first).
    #[cfg(test)]
    pub(crate) fn is_marked(&self, key: &K) -> bool {
        self.owner(key).is_some()
    }

    /// The manager whose mark `key` carries (purge expired ones first).
    pub(crate) fn owner(&self, key: &K) -> Option<u64> {
        self.marks
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, m)| m.manager)
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
        marks.granted(&keys, Some(theirs), 200);
        assert_eq!(marks.len(), 2);
        marks.granted(&[0u8], Some(mine), 200);
        assert_eq!(marks.len(), 1);
        marks.purge(100);
        assert_eq!(marks.len(), 0);
        Ok(())
    }

    #[test]
    fn a_manager_that_gave_way_inherits_the_mark() -> Result<(), redlock_core::ConfigError> {
        let ttl = Ttl::new(Duration::from_millis(10))?;
        let (a, b, c) = (
            Queued::new(1, ttl, true),
            Queued::new(2, ttl, true),
            Queued::new(3, ttl, true),
        );
        let mut marks: Marks<u8, i64> = Marks::new();
        marks.refused(&[0u8], Some(a), 100);
        // b, then c give way: c (the last) is next in line.
        assert!(marks.gives_way(&[0u8], Some(b)));
        assert!(marks.gives_way(&[0u8], Some(c)));
        // a's grant hands the mark to c, with a fresh expiry.
        marks.granted(&[0u8], Some(a), 300);
        assert!(marks.gives_way(&[0u8], Some(b)), "c's mark now");
        assert!(!marks.gives_way(&[0u8], Some(c)));
        marks.purge(200);
        assert!(marks.is_marked(&0), "the mark took the new expiry");
        // Refused while held, c keeps b as next; c's grant hands it on.
        marks.refused(&[0u8], Some(c), 400);
        marks.granted(&[0u8], Some(c), 500);
        assert!(marks.gives_way(&[0u8], Some(a)), "b's mark now");
        marks.granted(&[0u8], Some(b), 600);
        marks.granted(&[0u8], Some(a), 600);
        assert!(!marks.is_marked(&0), "a's next: nobody; gone");
        Ok(())
    }
}
