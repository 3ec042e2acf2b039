//! The read-write lock on in-memory nodes: readers share (any number of
//! them), a writer excludes everyone, a waiting writer is not starved by
//! readers, and bad input is refused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, SharedClaims};
use redlock_core::{ConfigError, LockError, NodeId, Redlock, Ttl};
use redlock_mock::{MockCluster, MockError, MockNode};

const TTL: Duration = Duration::from_secs(10);

fn manager(cluster: &MockCluster) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("valid config")
}

/// Readers and writers inside, and whether a writer ever had company.
#[derive(Default)]
pub(crate) struct Room {
    readers: AtomicUsize,
    writers: AtomicUsize,
    most_readers: AtomicUsize,
    clash: AtomicBool,
    done: AtomicUsize,
}

impl Room {
    pub(crate) fn read(&self, inside: impl FnOnce()) {
        let now = self.readers.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_readers.fetch_max(now, Ordering::SeqCst);
        if self.writers.load(Ordering::SeqCst) != 0 {
            self.clash.store(true, Ordering::SeqCst);
        }
        inside();
        self.readers.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
    pub(crate) fn write(&self, inside: impl FnOnce()) {
        if self.writers.fetch_add(1, Ordering::SeqCst) != 0
            || self.readers.load(Ordering::SeqCst) != 0
        {
            self.clash.store(true, Ordering::SeqCst);
        }
        inside();
        if self.readers.load(Ordering::SeqCst) != 0 {
            self.clash.store(true, Ordering::SeqCst);
        }
        self.writers.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
    pub(crate) fn clashed(&self) -> bool {
        self.clash.load(Ordering::SeqCst)
    }
    pub(crate) fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }
    pub(crate) fn most_readers(&self) -> usize {
        self.most_readers.load(Ordering::SeqCst)
    }
}

#[test]
fn readers_share_and_a_writer_excludes_readers_and_writers_of_other_managers() {
    let cluster = MockCluster::new(5);
    let (a, b) = (manager(&cluster), manager(&cluster));
    let doc_a = a.rwlock("doc").expect("rwlock");
    let doc_b = b.rwlock("doc").expect("rwlock");
    let r1 = doc_a.try_read(TTL).expect("free");
    let r2 = doc_b.try_read(TTL).expect("readers share");
    assert_eq!(r1.resources().keys(), ["doc"]);
    let err = doc_b.try_write(TTL).expect_err("readers inside");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    r1.release().expect("released");
    let err = a.try_write("doc", TTL).expect_err("a reader still inside");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    r2.release().expect("released");
    let w = doc_a.try_write(TTL).expect("free again");
    for err in [
        doc_b.try_read(TTL).map(drop).expect_err("a writer inside"),
        doc_b.try_write(TTL).map(drop).expect_err("a writer inside"),
        doc_a.try_read(TTL).map(drop).expect_err("a writer inside"),
    ] {
        assert!(matches!(err, LockError::Contended(_)), "{err}");
    }
    w.release().expect("released");
    let _read = doc_b.try_read(TTL).expect("free again");
}

#[test]
fn any_number_of_readers_share_and_the_last_one_out_frees_the_key() {
    let cluster = MockCluster::new(5);
    let (a, b) = (manager(&cluster), manager(&cluster));
    // More readers than a semaphore may have permits, from two managers.
    let reads: Vec<_> = (0..200)
        .map(|i| {
            let locks = if i % 2 == 0 { &a } else { &b };
            locks.try_read("crowd", TTL).expect("readers share")
        })
        .collect();
    assert!(a.flush(Duration::from_secs(10)) && b.flush(Duration::from_secs(10)));
    for i in 0..5 {
        let node = cluster.node(i);
        assert_eq!(node.readers("crowd"), 200, "node {i}");
        // One round per read, however many read already.
        assert_eq!(
            (node.stats().granted, node.stats().refused),
            (200, 0),
            "node {i}"
        );
    }
    let err = a.try_write("crowd", TTL).expect_err("readers inside");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    let mut reads = reads;
    let last = reads.pop().expect("a reader");
    // Dropped guards release in the background, each manager on its own
    // workers: wait for both, or a write may still meet a dropped reader.
    drop(reads);
    assert!(a.flush(Duration::from_secs(10)) && b.flush(Duration::from_secs(10)));
    let err = b
        .try_write("crowd", TTL)
        .expect_err("one reader still inside");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    last.release().expect("released");
    let w = b.try_write("crowd", TTL).expect("the last reader left");
    w.release().expect("released");
    assert!(a.flush(Duration::from_secs(10)) && b.flush(Duration::from_secs(10)));
    for i in 0..5 {
        assert_eq!(cluster.node(i).live_keys(), 0, "node {i} keeps a key");
    }
}

#[test]
fn a_read_has_a_locks_life_extend_keep_alive_and_release_on_drop() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    let mut read = locks
        .try_read("life", Duration::from_millis(300))
        .expect("free");
    read.extend(TTL).expect("a reader extends");
    assert!(read.validity() > Duration::from_secs(5));
    drop(read);
    assert!(locks.flush(Duration::from_secs(10)));
    for i in 0..3 {
        assert_eq!(
            cluster.node(i).readers("life"),
            0,
            "dropping the read releases it"
        );
    }
    let doc = locks.rwlock("life").expect("rwlock");
    let kept = doc
        .with_read(Duration::from_millis(300), |read| {
            std::thread::sleep(Duration::from_millis(900));
            read.ensure_held().map(|()| "still read")
        })
        .expect("kept alive");
    assert_eq!(kept.expect("held throughout"), "still read");
}

