//! Each script of the Redis backend, step for step: the same reads in the
//! same order (so the same error at the same point), the same writes.
//! `call` is `redis.call` (an error ends the script with it), `pcall` is
//! `redis.pcall` (an error is a value).

use super::keyspace::{CallError, Keyspace};
use super::lua::{arg_number, counter_digits, digits_below, format_d, is_line, number, words};
use super::{ErrorReply, Published, Reply};
use crate::decide::FENCE_LIMIT;
use crate::keys::{FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX};

/// The value of a lock key while it has readers (never a 20-byte token).
pub const READERS_MARKER: &[u8] = b"redlock:readers";

/// The scripts' early return: a reply, or an error that ends the script.
type Step<T> = Result<T, Reply>;

fn call<T>(r: Result<T, CallError>) -> Step<T> {
    r.map_err(|e| Reply::Error(ErrorReply::Call(e)))
}

fn refuse(code: &'static str) -> Reply {
    Reply::Error(ErrorReply::Script(code))
}

pub(crate) fn helper(key: &[u8], suffix: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + suffix.len());
    k.extend_from_slice(key);
    k.extend_from_slice(suffix.as_bytes());
    k
}

pub(crate) fn place(mark: &[u8], id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(mark.len() + 1 + id.len());
    k.extend_from_slice(mark);
    k.push(b':');
    k.extend_from_slice(id);
    k
}

/// The decimal of `FENCE_LIMIT - 1`: a counter at or above it cannot rise.
fn refused_from() -> String {
    (FENCE_LIMIT - 1).to_string()
}

/// `check_counters!`: each counter is digits and below the limit.
fn check_counters(ks: &mut Keyspace, now: i64, counters: &[Vec<u8>]) -> Step<()> {
    let limit = refused_from();
    for c in counters {
        if let Some(v) = call(ks.get(now, c))? {
            // Digits with a leading zero are no counter `INCR` takes.
            let Some(digits) = counter_digits(v).filter(|_| !v.starts_with(b"0") || v.len() == 1)
            else {
                return Err(refuse("WRONGTYPE"));
            };
            if !digits_below(digits, limit.as_bytes()) {
                return Err(refuse("FENCEMAX"));
            }
        }
    }
    Ok(())
}

/// `bump_counters!`: increments each, raises each to the largest; the
/// largest (0 for none).
fn bump_counters(ks: &mut Keyspace, now: i64, counters: &[Vec<u8>]) -> Step<i64> {
    let mut top = 0i64;
    for c in counters {
        top = top.max(call(ks.incr(now, c))?);
    }
    for c in counters {
        let v = call(ks.get(now, c))?.map_or(0.0, number);
        if v < top as f64 {
            ks.set(now, c, top.to_string().as_bytes(), None);
        }
    }
    Ok(top)
}

fn want_too_large(want: &[u8]) -> bool {
    let most = FENCE_LIMIT.to_string();
    want.len() > most.len() || (want.len() == most.len() && want > most.as_bytes())
}

/// Sets each counter below `want` to `want`.
fn set_counters(
    ks: &mut Keyspace,
    now: i64,
    counters: &[Vec<u8>],
    current: &[Vec<u8>],
    want: &[u8],
) {
    for (c, cur) in counters.iter().zip(current) {
        if digits_below(cur, want) {
            ks.set(now, c, want, None);
        }
    }
}

/// Reads each counter as `RAISE_FENCE_LUA` does (`GET or '0'`).
fn read_counters(ks: &mut Keyspace, now: i64, counters: &[Vec<u8>]) -> Step<Vec<Vec<u8>>> {
    let mut current = Vec::with_capacity(counters.len());
    for c in counters {
        let v = call(ks.get(now, c))?.unwrap_or(b"0");
        let Some(digits) = counter_digits(v) else {
            return Err(refuse("WRONGTYPE"));
        };
        current.push(digits.to_vec());
    }
    Ok(current)
}

fn helpers(keys: &[String], suffix: &str) -> Vec<Vec<u8>> {
    keys.iter().map(|k| helper(k.as_bytes(), suffix)).collect()
}

