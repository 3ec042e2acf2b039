//! The writers of one read-write lock that wait on one manager, in the
//! order they came in, and whether a reader must wait for them.

use std::collections::BTreeSet;

/// The local writers of one read-write lock on one manager: arrival numbers
/// for readers and writers, the writers still waiting, and the readers'
/// rule: a reader waits while a writer of the same manager that arrived
/// before it still waits (the nodes' waiting marks do that for writers of
/// other managers).
///
/// Plain state: the blocking runtime keeps one behind a mutex per
/// read-write lock name, the simulator one per simulated process.
///
/// # Examples
///
/// ```
/// use redlock_core::engine::LocalWriters;
///
/// let mut writers = LocalWriters::default();
/// let writer = writers.arrive();
/// writers.start_waiting(writer);
/// let reader = writers.arrive();
/// assert!(writers.reader_must_wait(reader));
/// writers.stop_waiting(writer); // acquired or gave up
/// assert!(!writers.reader_must_wait(reader));
/// ```
#[derive(Debug, Default, Clone)]
pub struct LocalWriters {
    next: u64,
    waiting: BTreeSet<u64>,
}

impl LocalWriters {
    /// A number in arrival order, for a reader or a writer.
    pub fn arrive(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        seq
    }

    /// The writer that arrived as `seq` starts waiting for the lock.
    pub fn start_waiting(&mut self, seq: u64) {
        self.waiting.insert(seq);
    }

    /// The writer that arrived as `seq` acquired the lock or gave up.
    pub fn stop_waiting(&mut self, seq: u64) {
        self.waiting.remove(&seq);
    }

    /// Whether the reader that arrived as `seq` must wait: a writer that
    /// arrived before it still waits.
    #[must_use]
    pub fn reader_must_wait(&self, seq: u64) -> bool {
        self.waiting.first().is_some_and(|&first| first < seq)
    }

    /// How many writers wait.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::LocalWriters;

    #[test]
    fn a_reader_waits_only_for_writers_that_arrived_before_it() {
        let mut w = LocalWriters::default();
        let reader_before = w.arrive();
        let writer = w.arrive();
        w.start_waiting(writer);
        let reader_after = w.arrive();
        assert!(!w.reader_must_wait(reader_before));
        assert!(w.reader_must_wait(reader_after));
        assert_eq!(w.waiting(), 1);
    }

    #[test]
    fn a_reader_waits_until_every_earlier_writer_stopped() {
        let mut w = LocalWriters::default();
        let first = w.arrive();
        let second = w.arrive();
        w.start_waiting(first);
        w.start_waiting(second);
        let reader = w.arrive();
        w.stop_waiting(first);
        assert!(w.reader_must_wait(reader));
        w.stop_waiting(second);
        assert!(!w.reader_must_wait(reader));
        assert_eq!(w.waiting(), 0);
    }

    #[test]
    fn arrival_numbers_increase() {
        let mut w = LocalWriters::default();
        let a = w.arrive();
        let b = w.arrive();
        assert!(a < b);
    }
}