#[test]
fn readers_and_writers_of_several_managers_never_meet() {
    let cluster = MockCluster::new(5);
    let managers: Vec<_> = (0..3).map(|_| manager(&cluster)).collect();
    let room = Room::default();
    std::thread::scope(|s| {
        for (m, locks) in managers.iter().enumerate() {
            for t in 0..3 {
                let room = &room;
                s.spawn(move || {
                    let doc = locks.rwlock("shared-doc").expect("rwlock");
                    for i in 0..20 {
                        if (m + t + i) % 4 == 0 {
                            let w = doc
                                .write_timeout(TTL, Duration::from_secs(60))
                                .expect("a write within the minute");
                            room.write(std::thread::yield_now);
                            w.release().expect("released");
                        } else {
                            let r = doc
                                .read_timeout(TTL, Duration::from_secs(60))
                                .expect("a read within the minute");
                            room.read(std::thread::yield_now);
                            r.release().expect("released");
                        }
                    }
                });
            }
        }
    });
    assert_eq!(room.done(), 3 * 3 * 20);
    assert!(!room.clashed(), "a writer met someone");
    assert!(room.most_readers() >= 1);
}

/// Four readers of `readers_on` keep `name` read (overlapping, so that it
/// is never free) while a writer of `writer_on` asks to write for at most
/// 20 s: whether it got in.
/// Two threads per manager of `managers` take turns reading and writing
/// `name` (every third round writes), `rounds` each, every one within
/// `wait`; each stay in `room` lasts `inside`.
pub(crate) fn readers_and_writers<B: SharedClaims + 'static>(
    managers: &[Redlock<B>],
    name: &str,
    rounds: usize,
    wait: Duration,
    inside: Duration,
    room: &Room,
) {
    std::thread::scope(|s| {
        for (m, locks) in managers.iter().enumerate() {
            for t in 0..2 {
                s.spawn(move || {
                    let doc = locks.rwlock(name).expect("rwlock");
                    for i in 0..rounds {
                        if (m + t + i) % 3 == 0 {
                            let w = doc.write_timeout(TTL, wait).expect("a write in time");
                            room.write(|| std::thread::sleep(inside));
                            w.release().expect("released");
                        } else {
                            let r = doc.read_timeout(TTL, wait).expect("a read in time");
                            room.read(|| std::thread::sleep(inside));
                            r.release().expect("released");
                        }
                    }
                });
            }
        }
    });
}