/// `ACQUIRE_LUA`.
pub(crate) fn acquire(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
) -> Step<Reply> {
    for k in keys {
        if call(ks.get(now, k.as_bytes()))?.is_some() {
            return Ok(Reply::Int(-1));
        }
    }
    let counters = if fence {
        helpers(keys, FENCE_SUFFIX)
    } else {
        Vec::new()
    };
    check_counters(ks, now, &counters)?;
    for k in keys {
        ks.set(now, k.as_bytes(), token, Some(ttl));
    }
    Ok(Reply::Int(bump_counters(ks, now, &counters)?))
}

/// The arguments of a queued acquire's line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) me: &'a [u8],
    pub(crate) mark_ttl: i64,
    pub(crate) yields: bool,
    pub(crate) ticket: f64,
}

/// `QUEUED_ACQUIRE_LUA`.
pub(crate) fn queued_acquire(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
    line: Line<'_>,
) -> Step<Reply> {
    let me = line.me;
    let marks = helpers(keys, WAIT_SUFFIX);
    let mut lines: Vec<Vec<(f64, Vec<u8>)>> = Vec::with_capacity(keys.len());
    let mut first: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
    for mark in &marks {
        let mut entries = Vec::new();
        let mut head = None;
        let v = call(ks.get(now, mark))?;
        if v.is_some_and(|v| !is_line(v)) {
            return Err(refuse("WRONGTYPE"));
        }
        let mine = call(ks.get(now, &place(mark, me)))?;
        if mine.is_some_and(|p| p != b"1") {
            return Err(refuse("WRONGTYPE"));
        }
        if let Some(v) = v {
            for (t, id) in words(v) {
                if call(ks.get(now, &place(mark, id)))?.is_some() {
                    if head.is_none() {
                        head = Some(id.to_vec());
                    }
                    if id != me {
                        entries.push((number(t), id.to_vec()));
                    }
                }
            }
        }
        lines.push(entries);
        first.push(head);
    }
    let mut held = false;
    for k in keys {
        if call(ks.get(now, k.as_bytes()))?.is_some() {
            held = true;
        }
    }
    let counters = if fence {
        helpers(keys, FENCE_SUFFIX)
    } else {
        Vec::new()
    };
    check_counters(ks, now, &counters)?;
    let wait = |ks: &mut Keyspace, lines: &mut Vec<Vec<(f64, Vec<u8>)>>| {
        for (mark, entries) in marks.iter().zip(lines.iter_mut()) {
            if entries.len() < 16 {
                let at = entries
                    .iter()
                    .position(|(t, _)| *t > line.ticket)
                    .unwrap_or(entries.len());
                entries.insert(at, (line.ticket, me.to_vec()));
            }
            ks.set(now, &place(mark, me), b"1", Some(line.mark_ttl));
            if entries.is_empty() {
                ks.del(now, mark);
            } else {
                let words: Vec<Vec<u8>> = entries
                    .iter()
                    .map(|(t, id)| {
                        let mut w = format_d(*t).into_bytes();
                        w.push(b':');
                        w.extend_from_slice(id);
                        w
                    })
                    .collect();
                ks.set(now, mark, &words.join(&b' '), Some(line.mark_ttl));
            }
        }
        Reply::Int(-1)
    };
    if line.yields && first.iter().any(|f| f.as_deref().is_some_and(|f| f != me)) {
        return Ok(wait(ks, &mut lines));
    }
    if held {
        return Ok(wait(ks, &mut lines));
    }
    for k in keys {
        ks.set(now, k.as_bytes(), token, Some(ttl));
    }
    Ok(Reply::Int(bump_counters(ks, now, &counters)?))
}

