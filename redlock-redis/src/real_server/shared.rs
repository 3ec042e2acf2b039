//! Shared claims (the readers of a read-write lock) on a real server: the
//! reader sets, the marker that keeps writers out, the waiting marks that
//! readers give way to, expiry, fencing, and what is left behind.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Request, Response};
use redlock_core::Ttl;

use super::{backend, claim, mark, ttl, Server, GRANTED};
use crate::ops::READERS_MARKER;
use crate::{RedisErrorKind, FENCE_SUFFIX, READERS_SUFFIX, RELEASE_CHANNEL};

const REFUSED: AcquireOutcome = AcquireOutcome::HeldByOther;

/// A reader of `keys` for `manager`, queued and yielding from its first
/// round, as the core makes them.
fn reader(keys: &[&str], manager: u64) -> Claim {
    claim(keys, Some((manager, true))).shared()
}

fn readers(key: &str) -> String {
    format!("{key}{READERS_SUFFIX}")
}

fn millis(ms: u64) -> Ttl {
    Ttl::new(Duration::from_millis(ms)).expect("ttl")
}

impl Server {
    /// An integer reply, -1 for anything else.
    fn int(&self, words: &[&str]) -> i64 {
        self.command(words)
            .and_then(|v| v.strip_prefix(':').and_then(|n| n.parse().ok()))
            .unwrap_or(-1)
    }

    fn keys(&self) -> i64 {
        self.int(&["DBSIZE"])
    }

    /// Whether `claim`'s token is a reader of `key` that has not expired by
    /// the server's clock (changing nothing).
    fn is_live_reader(&self, key: &str, claim: &Claim) -> bool {
        const LIVE: &str = "local s = redis.call('ZSCORE', KEYS[1], ARGV[1]) \
            local t = redis.call('TIME') \
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
            if s and tonumber(s) > now then return 1 end return 0";
        let mut packed = Vec::new();
        crate::ops::Resp(&mut packed)
            .command(5)
            .bulk(b"EVAL")
            .bulk(LIVE.as_bytes())
            .int(1)
            .bulk(readers(key).as_bytes())
            .bulk(claim.value());
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        stream.write_all(&packed).expect("write");
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).expect("reply");
        match line.trim_end() {
            ":1" => true,
            ":0" => false,
            other => unreachable!("the probe answered {other}"),
        }
    }
}

/// Polls `done` every 10 ms for up to 5 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn readers_share_a_key_that_writers_wait_for_until_the_last_reader_left() {
    let server = Server::start();
    let node = backend(&server);
    let (first, second) = (reader(&["doc"], 1), reader(&["doc"], 2));
    assert_eq!(node.acquire(&first, ttl(5), false).expect("up"), GRANTED);
    assert_eq!(node.acquire(&second, ttl(3), false).expect("up"), GRANTED);
    assert_eq!(server.get("doc").as_deref(), Some(READERS_MARKER));
    assert_eq!(server.int(&["ZCARD", &readers("doc")]), 2);
    // Both keys live as long as the latest reader.
    for key in ["doc".to_owned(), readers("doc")] {
        let left = server.pttl(&key);
        assert!(3000 < left && left <= 5000, "{key} TTL {left}");
    }
    // Every exclusive path sees the key held, and finds no token of its
    // own in it: `SET NX GET`, the acquire script, the queued one.
    let writer = claim(&["doc"], None);
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), REFUSED);
    assert_eq!(node.acquire(&writer, ttl(5), true).expect("up"), REFUSED);
    let queued = claim(&["doc"], Some((3, true)));
    assert_eq!(node.acquire(&queued, ttl(5), false).expect("up"), REFUSED);
    assert!(!node.release(&writer).expect("up"));
    assert!(!node.extend(&writer, ttl(5)).expect("up"));
    assert!(!node.raise_fence(&writer, 9).expect("up"));
    assert_eq!(server.get("doc").as_deref(), Some(READERS_MARKER));
    // A reader is its token: a stranger's release holds nothing.
    let stranger = reader(&["doc"], 1);
    assert!(!node.release(&stranger).expect("up"));
    assert!(!node.extend(&stranger, ttl(5)).expect("up"));
    assert!(node.release(&first).expect("up"));
    assert!(!node.release(&first).expect("up"), "released twice");
    assert_eq!(server.int(&["ZCARD", &readers("doc")]), 1);
    // The key's expiry follows the reader that is left.
    let left = server.pttl("doc");
    assert!(0 < left && left <= 3000, "doc TTL {left}");
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), REFUSED);
    assert!(node.release(&second).expect("up"));
    // Nothing is left: the marker, the reader set and manager 3's mark go
    // (the mark with manager 3's release below).
    assert_eq!(server.get("doc"), None);
    assert_eq!(server.int(&["EXISTS", &readers("doc")]), 0);
    assert_eq!(node.acquire(&queued, ttl(5), false).expect("up"), GRANTED);
    assert!(node.release(&queued).expect("up"));
    assert_eq!(server.keys(), 0, "keys left behind");
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), GRANTED);
}

