//! Each node command on the wire: which script (or plain command) carries
//! it, with which keys and arguments. One writer for every
//! [`Command`] of the node model ([`redlock_core::model`]): the backend's
//! requests go through it ([`Planned::write`](crate::plan::Planned)), and
//! so do the differential tests, which prove each script equal to the
//! model's twin of it (`redlock_core::model`, file `scripts.rs`).

use redlock_core::model::Command;

use crate::scripts::{
    Arg, Keys, Resp, Via, ACQUIRE, EXTEND, QUEUED_ACQUIRE, RAISE_FENCE, RELEASE, SHARED_ACQUIRE,
    SHARED_EXTEND, SHARED_RAISE_FENCE, SHARED_RELEASE,
};

/// The keys of a script: the lock keys, then the helper keys named.
fn keys(locks: &[String], readers: bool, counters: bool, marks: bool) -> Keys<'_> {
    Keys {
        locks,
        readers,
        counters,
        marks,
    }
}

/// Appends `command` to `packed` in RESP, its script sent `via`.
pub(crate) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let n = |keys: &[String]| Arg::Int(keys.len() as u64);
    match *command {
        Command::SetNxGet { key, token, ttl_ms } => {
            Resp(packed)
                .command(7)
                .bulk(b"SET")
                .bulk(key.as_bytes())
                .bulk(token)
                .bulk(b"NX")
                .bulk(b"PX")
                .int(ttl_ms)
                .bulk(b"GET");
        }
        Command::SetNx { key, token, ttl_ms } => {
            Resp(packed)
                .command(6)
                .bulk(b"SET")
                .bulk(key.as_bytes())
                .bulk(token)
                .bulk(b"NX")
                .bulk(b"PX")
                .int(ttl_ms);
        }
        Command::Type { key } => {
            Resp(packed).command(2).bulk(b"TYPE").bulk(key);
        }
        Command::Acquire {
            keys: locks,
            token,
            ttl_ms,
            fence,
        } => {
            let args = [Arg::Bytes(token), Arg::Int(ttl_ms), n(locks)];
            ACQUIRE.write(packed, via, keys(locks, false, fence, false), &args);
        }
        Command::QueuedAcquire {
            keys: locks,
            token,
            ttl_ms,
            fence,
            manager,
            mark_ttl_ms,
            yields,
            ticket,
        } => {
            let args = [
                Arg::Bytes(token),
                Arg::Int(ttl_ms),
                n(locks),
                Arg::Int(u64::from(fence)),
                Arg::Int(manager),
                Arg::Int(mark_ttl_ms),
                Arg::Int(u64::from(yields)),
                Arg::Int(ticket),
            ];
            QUEUED_ACQUIRE.write(packed, via, keys(locks, false, fence, true), &args);
        }
        Command::Extend {
            keys: locks,
            token,
            ttl_ms,
        } => {
            let args = [Arg::Bytes(token), Arg::Int(ttl_ms)];
            EXTEND.write(packed, via, Keys::locks(locks), &args);
        }
        Command::Release {
            keys: locks,
            token,
            channel,
            leave,
        } => {
            let keys = keys(locks, false, false, true);
            match leave {
                Some(manager) => {
                    let args = [Arg::Bytes(token), Arg::Bytes(channel), Arg::Int(manager)];
                    RELEASE.write(packed, via, keys, &args);
                }
                None => RELEASE.write(packed, via, keys, &[Arg::Bytes(token), Arg::Bytes(channel)]),
            }
        }
        Command::RaiseFence {
            keys: locks,
            token,
            at_least,
        } => {
            let args = [Arg::Bytes(token), Arg::Int(at_least)];
            RAISE_FENCE.write(packed, via, keys(locks, false, true, false), &args);
        }
        Command::SharedAcquire {
            keys: locks,
            token,
            ttl_ms,
            fence,
            manager,
            yields,
            mark_ttl_ms,
            ticket,
        } => {
            // No manager: no line to wait in, and an empty id.
            let me = manager.map_or(Arg::Bytes(b""), Arg::Int);
            let args = [
                Arg::Bytes(token),
                Arg::Int(ttl_ms),
                n(locks),
                Arg::Int(u64::from(fence)),
                me,
                Arg::Int(u64::from(yields)),
                Arg::Int(mark_ttl_ms),
                Arg::Int(ticket),
            ];
            SHARED_ACQUIRE.write(packed, via, keys(locks, true, fence, true), &args);
        }
        Command::SharedExtend {
            keys: locks,
            token,
            ttl_ms,
        } => {
            let args = [Arg::Bytes(token), Arg::Int(ttl_ms)];
            SHARED_EXTEND.write(packed, via, keys(locks, true, false, false), &args);
        }
        Command::SharedRelease {
            keys: locks,
            token,
            channel,
            leave,
        } => {
            let keys = keys(locks, true, false, true);
            match leave {
                Some(manager) => {
                    let args = [Arg::Bytes(token), Arg::Bytes(channel), Arg::Int(manager)];
                    SHARED_RELEASE.write(packed, via, keys, &args);
                }
                None => {
                    let args = [Arg::Bytes(token), Arg::Bytes(channel)];
                    SHARED_RELEASE.write(packed, via, keys, &args);
                }
            }
        }
        Command::SharedRaiseFence {
            keys: locks,
            token,
            at_least,
        } => {
            let args = [Arg::Bytes(token), Arg::Int(at_least)];
            SHARED_RAISE_FENCE.write(packed, via, keys(locks, true, true, false), &args);
        }
        Command::Set { key, value, px } => {
            let mut resp = Resp(packed);
            resp.command(if px.is_some() { 5 } else { 3 })
                .bulk(b"SET")
                .bulk(key)
                .bulk(value);
            if let Some(px) = px {
                resp.bulk(b"PX").int(px);
            }
        }
        Command::ZAdd { key, score, member } => {
            let score = score.to_string();
            Resp(packed)
                .command(4)
                .bulk(b"ZADD")
                .bulk(key)
                .bulk(score.as_bytes())
                .bulk(member);
        }
        Command::Del { key } => {
            Resp(packed).command(2).bulk(b"DEL").bulk(key);
        }
        // A command of a later model this writer does not know: a command
        // no server knows, answered with an error.
        _ => {
            Resp(packed).command(1).bulk(b"REDLOCK-UNKNOWN-COMMAND");
        }
    }
}

