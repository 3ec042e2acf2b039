//! The read-write lock on real redis-server masters: readers and writers of
//! several managers never meet, and a writer is not starved by readers.

use std::time::Duration;

use redlock_tests::harness::wait_until;

use crate::redis_common::{cluster, exists, key, manager, NODE_TIMEOUT};
use crate::rwlock::{
    a_writer_against_a_stream_of_readers, readers_and_writers, writes_before_a_waiting_reader, Room,
};
use redlock_tests::harness::RedisServer;

#[test]
fn readers_and_writers_of_eight_threads_never_meet() {
    let cluster = cluster(5);
    // Four managers, as four processes would have, of two threads each.
    let managers: Vec<_> = (0..4).map(|_| manager(&cluster, NODE_TIMEOUT)).collect();
    let name = key("rwlock-eight");
    let room = Room::default();
    const ROUNDS: usize = 12;
    let (wait, inside) = (Duration::from_secs(60), Duration::from_millis(1));
    readers_and_writers(&managers, &name, ROUNDS, wait, inside, &room);
    assert_eq!(room.done(), 8 * ROUNDS);
    assert!(!room.clashed(), "a writer met someone");
    assert!(room.most_readers() >= 2, "readers never shared: a mutex?");
    // Nothing is left behind: every read and write, and every refused
    // round, was released on every master (the fencing counter aside).
    for server in cluster.iter() {
        for k in [
            name.clone(),
            format!("{name}{}", redlock_redis::READERS_SUFFIX),
        ] {
            wait_until(Duration::from_secs(10), &k, || !exists(server, &k))
                .unwrap_or_else(|e| panic!("left on a master: {e}"));
        }
    }
}

#[test]
fn a_writer_gets_in_while_readers_of_another_manager_keep_reading() {
    let cluster = cluster(3);
    let readers_on = manager(&cluster, NODE_TIMEOUT);
    let writer_on = manager(&cluster, NODE_TIMEOUT);
    a_writer_against_a_stream_of_readers(&readers_on, &writer_on, &key("rwlock-busy"))
        .expect("the writer is not starved by the readers");
}

/// The live managers in `name`'s waiting line on `server`: the line's
/// `ticket:id` words whose place `<line>:<id>` exists.
fn waiting(server: &RedisServer, name: &str) -> usize {
    let line = format!("{name}{}", redlock_redis::WAIT_SUFFIX);
    let mut admin = server.client().expect("client");
    let words: Option<String> = redis::cmd("GET")
        .arg(&line)
        .query(&mut admin)
        .unwrap_or(None);
    words
        .unwrap_or_default()
        .split(' ')
        .filter_map(|word| word.split_once(':'))
        .filter(|(_, id)| exists(server, &format!("{line}:{id}")))
        .count()
}

#[test]
fn a_waiting_reader_goes_before_the_writers_of_other_managers_that_came_after_it() {
    let cluster = cluster(3);
    // Four managers, as four processes would have.
    let (holder, reader_on) = (
        manager(&cluster, NODE_TIMEOUT),
        manager(&cluster, NODE_TIMEOUT),
    );
    let writers_on = [
        manager(&cluster, NODE_TIMEOUT),
        manager(&cluster, NODE_TIMEOUT),
    ];
    let name = key("rwlock-passed");
    let in_line = || cluster.iter().map(|s| waiting(s, &name)).collect();
    let passed = writes_before_a_waiting_reader(&holder, &reader_on, &writers_on, &name, in_line)
        .expect("the reader gets in");
    assert_eq!(
        passed, 0,
        "writes that came after the waiting reader went first"
    );
}
