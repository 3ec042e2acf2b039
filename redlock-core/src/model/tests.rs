//! The model's own checks of the rules the scripts document; that the
//! scripts do the same is the differential tests' job.

use super::*;
use crate::keys::{FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX};

fn keys(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn queued<'a>(keys: &'a [String], token: &'a [u8], manager: u64, ticket: u64) -> Command<'a> {
    Command::QueuedAcquire {
        keys,
        token,
        ttl_ms: 1_000,
        fence: false,
        manager,
        mark_ttl_ms: 500,
        yields: true,
        ticket,
    }
}

fn string(node: &Node, now: i64, key: &str) -> Option<Vec<u8>> {
    match node.keys.entry(now, key.as_bytes()).map(|e| &e.value) {
        Some(Value::Str(v)) => Some(v.clone()),
        _ => None,
    }
}

#[test]
fn managers_wait_in_ticket_order_and_the_release_tells_the_first() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    assert_eq!(
        node.apply(0, &queued(&k, b"A", 1, 10), &mut out),
        Reply::Int(0)
    );
    // 3 then 2 wait: the line is in ticket order.
    assert_eq!(
        node.apply(1, &queued(&k, b"C", 3, 30), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(2, &queued(&k, b"B", 2, 20), &mut out),
        Reply::Int(-1)
    );
    let line = format!("r{WAIT_SUFFIX}");
    assert_eq!(string(&node, 2, &line).as_deref(), Some(&b"20:2 30:3"[..]));
    let release = Command::Release {
        keys: &k,
        token: b"A",
        channel: b"ch",
        leave: Some(1),
        watched: false,
    };
    assert_eq!(node.apply(3, &release, &mut out), Reply::Int(3));
    assert_eq!(
        out,
        vec![Published {
            channel: b"ch:2".to_vec(),
            message: b"2 r".to_vec()
        }]
    );
    // 3 gives way to 2, first in line now.
    assert_eq!(
        node.apply(4, &queued(&k, b"C", 3, 30), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(5, &queued(&k, b"B", 2, 20), &mut out),
        Reply::Int(0)
    );
}

#[test]
fn helper_keys_of_another_shape_are_refused_or_left_alone() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let line = format!("r{WAIT_SUFFIX}");
    node.apply(
        0,
        &Command::Set {
            key: line.as_bytes(),
            value: b"someone's data",
            px: None,
        },
        &mut out,
    );
    let refused = node.apply(0, &queued(&k, b"A", 1, 1), &mut out);
    assert_eq!(refused, Reply::Error(ErrorReply::Script("WRONGTYPE")));
    // A plain acquire and its release leave the value alone.
    let acquire = Command::Acquire {
        keys: &k,
        token: b"A",
        ttl_ms: 9,
        fence: false,
    };
    assert_eq!(node.apply(0, &acquire, &mut out), Reply::Int(0));
    let release = Command::Release {
        keys: &k,
        token: b"A",
        channel: b"ch",
        leave: None,
        watched: false,
    };
    assert_eq!(node.apply(0, &release, &mut out), Reply::Int(1));
    assert_eq!(
        string(&node, 0, &line).as_deref(),
        Some(&b"someone's data"[..])
    );
    // A counter that is no counter refuses a fenced acquire before any write.
    let fence = format!("r{FENCE_SUFFIX}");
    node.apply(
        0,
        &Command::Set {
            key: fence.as_bytes(),
            value: b"x",
            px: None,
        },
        &mut out,
    );
    let fenced = Command::Acquire {
        keys: &k,
        token: b"A",
        ttl_ms: 9,
        fence: true,
    };
    assert_eq!(
        node.apply(0, &fenced, &mut out),
        Reply::Error(ErrorReply::Script("WRONGTYPE"))
    );
    assert!(node.keys.entry(0, b"r").is_none());
}

#[test]
fn readers_share_a_key_that_expires_with_the_latest() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let read = |token: &'static [u8], ttl_ms| Command::SharedAcquire {
        keys: Box::leak(Box::new(k.clone())),
        token,
        ttl_ms,
        fence: false,
        manager: None,
        yields: false,
        mark_ttl_ms: 0,
        ticket: 0,
    };
    assert_eq!(node.apply(0, &read(b"A", 100), &mut out), Reply::Int(0));
    assert_eq!(node.apply(10, &read(b"B", 50), &mut out), Reply::Int(0));
    assert_eq!(string(&node, 10, "r").as_deref(), Some(READERS_MARKER));
    assert_eq!(
        node.keys.entry(10, b"r").and_then(|e| e.expires_at),
        Some(100)
    );
    let readers = format!("r{READERS_SUFFIX}");
    assert!(node.keys.entry(10, readers.as_bytes()).is_some());
    // A writer is refused; the last reader's release frees the key.
    let write = Command::Acquire {
        keys: &k,
        token: b"W",
        ttl_ms: 9,
        fence: false,
    };
    assert_eq!(node.apply(20, &write, &mut out), Reply::Int(-1));
    for token in [&b"A"[..], b"B"] {
        let release = Command::SharedRelease {
            keys: &k,
            token,
            channel: b"ch",
            leave: None,
        };
        assert_eq!(node.apply(30, &release, &mut out), Reply::Int(1));
    }
    assert!(node.keys.live(30).next().is_none());
}