pub(crate) fn a_writer_against_a_stream_of_readers<B: SharedClaims + 'static>(
    readers_on: &Redlock<B>,
    writer_on: &Redlock<B>,
    name: &str,
) -> Result<(), LockError<B::Error>> {
    let stop = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (stop, reads) = (&stop, &reads);
            s.spawn(move || {
                let doc = readers_on.rwlock(name).expect("rwlock");
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(r) = doc.read_timeout(TTL, Duration::from_millis(100)) {
                        reads.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(3));
                        drop(r);
                    }
                }
            });
        }
        // The readers are in before the writer asks.
        while reads.load(Ordering::SeqCst) < 20 {
            std::thread::yield_now();
        }
        let doc = writer_on.rwlock(name).expect("rwlock");
        let written = doc.write_timeout(TTL, Duration::from_secs(20)).map(drop);
        stop.store(true, Ordering::SeqCst);
        written
    })
}

/// Review issue, section 4: a waiting reader held no place in line, so
/// writers of other managers passed it for as long as they kept coming.
/// Now a refused read waits in the keys' lines as a write does (with a
/// reader's place): writers that come after it wait for it, however often
/// they come. A writer of `holder` holds `name`; a reader of `reader_on`
/// waits; then each of `writers_on` writes `name` in a loop, and the hold
/// ends once they all wait in line too. `waiting` says how many managers
/// wait in `name`'s line on each node; they must wait on a quorum (the
/// hold, decided at a quorum, may be missing on the other nodes, where the
/// reader then reads). Returns the writes granted while the reader waited
/// (the bound: those of the writers in line before it, here none).
pub(crate) fn writes_before_a_waiting_reader<B: SharedClaims + 'static>(
    holder: &Redlock<B>,
    reader_on: &Redlock<B>,
    writers_on: &[Redlock<B>],
    name: &str,
    waiting: impl Fn() -> Vec<usize>,
) -> Result<usize, LockError<B::Error>> {
    let held = holder.try_write(name, TTL)?;
    let (read_in, passed) = (AtomicBool::new(false), AtomicUsize::new(0));
    // The count of the node a quorum reaches down to.
    let on_a_quorum = || {
        let mut counts = waiting();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        counts.get(counts.len() / 2).copied().unwrap_or(0)
    };
    let in_line = |n: usize, what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while on_a_quorum() < n {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let read = reader_on.read_timeout(name, TTL, Duration::from_secs(30));
            read_in.store(true, Ordering::SeqCst);
            read.map(drop)
        });
        in_line(1, "the refused reader never waited in line");
        for writer_on in writers_on {
            let (read_in, passed) = (&read_in, &passed);
            s.spawn(move || {
                while !read_in.load(Ordering::SeqCst) {
                    let Ok(write) = writer_on.write_timeout(name, TTL, Duration::from_secs(30))
                    else {
                        break;
                    };
                    // Granted before the reader: it passed the reader.
                    if !read_in.load(Ordering::SeqCst) {
                        passed.fetch_add(1, Ordering::SeqCst);
                    }
                    drop(write);
                }
            });
        }
        in_line(1 + writers_on.len(), "the writers never waited in line");
        drop(held);
        reader.join().expect("no panic")
    })?;
    Ok(passed.load(Ordering::SeqCst))
}

#[test]
fn a_waiting_reader_goes_before_the_writers_of_other_managers_that_came_after_it() {
    let cluster = MockCluster::new(3);
    let (holder, reader_on) = (manager(&cluster), manager(&cluster));
    let writers_on = [manager(&cluster), manager(&cluster)];
    let waiting = || {
        (0..3)
            .map(|i| cluster.node(i).waiting("passed-doc").len())
            .collect()
    };
    let passed =
        writes_before_a_waiting_reader(&holder, &reader_on, &writers_on, "passed-doc", waiting)
            .expect("the reader gets in");
    assert_eq!(
        passed, 0,
        "writes that came after the waiting reader went first"
    );
}