#[test]
fn a_refused_reader_waits_in_line_and_gives_way_only_to_writers_ahead_of_it() {
    let server = Server::start();
    let node = backend(&server);
    let writer = claim(&["doc"], None);
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), GRANTED);
    // Manager 2's writer (ticket 20) waits first, manager 3's reader
    // (ticket 30) behind it, with a reader's place.
    let waiting = claim(&["doc"], Some((2, true)));
    assert_eq!(node.acquire(&waiting, ttl(5), false).expect("up"), REFUSED);
    let third = reader(&["doc"], 3);
    for fence in [false, true] {
        assert_eq!(node.acquire(&third, ttl(5), fence).expect("up"), REFUSED);
    }
    assert_eq!(server.get(&mark("doc")).as_deref(), Some("20:2 30:3"));
    let place = format!("{}:3", mark("doc"));
    assert_eq!(server.get(&place).as_deref(), Some("r"));
    // No reader set, no counter: only the writer's key and the line.
    assert_eq!(server.keys(), 4, "the key, the line, two places");
    // Manager 1's reader (ticket 10) joins ahead of both.
    let first = reader(&["doc"], 1);
    assert_eq!(node.acquire(&first, ttl(5), false).expect("up"), REFUSED);
    assert_eq!(server.get(&mark("doc")).as_deref(), Some("10:1 20:2 30:3"));
    assert!(node.release(&writer).expect("up"));
    // The key is free: manager 3's reader gives way to manager 2's writer
    // ahead of it, changing nothing; manager 1's reader, first, reads,
    // and the writer gives way to it.
    assert_eq!(node.acquire(&third, ttl(5), false).expect("up"), REFUSED);
    assert_eq!(server.get("doc"), None);
    assert_eq!(node.acquire(&first, ttl(5), false).expect("up"), GRANTED);
    assert_eq!(node.acquire(&waiting, ttl(5), false).expect("up"), REFUSED);
    // The last reader's release leaves the line and tells the first
    // waiting manager, the writer, on its channel: it goes next.
    let mut feed = subscribe(&server, &format!("{RELEASE_CHANNEL}:2"));
    assert!(node.release(&first).expect("up"));
    assert_eq!(next_message(&mut feed), "2 doc");
    assert_eq!(server.get(&format!("{}:1", mark("doc"))), None);
    assert_eq!(node.acquire(&waiting, ttl(5), false).expect("up"), GRANTED);
    assert!(node.release(&waiting).expect("up"));
    // A line entry whose manager stopped waiting (its place is gone) is
    // not given way to.
    server.command(&["SET", &mark("doc"), "5:9 30:3", "PX", "3000"]);
    assert_eq!(node.acquire(&third, ttl(5), false).expect("up"), GRANTED);
    assert!(node.release(&third).expect("up"));
    // A reader does not give way to a waiting writer of its own manager
    // (the manager orders its own callers).
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), GRANTED);
    let own_writer = claim(&["doc"], Some((4, true)));
    assert_eq!(
        node.acquire(&own_writer, ttl(5), false).expect("up"),
        REFUSED
    );
    assert!(node.release(&writer).expect("up"));
    let own_reader = reader(&["doc"], 4);
    assert_eq!(
        node.acquire(&own_reader, ttl(5), false).expect("up"),
        GRANTED
    );
    assert!(node.release(&own_reader).expect("up"));
    assert_eq!(
        node.acquire(&own_writer, ttl(5), false).expect("up"),
        GRANTED
    );
    assert!(node.release(&own_writer).expect("up"));
    assert_eq!(server.keys(), 0, "keys left behind");
}