/// `tell_first_waiter!`: whether a live manager in `mark`'s line was told
/// that `key` was released (on `channel:<id>`); a line with nobody live
/// is deleted, a value of another shape left alone.
fn tell_first_waiter(
    ks: &mut Keyspace,
    now: i64,
    mark: &[u8],
    key: &[u8],
    channel: &[u8],
    out: &mut Vec<Published>,
) -> bool {
    // `redis.pcall('GET', mark)`: an error is not a line.
    let Ok(Some(v)) = ks.get(now, mark).map(|v| v.map(<[u8]>::to_vec)) else {
        return false;
    };
    if !is_line(&v) {
        return false;
    }
    for (_, id) in words(&v) {
        // `redis.pcall('GET', place)`: an error value is true in Lua.
        if !matches!(ks.get(now, &place(mark, id)), Ok(None)) {
            let mut message = id.to_vec();
            message.push(b' ');
            message.extend_from_slice(key);
            out.push(Published {
                channel: place(channel, id),
                message,
            });
            return true;
        }
    }
    ks.del(now, mark);
    false
}

/// `RELEASE_LUA`.
pub(crate) fn release(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    channel: &[u8],
    leave: Option<&[u8]>,
    out: &mut Vec<Published>,
) -> Step<Reply> {
    let mark = |k: &String| helper(k.as_bytes(), WAIT_SUFFIX);
    // Every lock key is read before anything is written: an error leaves
    // the node as it was.
    let mut held = 1;
    let mut mine = Vec::with_capacity(keys.len());
    for k in keys {
        if call(ks.get(now, k.as_bytes()))? == Some(token) {
            mine.push(k);
        } else {
            held = 0;
        }
    }
    if let Some(me) = leave {
        for k in keys {
            let p = place(&mark(k), me);
            if matches!(ks.get(now, &p), Ok(Some(b"1"))) {
                ks.del(now, &p);
            }
        }
    }
    let mut waited = 0;
    for k in mine {
        ks.del(now, k.as_bytes());
        if tell_first_waiter(ks, now, &mark(k), k.as_bytes(), channel, out) {
            waited = 2;
        }
    }
    Ok(Reply::Int(held + waited))
}

/// `EXTEND_LUA`.
pub(crate) fn extend(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
) -> Step<Reply> {
    for k in keys {
        if call(ks.get(now, k.as_bytes()))? != Some(token) {
            return Ok(Reply::Int(0));
        }
    }
    for k in keys {
        ks.pexpire(now, k.as_bytes(), ttl);
    }
    Ok(Reply::Int(1))
}

/// `RAISE_FENCE_LUA`.
pub(crate) fn raise_fence(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    want: &[u8],
) -> Step<Reply> {
    for k in keys {
        if call(ks.get(now, k.as_bytes()))? != Some(token) {
            return Ok(Reply::Int(0));
        }
    }
    let counters = helpers(keys, FENCE_SUFFIX);
    let current = read_counters(ks, now, &counters)?;
    if want_too_large(want) {
        return Err(refuse("FENCEMAX"));
    }
    set_counters(ks, now, &counters, &current, want);
    Ok(Reply::Int(1))
}

/// `shared_held!`: whether every key holds the marker and the token among
/// its live readers (every key is read).
fn shared_held(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    readers: &[Vec<u8>],
    token: &[u8],
) -> Step<bool> {
    let mut held = true;
    for (k, r) in keys.iter().zip(readers) {
        let marked = call(ks.get(now, k.as_bytes()))? == Some(READERS_MARKER);
        let score = call(ks.zscore(now, r, token))?;
        if !marked || score.is_none_or(|s| s <= now as f64) {
            held = false;
        }
    }
    Ok(held)
}

/// `add_reader!`: drops the expired readers, adds the token until
/// `until_ms`; how long the latest reader lives.
fn add_reader(
    ks: &mut Keyspace,
    now: i64,
    readers: &[u8],
    token: &[u8],
    until_ms: f64,
) -> Step<i64> {
    call(ks.zrem_upto(now, readers, now as f64))?;
    call(ks.zadd(now, readers, until_ms, token))?;
    let last = call(ks.zlast_score(now, readers))?.unwrap_or(until_ms);
    Ok(format_d(last - now as f64).parse().unwrap_or(0))
}