/// A reader of manager `m` with `ticket`, waiting in line and yielding.
fn reader<'a>(k: &'a [String], token: &'a [u8], m: u64, ticket: u64) -> Command<'a> {
    Command::SharedAcquire {
        keys: k,
        token,
        ttl_ms: 100,
        fence: false,
        manager: Some(m),
        yields: true,
        mark_ttl_ms: 1_000,
        ticket,
    }
}

/// A writer of manager `m` with `ticket`, waiting in line and yielding.
fn writer<'a>(k: &'a [String], token: &'a [u8], m: u64, ticket: u64) -> Command<'a> {
    Command::QueuedAcquire {
        keys: k,
        token,
        ttl_ms: 100,
        fence: false,
        manager: m,
        mark_ttl_ms: 1_000,
        yields: true,
        ticket,
    }
}

#[test]
fn a_waiting_reader_holds_its_place_and_later_writers_give_way_to_it() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let line = format!("r{WAIT_SUFFIX}");
    // Writer 1 holds; reader 2 waits in line with a reader's place.
    assert_eq!(
        node.apply(0, &writer(&k, b"W1", 1, 1), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(1, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(string(&node, 1, &line).as_deref(), Some(&b"2:2"[..]));
    let place = format!("{line}:2");
    assert_eq!(string(&node, 1, &place).as_deref(), Some(READER_PLACE));
    // Writer 3 comes later: it gives way to the reader first in line.
    assert_eq!(
        node.apply(2, &writer(&k, b"W3", 3, 3), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(string(&node, 2, &line).as_deref(), Some(&b"2:2 3:3"[..]));
    // Writer 1's release tells the reader's manager.
    let release = Command::Release {
        keys: &k,
        token: b"W1",
        channel: b"ch",
        leave: Some(1),
        watched: false,
    };
    assert_eq!(node.apply(3, &release, &mut out), Reply::Int(3));
    assert_eq!(
        out.last().map(|p| p.channel.clone()),
        Some(b"ch:2".to_vec())
    );
    // The reader is in (nobody but readers ahead of it), the writer still
    // gives way, and a new reader 4, behind writer 3, gives way too.
    assert_eq!(
        node.apply(4, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(4, &writer(&k, b"W3", 3, 3), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(5, &reader(&k, b"R4", 4, 4), &mut out),
        Reply::Int(-1)
    );
    // The reader's release takes it out of the line and tells writer 3.
    let done = Command::SharedRelease {
        keys: &k,
        token: b"R2",
        channel: b"ch",
        leave: Some(2),
    };
    assert_eq!(node.apply(6, &done, &mut out), Reply::Int(3));
    assert_eq!(
        out.last().map(|p| p.channel.clone()),
        Some(b"ch:3".to_vec())
    );
    assert!(node.keys.entry(6, place.as_bytes()).is_none());
    assert_eq!(
        node.apply(7, &writer(&k, b"W3", 3, 3), &mut out),
        Reply::Int(0)
    );
}

#[test]
fn waiting_readers_do_not_give_way_to_each_other() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    assert_eq!(
        node.apply(0, &writer(&k, b"W1", 1, 1), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(1, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(1, &reader(&k, b"R3", 3, 3), &mut out),
        Reply::Int(-1)
    );
    let release = Command::Release {
        keys: &k,
        token: b"W1",
        channel: b"ch",
        leave: Some(1),
        watched: false,
    };
    node.apply(2, &release, &mut out);
    // Reader 3 is behind reader 2, yet reads at once: readers share.
    assert_eq!(
        node.apply(3, &reader(&k, b"R3", 3, 3), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(3, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(0)
    );
}

#[test]
fn a_writer_of_the_readers_manager_turns_its_place_into_a_writers() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let place = format!("r{WAIT_SUFFIX}:2");
    assert_eq!(
        node.apply(0, &writer(&k, b"W1", 1, 1), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(1, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(1, &writer(&k, b"W2", 2, 3), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(string(&node, 1, &place).as_deref(), Some(WRITER_PLACE));
    // A reader of manager 2 keeps the writer's place; one of manager 5,
    // behind it, gives way to it.
    assert_eq!(
        node.apply(2, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(string(&node, 2, &place).as_deref(), Some(WRITER_PLACE));
    let release = Command::Release {
        keys: &k,
        token: b"W1",
        channel: b"ch",
        leave: Some(1),
        watched: false,
    };
    node.apply(3, &release, &mut out);
    assert_eq!(
        node.apply(4, &reader(&k, b"R5", 5, 5), &mut out),
        Reply::Int(-1)
    );
}

#[test]
fn a_readers_release_leaves_a_waiting_writer_of_its_manager_its_place() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let place = format!("r{WAIT_SUFFIX}:1");
    // Writer 1 waits behind a holder, reader 2 behind writer 1.
    assert_eq!(
        node.apply(0, &writer(&k, b"W0", 9, 0), &mut out),
        Reply::Int(0)
    );
    assert_eq!(
        node.apply(1, &writer(&k, b"W1", 1, 1), &mut out),
        Reply::Int(-1)
    );
    assert_eq!(
        node.apply(1, &reader(&k, b"R2", 2, 2), &mut out),
        Reply::Int(-1)
    );
    let release = |token: &'static [u8], m| Command::Release {
        keys: Box::leak(Box::new(k.clone())),
        token,
        channel: b"ch",
        leave: Some(m),
        watched: false,
    };
    node.apply(2, &release(b"W0", 9), &mut out);
    // A reader of manager 1 reads (its own writer does not hold it back at
    // the node) and its release keeps manager 1's writer's place.
    assert_eq!(
        node.apply(3, &reader(&k, b"R1", 1, 3), &mut out),
        Reply::Int(0)
    );
    let done = Command::SharedRelease {
        keys: &k,
        token: b"R1",
        channel: b"ch",
        leave: Some(1),
    };
    assert_eq!(node.apply(4, &done, &mut out), Reply::Int(3));
    assert_eq!(string(&node, 4, &place).as_deref(), Some(WRITER_PLACE));
    assert_eq!(
        out.last().map(|p| p.channel.clone()),
        Some(b"ch:1".to_vec())
    );
    assert_eq!(
        node.apply(5, &writer(&k, b"W1", 1, 1), &mut out),
        Reply::Int(0)
    );
}

#[test]
fn a_reader_that_finds_the_line_full_waits_outside_it() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let k = keys(&["r"]);
    let line = format!("r{WAIT_SUFFIX}");
    assert_eq!(
        node.apply(0, &writer(&k, b"W0", 99, 0), &mut out),
        Reply::Int(0)
    );
    for m in 1..=16 {
        assert_eq!(
            node.apply(1, &writer(&k, b"W", m, m), &mut out),
            Reply::Int(-1)
        );
    }
    // Reader 17 finds 16 waiters: its place is set, its entry is not.
    assert_eq!(
        node.apply(2, &reader(&k, b"R", 17, 17), &mut out),
        Reply::Int(-1)
    );
    let words = string(&node, 2, &line).unwrap_or_default();
    assert_eq!(words.split(|b| *b == b' ').count(), 16);
    assert!(!words.ends_with(b":17"));
    assert!(node
        .keys
        .entry(2, format!("{line}:17").as_bytes())
        .is_some());
    // Free again, it still gives way to the writers in the line.
    let release = Command::Release {
        keys: &k,
        token: b"W0",
        channel: b"ch",
        leave: Some(99),
        watched: false,
    };
    node.apply(3, &release, &mut out);
    assert_eq!(
        node.apply(4, &reader(&k, b"R", 17, 17), &mut out),
        Reply::Int(-1)
    );
}

#[test]
fn fenced_grants_raise_every_counter_to_the_largest() {
    let mut node = Node::new();
    let mut out = Vec::new();
    let (a, ab) = (keys(&["a"]), keys(&["a", "b"]));
    let fenced = |keys, token| Command::Acquire {
        keys,
        token,
        ttl_ms: 1,
        fence: true,
    };
    assert_eq!(node.apply(0, &fenced(&a, b"1"), &mut out), Reply::Int(1));
    assert_eq!(node.apply(5, &fenced(&ab, b"2"), &mut out), Reply::Int(2));
    let b_fence = format!("b{FENCE_SUFFIX}");
    assert_eq!(string(&node, 5, &b_fence).as_deref(), Some(&b"2"[..]));
    let limit = (crate::decide::FENCE_LIMIT - 1).to_string();
    node.apply(
        9,
        &Command::Set {
            key: b_fence.as_bytes(),
            value: limit.as_bytes(),
            px: None,
        },
        &mut out,
    );
    assert_eq!(
        node.apply(9, &fenced(&ab, b"3"), &mut out),
        Reply::Error(ErrorReply::Script("FENCEMAX"))
    );
}

#[test]
fn acquiring_scripts_refuse_another_wire_format_and_the_rest_go_on() {
    use crate::keys::FORMAT_SUFFIX;
    let mut out = Vec::new();
    let (k, ab) = (keys(&["r"]), keys(&["a", "r"]));
    let format = format!("r{FORMAT_SUFFIX}");
    let set = |node: &mut Node, value: &[u8]| {
        let set = Command::Set {
            key: format.as_bytes(),
            value,
            px: None,
        };
        node.apply(0, &set, &mut Vec::new());
    };
    let acquire = |keys, fence| Command::Acquire {
        keys,
        token: b"A",
        ttl_ms: 100,
        fence,
    };
    let read = Command::SharedAcquire {
        keys: &k,
        token: b"R",
        ttl_ms: 100,
        fence: false,
        manager: None,
        yields: false,
        mark_ttl_ms: 0,
        ticket: 0,
    };
    let raise = Command::RaiseFence {
        keys: &k,
        token: b"A",
        at_least: 5,
    };
    let read_raise = Command::SharedRaiseFence {
        keys: &k,
        token: b"R",
        at_least: 5,
    };
    // Taken before the marker: held, then the marker appears.
    let mut node = Node::new();
    assert_eq!(node.apply(0, &acquire(&k, true), &mut out), Reply::Int(1));
    set(&mut node, b"1");
    assert_eq!(node.apply(0, &raise, &mut out), Reply::Int(1));
    for (value, found) in [
        (&b"2"[..], Some(2)),
        (b"123456789", Some(123_456_789)),
        (b"1234567890", None),
        (b"02", None),
        (b"0", None),
        (b"x", None),
        (b"", None),
    ] {
        set(&mut node, value);
        let refused = Reply::Error(ErrorReply::WireFormat(found));
        let before = node.keys.clone();
        // Refused first, before contention: the key is held by A.
        assert_eq!(node.apply(1, &acquire(&k, false), &mut out), refused);
        assert_eq!(node.apply(1, &acquire(&ab, true), &mut out), refused);
        assert_eq!(node.apply(1, &queued(&k, b"B", 1, 1), &mut out), refused);
        assert_eq!(node.apply(1, &read, &mut out), refused);
        assert_eq!(node.apply(1, &raise, &mut out), refused);
        assert_eq!(node.apply(1, &read_raise, &mut out), refused);
        assert_eq!(
            format!("{:?}", node.keys.live(1).collect::<Vec<_>>()),
            format!("{:?}", before.live(1).collect::<Vec<_>>()),
            "a refusal wrote"
        );
        // Extend and SET NX never read it.
        let extend = Command::Extend {
            keys: &k,
            token: b"A",
            ttl_ms: 100,
        };
        assert_eq!(node.apply(1, &extend, &mut out), Reply::Int(1));
        let set_nx = Command::SetNxGet {
            key: "r",
            token: b"B",
            ttl_ms: 1,
        };
        assert_eq!(node.apply(1, &set_nx, &mut out), Reply::Bulk(b"A".to_vec()));
    }
    // A key of another type: refused, format unknown.
    node.keys.del(1, format.as_bytes());
    let zadd = Command::ZAdd {
        key: format.as_bytes(),
        score: 1,
        member: b"m",
    };
    node.apply(1, &zadd, &mut out);
    assert_eq!(
        node.apply(1, &acquire(&k, true), &mut out),
        Reply::Error(ErrorReply::WireFormat(None))
    );
    // Release always lets go.
    let release = Command::Release {
        keys: &k,
        token: b"A",
        channel: b"ch",
        leave: None,
        watched: false,
    };
    assert_eq!(node.apply(1, &release, &mut out), Reply::Int(1));
    // The permits of a semaphore read the semaphore's format key.
    node.keys.del(1, format.as_bytes());
    let permit = keys(&["r\u{1f}permit:0"]);
    assert_eq!(
        node.apply(1, &acquire(&permit, true), &mut out),
        Reply::Int(1)
    );
    set(&mut node, b"2");
    let other = keys(&["r\u{1f}permit:1"]);
    assert_eq!(
        node.apply(1, &acquire(&other, true), &mut out),
        Reply::Error(ErrorReply::WireFormat(Some(2)))
    );
}