#[test]
fn a_reader_lives_for_its_ttl_unless_extended() {
    let server = Server::start();
    let node = backend(&server);
    let (short, long) = (reader(&["doc"], 1), reader(&["doc"], 1));
    assert_eq!(
        node.acquire(&short, millis(800), false).expect("up"),
        GRANTED
    );
    assert_eq!(
        node.acquire(&long, millis(800), false).expect("up"),
        GRANTED
    );
    assert!(node.extend(&long, ttl(5)).expect("up"));
    let left = server.pttl("doc");
    assert!(3000 < left && left <= 5000, "doc TTL {left}");
    // The short one expires on its own; the extended one keeps the key.
    wait_for("the short reader to expire", || {
        !server.is_live_reader("doc", &short)
    });
    assert!(server.is_live_reader("doc", &long));
    assert!(
        !node.extend(&short, ttl(5)).expect("up"),
        "an expired reader"
    );
    assert!(!node.release(&short).expect("up"), "an expired reader");
    let writer = claim(&["doc"], None);
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), REFUSED);
    assert_eq!(server.int(&["ZCARD", &readers("doc")]), 1);
    // Shortened, the last reader takes the marker and the set with it
    // when it expires: the writer gets in.
    assert!(node.extend(&long, millis(800)).expect("up"));
    let left = server.pttl("doc");
    assert!(0 < left && left <= 800, "doc TTL {left}");
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), REFUSED);
    wait_for("the writer to get in", || {
        node.acquire(&writer, ttl(5), false).expect("up") == GRANTED
    });
    assert_eq!(server.int(&["EXISTS", &readers("doc")]), 0);
    assert!(!node.extend(&long, ttl(5)).expect("up"));
    assert!(!node.release(&long).expect("up"));
    assert!(node.release(&writer).expect("up"), "the writer held it");
}

#[test]
fn readers_bump_the_fencing_counters_that_writers_bump() {
    let server = Server::start();
    let node = backend(&server);
    let writer = claim(&["doc"], None);
    let fenced = |n| AcquireOutcome::Granted { fence: Some(n) };
    assert_eq!(node.acquire(&writer, ttl(5), true).expect("up"), fenced(1));
    assert!(node.release(&writer).expect("up"));
    let (first, second) = (reader(&["doc"], 1), reader(&["doc"], 2));
    assert_eq!(node.acquire(&first, ttl(5), true).expect("up"), fenced(2));
    assert_eq!(node.acquire(&second, ttl(5), true).expect("up"), fenced(3));
    let counter = format!("doc{FENCE_SUFFIX}");
    assert!(node.raise_fence(&first, 10).expect("up"));
    assert_eq!(server.get(&counter).as_deref(), Some("10"));
    assert!(node.raise_fence(&second, 7).expect("up"), "never lowered");
    assert_eq!(server.get(&counter).as_deref(), Some("10"));
    assert!(!node.raise_fence(&reader(&["doc"], 1), 20).expect("up"));
    assert_eq!(server.get(&counter).as_deref(), Some("10"));
    assert!(node.release(&first).expect("up"));
    assert!(node.release(&second).expect("up"));
    assert!(!node.raise_fence(&second, 20).expect("up"), "released");
    assert_eq!(server.keys(), 1, "only the counter stays");
    assert_eq!(node.acquire(&writer, ttl(5), true).expect("up"), fenced(11));
}

#[test]
fn a_reader_of_several_keys_takes_all_or_none() {
    let server = Server::start();
    let node = backend(&server);
    let writer = claim(&["b"], None);
    assert_eq!(node.acquire(&writer, ttl(5), false).expect("up"), GRANTED);
    let both = reader(&["a", "b"], 1);
    assert_eq!(node.acquire(&both, ttl(5), true).expect("up"), REFUSED);
    // Nothing set on `a` but the reader's place in its line.
    assert_eq!(server.get("a"), None);
    assert_eq!(server.int(&["EXISTS", &readers("a")]), 0);
    assert_eq!(server.keys(), 5, "b, and a line and a place per key");
    assert!(node.release(&writer).expect("up"));
    assert_eq!(
        node.acquire(&both, ttl(5), true).expect("up"),
        AcquireOutcome::Granted { fence: Some(1) }
    );
    let one = reader(&["b"], 2);
    assert_eq!(node.acquire(&one, ttl(5), false).expect("up"), GRANTED);
    // Extend and raise need every key; a reader of one key is not a
    // reader of both.
    let other = Claim::new(
        redlock_core::Resources::new(["a", "b"]).expect("keys"),
        one.token().clone(),
    )
    .shared();
    assert!(!node.extend(&other, ttl(5)).expect("up"));
    assert!(!node.raise_fence(&other, 5).expect("up"));
    assert!(node.extend(&both, ttl(5)).expect("up"));
    assert_eq!(
        node.acquire(&claim(&["a"], None), ttl(5), false)
            .expect("up"),
        REFUSED
    );
    // Released, `a` is free and `b` keeps its other reader.
    assert!(node.release(&both).expect("up"));
    assert_eq!(server.get("a"), None);
    assert_eq!(server.get("b").as_deref(), Some(READERS_MARKER));
    assert!(node.release(&one).expect("up"));
    assert_eq!(server.keys(), 2, "only the counters stay");
}