fn a_writer_gets_in_against_a_stream_of_readers(same_manager: bool) {
    let cluster = MockCluster::new(3);
    let readers_on = manager(&cluster);
    let other = manager(&cluster);
    let writer_on = if same_manager { &readers_on } else { &other };
    a_writer_against_a_stream_of_readers(&readers_on, writer_on, "busy-doc")
        .expect("the writer is not starved by the readers");
}

#[test]
fn a_waiting_writer_is_not_starved_by_readers_of_another_manager() {
    a_writer_gets_in_against_a_stream_of_readers(false);
}

#[test]
fn a_waiting_writer_is_not_starved_by_readers_of_its_own_manager() {
    a_writer_gets_in_against_a_stream_of_readers(true);
}

/// Waits until every node refused `rounds` more acquires than `before`
/// says it had (a writer that waits), at most 30 s.
fn refused_on_every_node(cluster: &MockCluster, before: &[u64], rounds: u64) {
    for (i, before) in before.iter().enumerate() {
        let node = cluster.node(i);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while node.stats().refused < before + rounds {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never waited"
            );
            std::thread::yield_now();
        }
    }
}

/// A reader holds; a writer of `writer_on` comes and waits (its rounds are
/// refused on every node); then a reader of `reader_on` that comes after
/// it is refused, though only readers hold the lock.
fn a_reader_after_a_waiting_writer_waits(same_manager: bool) {
    let cluster = MockCluster::new(3);
    let (first, second) = (manager(&cluster), manager(&cluster));
    let reader_on = if same_manager { &first } else { &second };
    let doc = first.rwlock("queue-doc").expect("rwlock");
    let held = doc.try_read(TTL).expect("free");
    let refused_before: Vec<u64> = (0..3).map(|i| cluster.node(i).stats().refused).collect();
    std::thread::scope(|s| {
        let writer = s.spawn(|| doc.write_timeout(TTL, Duration::from_secs(30)).map(drop));
        // Two of the writer's rounds (each leaves its waiting marks) were
        // refused on every node.
        refused_on_every_node(&cluster, &refused_before, 2);
        let late = reader_on.rwlock("queue-doc").expect("rwlock");
        let err = late
            .try_read(TTL)
            .map(drop)
            .expect_err("a reader after a waiting writer waits");
        assert!(matches!(err, LockError::Contended(_)), "{err}");
        drop(held);
        writer
            .join()
            .expect("no panic")
            .expect("the writer gets in once the reader left");
    });
}

/// Review issue, section 4: a writer's first round left no waiting mark,
/// so with wake-ups off (a pause of up to the longest retry delay before
/// its second round) readers of other managers kept getting in. Now its
/// first refused round marks: a reader that comes after it waits, however
/// long the writer's pause.
#[test]
fn a_writers_first_refused_round_already_makes_later_readers_wait() {
    let cluster = MockCluster::new(3);
    let slow = || {
        Redlock::builder(cluster.backends())
            .node_timeout(Duration::from_secs(1))
            .retry_delay(Duration::from_secs(2), Duration::from_secs(2))
            .wake_ups(false)
            .build()
            .expect("valid config")
    };
    let (first, writer_on, reader_on) = (slow(), slow(), slow());
    let held = first.try_read("pause-doc", TTL).expect("free");
    let refused_before: Vec<u64> = (0..3).map(|i| cluster.node(i).stats().refused).collect();
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            writer_on
                .write_timeout("pause-doc", TTL, Duration::from_secs(60))
                .map(drop)
        });
        // The writer's first round was refused on every node; its next
        // one is 2 s away.
        refused_on_every_node(&cluster, &refused_before, 1);
        let err = reader_on
            .try_read("pause-doc", TTL)
            .map(drop)
            .expect_err("a reader after a waiting writer waits");
        assert!(matches!(err, LockError::Contended(_)), "{err}");
        drop(held);
        writer
            .join()
            .expect("no panic")
            .expect("the writer gets in once the reader left");
    });
}