/// `SHARED_ACQUIRE_LUA`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn shared_acquire(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
    me: &[u8],
    yields: bool,
) -> Step<Reply> {
    let readers = helpers(keys, READERS_SUFFIX);
    let mut held = false;
    for (k, r) in keys.iter().zip(&readers) {
        if call(ks.get(now, k.as_bytes()))?.is_some_and(|v| v != READERS_MARKER) {
            held = true;
        }
        call(ks.zcard(now, r))?;
    }
    let counters = if fence {
        helpers(keys, FENCE_SUFFIX)
    } else {
        Vec::new()
    };
    check_counters(ks, now, &counters)?;
    let mut gives_way = false;
    for k in keys {
        let mark = helper(k.as_bytes(), WAIT_SUFFIX);
        let Some(v) = call(ks.get(now, &mark))? else {
            continue;
        };
        if yields {
            for (_, id) in words(v) {
                if id != me && call(ks.get(now, &place(&mark, id)))?.is_some() {
                    gives_way = true;
                }
            }
        }
    }
    if held || gives_way {
        return Ok(Reply::Int(-1));
    }
    let until_ms = now as f64 + ttl as f64;
    for (k, r) in keys.iter().zip(&readers) {
        let left = add_reader(ks, now, r, token, until_ms)?;
        ks.set(now, k.as_bytes(), READERS_MARKER, Some(left));
        ks.pexpire(now, r, left);
    }
    Ok(Reply::Int(bump_counters(ks, now, &counters)?))
}

/// `SHARED_EXTEND_LUA`.
pub(crate) fn shared_extend(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
) -> Step<Reply> {
    let readers = helpers(keys, READERS_SUFFIX);
    if !shared_held(ks, now, keys, &readers, token)? {
        return Ok(Reply::Int(0));
    }
    let until_ms = now as f64 + ttl as f64;
    for (k, r) in keys.iter().zip(&readers) {
        let left = add_reader(ks, now, r, token, until_ms)?;
        ks.pexpire(now, k.as_bytes(), left);
        ks.pexpire(now, r, left);
    }
    Ok(Reply::Int(1))
}

/// `SHARED_RELEASE_LUA`.
pub(crate) fn shared_release(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    channel: &[u8],
    out: &mut Vec<Published>,
) -> Step<Reply> {
    let readers = helpers(keys, READERS_SUFFIX);
    let held = shared_held(ks, now, keys, &readers, token)?;
    let mut waited = 0;
    for (k, r) in keys.iter().zip(&readers) {
        let value = call(ks.get(now, k.as_bytes()))?;
        let (unset, marker) = (value.is_none(), value == Some(READERS_MARKER));
        call(ks.zrem_upto(now, r, now as f64))?;
        call(ks.zrem(now, r, token))?;
        match call(ks.zlast_score(now, r))? {
            None => {
                ks.del(now, r);
                if marker {
                    ks.del(now, k.as_bytes());
                    let mark = helper(k.as_bytes(), WAIT_SUFFIX);
                    if tell_first_waiter(ks, now, &mark, k.as_bytes(), channel, out) {
                        waited = 2;
                    }
                }
            }
            Some(last) => {
                let left: i64 = format_d(last - now as f64).parse().unwrap_or(0);
                if unset || marker {
                    ks.set(now, k.as_bytes(), READERS_MARKER, Some(left));
                }
                ks.pexpire(now, r, left);
            }
        }
    }
    Ok(Reply::Int(i64::from(held) + waited))
}

/// `SHARED_RAISE_FENCE_LUA`.
pub(crate) fn shared_raise_fence(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    token: &[u8],
    want: &[u8],
) -> Step<Reply> {
    let readers = helpers(keys, READERS_SUFFIX);
    let held = shared_held(ks, now, keys, &readers, token)?;
    let counters = helpers(keys, FENCE_SUFFIX);
    let current = read_counters(ks, now, &counters)?;
    if !held {
        return Ok(Reply::Int(0));
    }
    if want_too_large(want) {
        return Err(refuse("FENCEMAX"));
    }
    set_counters(ks, now, &counters, &current, want);
    Ok(Reply::Int(1))
}

/// `tonumber(ARGV[8]) or 0`.
pub(crate) fn ticket_arg(ticket: &[u8]) -> f64 {
    arg_number(ticket).unwrap_or(0.0)
}