/// The words of `command` as the backend sends it (scripts by `EVALSHA`,
/// or with `body` by `EVAL`), for tests that send it themselves.
///
/// # Examples
///
/// ```
/// use redlock_core::model::Command;
/// let words = redlock_redis::testing::command_words(
///     &Command::SetNxGet { key: "k", token: b"t", ttl_ms: 5 },
///     false,
/// );
/// assert_eq!(words, [&b"SET"[..], b"k", b"t", b"NX", b"PX", b"5", b"GET"]);
/// ```
#[must_use]
pub fn command_words(command: &Command<'_>, body: bool) -> Vec<Vec<u8>> {
    let mut packed = Vec::new();
    write(
        packed.as_mut(),
        if body { Via::Body } else { Via::Hash },
        command,
    );
    split_resp(&packed)
}

/// The bulk words of commands written by [`Resp`].
fn split_resp(mut packed: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let line = |p: &[u8]| p.iter().position(|b| *b == b'\r').unwrap_or(p.len());
    while let Some(&first) = packed.first() {
        let end = line(packed);
        let n: usize = std::str::from_utf8(&packed[1..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        packed = packed.get(end + 2..).unwrap_or_default();
        if first == b'$' {
            words.push(packed.get(..n).unwrap_or_default().to_vec());
            packed = packed.get(n + 2..).unwrap_or_default();
        }
    }
    words
}