#[test]
fn a_reader_of_another_manager_waits_for_a_writer_that_waits() {
    a_reader_after_a_waiting_writer_waits(false);
}

#[test]
fn a_reader_of_the_same_manager_waits_for_a_writer_that_waits() {
    a_reader_after_a_waiting_writer_waits(true);
}

#[test]
fn bad_input_gets_a_typed_error() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    assert_eq!(locks.rwlock("").err(), Some(ConfigError::EmptyKey));
    let err = locks.try_read("", TTL).expect_err("empty name");
    assert!(
        matches!(err, LockError::Config(ConfigError::EmptyKey)),
        "{err}"
    );
    let doc = locks.rwlock("r").expect("rwlock");
    let taken = ConfigError::RwLockName { name: "r".into() };
    assert!(locks.rwlock("r").is_ok(), "the same read-write lock again");
    assert_eq!(locks.semaphore("r", 2).err(), Some(taken.clone()));
    let err = locks.try_lock("r", TTL).expect_err("the lock's key");
    assert!(matches!(&err, LockError::Config(e) if *e == taken), "{err}");
    locks.semaphore("s", 2).expect("semaphore");
    assert_eq!(
        locks.rwlock("s").err(),
        Some(ConfigError::SemaphoreName {
            name: "s".into(),
            permits: 2
        })
    );
    let err = locks.try_write("s", TTL).expect_err("a semaphore");
    assert!(
        matches!(err, LockError::Config(ConfigError::SemaphoreName { .. })),
        "{err}"
    );
    let err = doc.try_read(Duration::ZERO).expect_err("bad TTL");
    assert!(
        matches!(err, LockError::Config(ConfigError::TtlZero)),
        "{err}"
    );
    let err = doc.try_write(Duration::ZERO).expect_err("bad TTL");
    assert!(
        matches!(err, LockError::Config(ConfigError::TtlZero)),
        "{err}"
    );
}

/// A third-party backend of the base contract alone: the four required
/// methods, no abilities declared.
struct NoShared(MockNode);

impl LockBackend for NoShared {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.0.node_id()
    }
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.0.acquire(claim, ttl, fence)
    }
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.0.extend(claim, ttl)
    }
    fn release(&self, claim: &Claim) -> Result<bool, MockError> {
        self.0.release(claim)
    }
}

#[test]
fn a_backend_without_shared_claims_conforms_to_the_base_and_serves_mutexes_and_semaphores() {
    // Read-write locks over it do not compile (the doc tests of
    // `redlock_core::backend::SharedClaims` check that).
    let cluster = MockCluster::new(5);
    let nodes = cluster.backends();
    redlock_mock::conformance::Conformance::new(move |n| {
        nodes[..n].iter().cloned().map(NoShared).collect()
    })
    .run_all()
    .expect("the base contract");
    let locks = Redlock::new((0..3).map(|i| NoShared(cluster.node(i).clone()))).expect("valid");
    locks
        .try_lock("doc", TTL)
        .expect("a mutex")
        .release()
        .expect("held");
    locks
        .semaphore("jobs", 2)
        .expect("a semaphore")
        .try_acquire(TTL)
        .expect("a permit")
        .release()
        .expect("held");
}

#[test]
fn with_fencing_on_reads_and_writes_get_tokens_that_rise() {
    let cluster = MockCluster::new(3);
    let locks = Redlock::builder(cluster.backends())
        .fencing(true)
        .build()
        .expect("valid config");
    let read = locks.try_read("fenced-doc", TTL).expect("free");
    let first = read.fencing_token().expect("a read's token");
    let other = locks.try_read("fenced-doc", TTL).expect("readers share");
    let second = other.fencing_token().expect("a read's token");
    assert!(second > first, "{second:?} after {first:?}");
    drop((read, other));
    let write = locks.write("fenced-doc", TTL).expect("free again");
    let third = write.fencing_token().expect("a write's token");
    assert!(third > second, "{third:?} after {second:?}");
}