#[test]
fn a_key_of_another_type_fails_the_shared_scripts_and_changes_nothing() {
    let server = Server::start();
    let node = backend(&server);
    server.command(&["LPUSH", &readers("b"), "x"]);
    let both = reader(&["a", "b"], 1);
    let err = node.acquire(&both, ttl(5), true).expect_err("a list");
    assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
    for result in [
        node.extend(&both, ttl(5)),
        node.release(&both),
        node.raise_fence(&both, 3),
    ] {
        let err = result.expect_err("a list");
        assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
    }
    server.command(&["DEL", &readers("b")]);
    server.command(&["SET", &format!("b{FENCE_SUFFIX}"), "not a counter"]);
    let err = node.acquire(&both, ttl(5), true).expect_err("a string");
    assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
    assert_eq!(server.keys(), 1, "nothing was written");
}

#[test]
fn shared_requests_go_in_pipelined_batches_also_after_script_flush() {
    let server = Server::start();
    let node = backend(&server);
    let (first, second) = (reader(&["x"], 1), reader(&["x"], 2));
    let writer = claim(&["x"], None);
    for flush in [false, true] {
        if flush {
            assert_eq!(server.command(&["SCRIPT", "FLUSH"]).as_deref(), Some("+OK"));
        }
        let batch = [
            Request::Acquire {
                claim: &first,
                ttl: ttl(5),
                fence: false,
            },
            Request::Acquire {
                claim: &second,
                ttl: ttl(5),
                fence: true,
            },
            // Fenced, so a script too: after `SCRIPT FLUSH` every request
            // is sent again in batch order (a `SET NX` would not be, and
            // would run before the readers).
            Request::Acquire {
                claim: &writer,
                ttl: ttl(5),
                fence: true,
            },
            Request::Extend {
                claim: &first,
                ttl: ttl(5),
            },
            Request::RaiseFence {
                claim: &second,
                at_least: 1,
            },
            Request::Release { claim: &first },
            Request::Release { claim: &second },
        ];
        let mut out = Vec::new();
        node.run_batch(&batch, &mut out);
        let answers: Vec<Response> = out.into_iter().map(|r| r.expect("answered")).collect();
        assert_eq!(answers[0], Response::Acquire(GRANTED));
        assert!(matches!(
            answers[1],
            Response::Acquire(AcquireOutcome::Granted { fence: Some(_) })
        ));
        assert_eq!(answers[2], Response::Acquire(REFUSED));
        assert!(answers[3..].iter().all(|a| *a == Response::Held(true)));
        assert_eq!(server.keys(), 1, "only the counter stays");
    }
}

/// A connection subscribed to `channel`.
fn subscribe(server: &Server, channel: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let command = format!(
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    stream.write_all(command.as_bytes()).expect("write");
    let mut feed = BufReader::new(stream);
    // `*3`, `$9`, `subscribe`, `$n`, the channel, `:1`: six lines.
    for _ in 0..6 {
        let mut line = String::new();
        feed.read_line(&mut line).expect("the confirmation");
    }
    feed
}

/// The payload of the next message on a subscribed connection.
fn next_message(feed: &mut BufReader<TcpStream>) -> String {
    let mut lines = Vec::new();
    // `*3`, `$7`, `message`, `$n`, the channel, `$n`, the payload:
    // seven lines.
    for _ in 0..7 {
        let mut line = String::new();
        feed.read_line(&mut line).expect("a message within 5 s");
        lines.push(line.trim_end().to_owned());
    }
    lines.pop().unwrap_or_default()
}
