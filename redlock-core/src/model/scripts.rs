//! Each script of the Redis backend, step for step: the same reads in the
//! same order (so the same error at the same point), the same writes.
//! `call` is `redis.call` (an error ends the script with it), `pcall` is
//! `redis.pcall` (an error is a value).

use super::keyspace::{CallError, Entry, Keyspace, Value};
use super::lua::{
    counter_digits, digits_below, format_d, line_words, lua_long, number, Decimal, Word,
};
use super::{ErrorReply, Published, Reply, Watcher};
use crate::decide::FENCE_LIMIT;
use crate::keys::{
    format_key_in, FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX, WATCH_SUFFIX, WIRE_FORMAT,
};

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

/// `check_format!`: refuses (`WIREFORMAT`, before any other read) when the
/// format key of a lock key ([`crate::keys::format_key`]) holds anything
/// but [`WIRE_FORMAT`] in decimal, or is of another type
/// (`redis.pcall('GET', ...)`: the error is a value); absent is format 1.
fn check_format(ks: &Keyspace, place: &mut Vec<u8>, now: i64, keys: &[String]) -> Step<()> {
    // Without any format key, every lookup below finds none.
    if !ks.may_hold_format_keys() {
        return Ok(());
    }
    let ours = Decimal::of_u64(u64::from(WIRE_FORMAT));
    for k in keys {
        match ks.get(now, format_key_in(place, k.as_bytes())) {
            Ok(None) => {}
            Ok(Some(v)) if v == ours.bytes() => {}
            Ok(Some(v)) => return Err(Reply::Error(ErrorReply::WireFormat(found_format(v)))),
            Err(_) => return Err(Reply::Error(ErrorReply::WireFormat(None))),
        }
    }
    Ok(())
}

/// The format a format key's value names, as the scripts name it in their
/// refusal: a decimal of 1 to 9 digits without a leading zero, else none.
fn found_format(v: &[u8]) -> Option<u32> {
    let canonical = (1..=9).contains(&v.len()) && v[0] != b'0' && v.iter().all(u8::is_ascii_digit);
    canonical
        .then(|| std::str::from_utf8(v).ok()?.parse().ok())
        .flatten()
}

/// Buffers the scripts reuse from one command to the next, so that a
/// command allocates only what it leaves in the key space (and what it
/// publishes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    /// The fencing counters' names.
    counters: Names,
    /// The waiting lines' or the reader sets' names.
    helpers: Names,
    /// A place key (`<line>:<id>`).
    place: Vec<u8>,
    /// The words of the live waiters read from waiting lines, as the
    /// scripts write them back (`string.format('%d', ticket) .. ':' .. id`):
    /// each line as read (the words written back as they are lie in it),
    /// followed by the words it has that are written otherwise.
    ids: Vec<u8>,
    /// The live waiters read, by line.
    waiting: Vec<Waiter>,
    /// The line being read and its words.
    parsed: Parsed,
    /// What was read of each line (where its waiters end in `waiting`).
    lines: Vec<LineRead>,
    /// A waiting line being written.
    line: Vec<u8>,
    /// Indexes of the keys a release deletes.
    mine: Vec<usize>,
}

/// What [`read_lines`] found in one line besides its waiters.
#[derive(Debug, Clone, Copy)]
struct LineRead {
    /// Where the line's live waiters end in [`Scratch::waiting`].
    end: usize,
    /// The caller's place value for it: a writer's or a reader's.
    kind: &'static [u8],
    /// When it reads as `join_lines` would write it back with the
    /// caller's word unchanged (every other word live and written back as
    /// it is, the caller's word once and as it is): how many live waiters
    /// are before the caller, and the caller's ticket in it.
    verbatim: Option<(usize, f64)>,
}

/// A waiting line and its words: the line read or written last, so that
/// reading it again needs no parse, nor its tickets another `tonumber`.
#[derive(Debug, Clone, Default)]
struct Parsed {
    /// The line `words` were found in, if any.
    line: Option<Vec<u8>>,
    /// Its words.
    words: Vec<Word>,
    /// Each word's ticket, as [`Ticket::of`] its digits.
    tickets: Vec<Ticket>,
}

/// A word's ticket digits as the scripts read them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ticket {
    /// `tonumber` of the digits.
    value: f64,
    /// Whether the scripts write the digits back as they are
    /// ([`writes_back_as_is`]).
    as_is: bool,
}

impl Ticket {
    fn of(digits: &[u8]) -> Self {
        Ticket {
            value: number(digits),
            as_is: writes_back_as_is(digits),
        }
    }
}

impl Parsed {
    /// Whether `v` is a line (`is_line`); when it is, `words` are its words
    /// and `tickets` their tickets.
    fn read(&mut self, v: &[u8]) -> bool {
        if self.line.as_deref() == Some(v) {
            debug_assert!(
                same_words(v, &self.words, &self.tickets),
                "the words kept for {v:?}"
            );
            return true;
        }
        self.words.clear();
        self.tickets.clear();
        let (words, tickets) = (&mut self.words, &mut self.tickets);
        if !line_words(v, |w| {
            tickets.push(Ticket::of(&v[w.at..w.colon]));
            words.push(w);
        }) {
            self.line = None;
            return false;
        }
        let line = self.line.get_or_insert_with(Vec::new);
        line.clear();
        line.extend_from_slice(v);
        true
    }
}

/// A live waiter read from a line, as the scripts write it back.
#[derive(Debug, Clone)]
struct Waiter {
    /// `tonumber` of its ticket.
    ticket: f64,
    /// Its word (a range of [`Scratch::ids`]).
    word: std::ops::Range<usize>,
    /// Where the `:` after the ticket is in the word, when the ticket is
    /// digits (0: `string.format('%d')` wrote a sign). A ticket written
    /// back has at most 20 characters, one read as it is at most 15.
    colon: u8,
    /// Whether the word lies in its line as read (its ticket is written
    /// back as it is): its ticket read back is [`Waiter::ticket`].
    as_is: bool,
}

impl Waiter {
    /// The ticket of the word as written back, when it is digits.
    fn written(&self, ids: &[u8]) -> Ticket {
        if self.as_is {
            Ticket {
                value: self.ticket,
                as_is: true,
            }
        } else {
            Ticket::of(&ids[self.word.start..self.word.start + usize::from(self.colon)])
        }
    }
}

/// The value of a waiting manager's place (`<line>:<id>`) when a writer of
/// it waits (or waited and holds).
pub const WRITER_PLACE: &[u8] = b"1";

/// The value of a waiting manager's place when only readers of it wait
/// (or waited and hold): later readers do not give way to it, writers do.
pub const READER_PLACE: &[u8] = b"r";

/// Whether `v` is a place's value.
fn is_place(v: &[u8]) -> bool {
    v == WRITER_PLACE || v == READER_PLACE
}

/// Helper key names of one command's keys, in one buffer.
#[derive(Debug, Clone, Default)]
struct Names {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Names {
    /// Each key with `suffix` (none when `on` is false).
    fn fill(&mut self, keys: &[String], suffix: &str, on: bool) -> &Self {
        self.bytes.clear();
        self.ends.clear();
        if on {
            for k in keys {
                self.bytes.extend_from_slice(k.as_bytes());
                self.bytes.extend_from_slice(suffix.as_bytes());
                self.ends.push(self.bytes.len());
            }
        }
        self
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let name = &self.bytes[start..end];
            start = end;
            name
        })
    }
}

/// `mark .. ':' .. id`, allocated (for callers outside the scripts).
pub(crate) fn place(mark: &[u8], id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(mark.len() + 1 + id.len());
    place_in(&mut k, mark, id);
    k
}

/// `mark .. ':' .. id`, written into `buf`.
fn place_in<'b>(buf: &'b mut Vec<u8>, mark: &[u8], id: &[u8]) -> &'b [u8] {
    buf.clear();
    buf.extend_from_slice(mark);
    buf.push(b':');
    buf.extend_from_slice(id);
    buf
}

/// `check_counters!`: each counter is digits and below the limit.
fn check_counters(ks: &Keyspace, now: i64, counters: &Names) -> Step<()> {
    // The decimal of `FENCE_LIMIT - 1`: a counter at or above it cannot rise.
    let limit = || Decimal::of_u64(FENCE_LIMIT - 1);
    for c in counters.iter() {
        if let Some(v) = call(ks.get(now, c))? {
            // Digits with a leading zero are no counter `INCR` takes.
            let Some(digits) = counter_digits(v).filter(|_| !v.starts_with(b"0") || v.len() == 1)
            else {
                return Err(refuse("WRONGTYPE"));
            };
            if !digits_below(digits, limit().bytes()) {
                return Err(refuse("FENCEMAX"));
            }
        }
    }
    Ok(())
}

/// `bump_counters!`: increments each, raises each to the largest; the
/// largest (0 for none).
fn bump_counters(ks: &mut Keyspace, now: i64, counters: &Names) -> Step<i64> {
    let mut top = 0i64;
    for c in counters.iter() {
        top = top.max(call(ks.incr(now, c))?);
    }
    for c in counters.iter() {
        let v = call(ks.get(now, c))?.map_or(0.0, number);
        if v < top as f64 {
            ks.set(now, c, Decimal::of(top).bytes(), None);
        }
    }
    Ok(top)
}

fn want_too_large(want: &[u8]) -> bool {
    let most = Decimal::of_u64(FENCE_LIMIT);
    let most = most.bytes();
    want.len() > most.len() || (want.len() == most.len() && want > most)
}

/// Sets each counter below `want` to `want`.
fn set_counters(ks: &mut Keyspace, now: i64, counters: &Names, current: &[Vec<u8>], want: &[u8]) {
    for (c, cur) in counters.iter().zip(current) {
        if digits_below(cur, want) {
            ks.set(now, c, want, None);
        }
    }
}

/// Reads each counter as `RAISE_FENCE_LUA` does (`GET or '0'`).
fn read_counters(ks: &Keyspace, now: i64, counters: &Names) -> Step<Vec<Vec<u8>>> {
    let mut current = Vec::with_capacity(counters.ends.len());
    for c in counters.iter() {
        let v = call(ks.get(now, c))?.unwrap_or(b"0");
        let Some(digits) = counter_digits(v) else {
            return Err(refuse("WRONGTYPE"));
        };
        current.push(digits.to_vec());
    }
    Ok(current)
}

/// `ACQUIRE_LUA`.
pub(crate) fn acquire(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
) -> Step<Reply> {
    check_format(ks, &mut sc.place, now, keys)?;
    for k in keys {
        if call(ks.get(now, k.as_bytes()))?.is_some() {
            return Ok(Reply::Int(-1));
        }
    }
    let counters = sc.counters.fill(keys, FENCE_SUFFIX, fence);
    check_counters(ks, now, counters)?;
    for k in keys {
        ks.set(now, k.as_bytes(), token, Some(ttl));
    }
    Ok(Reply::Int(bump_counters(ks, now, counters)?))
}

/// The arguments of a queued acquire's line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) me: &'a [u8],
    pub(crate) mark_ttl: i64,
    pub(crate) yields: bool,
    pub(crate) ticket: f64,
}

/// What reading a caller's lines found.
struct Lines {
    /// Someone else is first in some line (a writer gives way to it).
    other_first: bool,
    /// A live writer of another manager is ahead of the caller in some
    /// line (a reader gives way to it).
    writer_ahead: bool,
}

/// Reads the waiting line of each of `keys` for manager `me` as the
/// scripts do (`read_lines!`): each line's live waiters but `me`, in
/// order, into the scratch buffers (`waiting` by `ends`), and `me`'s place
/// value per line into `kinds` (`writer` decides which when it has none).
fn read_lines(ks: &Keyspace, sc: &mut Scratch, now: i64, me: &[u8], writer: bool) -> Step<Lines> {
    let Scratch {
        helpers: marks,
        place,
        ids,
        waiting,
        lines,
        parsed,
        ..
    } = sc;
    ids.clear();
    waiting.clear();
    lines.clear();
    let mut found = Lines {
        other_first: false,
        writer_ahead: false,
    };
    for mark in marks.iter() {
        let v = call(ks.get(now, mark))?;
        if v.is_some_and(|v| !parsed.read(v)) {
            return Err(refuse("WRONGTYPE"));
        }
        // `mark .. ':'`, then each id after it.
        place_in(place, mark, me);
        let base = place.len() - me.len();
        let mine = call(ks.get(now, place))?;
        if mine.is_some_and(|p| !is_place(p)) {
            return Err(refuse("WRONGTYPE"));
        }
        let kind = if writer || mine == Some(WRITER_PLACE) {
            WRITER_PLACE
        } else {
            READER_PLACE
        };
        let (mut first, mut ahead) = (true, true);
        let line_start = waiting.len();
        // The caller's word (how many live waiters before it, its
        // ticket), while the line reads as it would be written back.
        let (mut same, mut my_word) = (v.is_some(), None);
        if let Some(v) = v {
            // The line as read: the words written back as they are lie in
            // it (one copy, not one per word).
            let copy = ids.len();
            ids.extend_from_slice(v);
            for (&Word { at, colon, end }, &read) in parsed.words.iter().zip(&parsed.tickets) {
                let id = &v[colon + 1..end];
                // Ids mostly differ in their first digit: no `memcmp` then.
                let is_me = id.first() == me.first() && id == me;
                if is_me {
                    same &= read.as_is && my_word.is_none();
                    my_word = Some((waiting.len() - line_start, read.value));
                } else {
                    same &= read.as_is;
                }
                // The caller's own place was read above, from the same key
                // space: the same answer.
                let p = if is_me {
                    mine
                } else {
                    place.truncate(base);
                    place.extend_from_slice(id);
                    call(ks.get(now, place))?
                };
                let Some(p) = p else {
                    same &= is_me;
                    continue;
                };
                if is_me {
                    ahead = false;
                } else {
                    found.other_first |= first;
                    found.writer_ahead |= ahead && p == WRITER_PLACE;
                    let ticket = read.value;
                    let (word, colon) = if read.as_is {
                        // (At most 15 digits.)
                        (copy + at..copy + end, (colon - at) as u8)
                    } else {
                        // Written anew after the copy.
                        let start = ids.len();
                        let text = format_d(ticket);
                        ids.extend_from_slice(text.bytes());
                        ids.push(b':');
                        ids.extend_from_slice(id);
                        // (At most 20 characters.)
                        let colon = if text.is_digits() {
                            text.bytes().len() as u8
                        } else {
                            0
                        };
                        (start..ids.len(), colon)
                    };
                    waiting.push(Waiter {
                        ticket,
                        word,
                        colon,
                        as_is: read.as_is,
                    });
                }
                first = false;
            }
        }
        lines.push(LineRead {
            end: waiting.len(),
            kind,
            verbatim: my_word.filter(|_| same),
        });
    }
    Ok(found)
}

/// Whether `words` are what [`line_words`] finds in line `v`, and
/// `tickets` their tickets.
fn same_words(v: &[u8], words: &[Word], tickets: &[Ticket]) -> bool {
    let mut found = Vec::new();
    let line = line_words(v, |w| {
        found.push((w.at, w.colon, w.end, Ticket::of(&v[w.at..w.colon])));
    });
    let kept = words
        .iter()
        .zip(tickets)
        .map(|(w, &t)| (w.at, w.colon, w.end, t));
    line && words.len() == tickets.len() && found.into_iter().eq(kept)
}

/// Whether ticket digits read from a line are what `string.format('%d',
/// tonumber(digits))` writes back: no leading zero, and few enough digits
/// (15) that the double holds them exactly.
fn writes_back_as_is(digits: &[u8]) -> bool {
    digits.len() <= 15 && (digits.len() == 1 || digits.first() != Some(&b'0'))
}

/// The scripts' `wait()`: joins each line (at most 16 waiters) at the
/// ticket's place, behind equal tickets, and sets the caller's place for
/// the marks' TTL.
fn join_lines(ks: &mut Keyspace, sc: &mut Scratch, now: i64, line: Line<'_>) -> Reply {
    let me = line.me;
    let Scratch {
        helpers: marks,
        place,
        ids,
        waiting,
        lines,
        parsed: Parsed {
            line: parsed,
            words,
            tickets,
        },
        line: out,
        ..
    } = sc;
    // The caller's ticket as written, the `:` after it in its word when
    // it is digits, and the ticket read back: formatted for the first
    // line written anew (none for lines only kept).
    let mut mine = None;
    let mut start = 0;
    for (
        mark,
        &LineRead {
            end,
            kind,
            verbatim,
        },
    ) in marks.iter().zip(lines.iter())
    {
        let others = &waiting[start..end];
        start = end;
        let joins = others.len() < 16;
        let at = others
            .iter()
            .position(|w| w.ticket > line.ticket)
            .unwrap_or(others.len());
        // The caller's place: mostly there already with the same value.
        let p = place_in(place, mark, me);
        if line.mark_ttl <= 0 || !ks.set_expiry_if(now, p, line.mark_ttl, |v| v == kind) {
            ks.set(now, p, kind, Some(line.mark_ttl));
        }
        // (A line the caller joins is never empty: no line is deleted.)
        let (before, after) = others.split_at(if joins { at } else { others.len() });
        // A line written as it already is (each waiter live, the caller's
        // word the same and in place: a waiter asking again) only has its
        // expiry set, as `SET` would; the words kept for it stay right.
        if joins
            && line.mark_ttl > 0
            && verbatim == Some((at, line.ticket))
            && ks.set_expiry_if(now, mark, line.mark_ttl, |v| {
                debug_assert!(
                    is_line_of(
                        v,
                        run(ids, before),
                        &[format_d(line.ticket).bytes(), b":", me],
                        run(ids, after)
                    ),
                    "{v:?} is written back as it is"
                );
                true
            })
        {
            continue;
        }
        let &mut (ticket, my_colon, my_ticket) = mine.get_or_insert_with(|| {
            let ticket = format_d(line.ticket);
            let colon = ticket.is_digits().then_some(ticket.bytes().len());
            (ticket, colon, Ticket::of(ticket.bytes()))
        });
        out.clear();
        // The line's words as written, while every ticket is digits (what
        // `line_words` would find in it).
        words.clear();
        tickets.clear();
        let mut known = copy_words(out, words, tickets, ids, before);
        if joins {
            if !out.is_empty() {
                out.push(b' ');
            }
            let at = out.len();
            out.extend_from_slice(ticket.bytes());
            out.push(b':');
            out.extend_from_slice(me);
            match my_colon {
                Some(colon) => {
                    words.push(Word {
                        at,
                        colon: at + colon,
                        end: out.len(),
                    });
                    tickets.push(my_ticket);
                }
                None => known = false,
            }
        }
        known &= copy_words(out, words, tickets, ids, after);
        ks.set(now, mark, out, Some(line.mark_ttl));
        if known {
            // The line written is kept as the one parsed: its buffer is
            // swapped in, not copied (`out` is cleared before its next use).
            std::mem::swap(parsed.get_or_insert_with(Vec::new), out);
        } else {
            *parsed = None;
        }
    }
    Reply::Int(-1)
}

/// The words of `waiters` (one line's, in order) as they lie in `ids`,
/// when they lie there one space apart (a line read with none left out).
fn run<'i>(ids: &'i [u8], waiters: &[Waiter]) -> &'i [u8] {
    match (waiters.first(), waiters.last()) {
        (Some(first), Some(last)) => &ids[first.word.start..last.word.end],
        _ => &[],
    }
}

/// Whether `v` is the line `join_lines` writes from the words in
/// `before`, the caller's word (the concatenation of `mine`, if any) and
/// the words in `after`: the nonempty parts one space apart.
fn is_line_of(v: &[u8], before: &[u8], mine: &[&[u8]], after: &[u8]) -> bool {
    fn eat(rest: &mut &[u8], piece: &[u8]) -> bool {
        match rest.strip_prefix(piece) {
            Some(r) => {
                *rest = r;
                true
            }
            None => false,
        }
    }
    let mut rest = v;
    let mut first = true;
    for part in [
        std::slice::from_ref(&before),
        mine,
        std::slice::from_ref(&after),
    ] {
        if part.iter().all(|p| p.is_empty()) {
            continue;
        }
        if !(first || eat(&mut rest, b" ")) || !part.iter().all(|p| eat(&mut rest, p)) {
            return false;
        }
        first = false;
    }
    rest.is_empty()
}

/// Appends the words of `waiters` (one line's, in order) to line `out`,
/// one space apart, and notes each word and its ticket; whether every
/// ticket is digits (else the words noted are not all of them). Words
/// that lie one space apart in `ids` (as read, none left out between
/// them) are copied in one run.
fn copy_words(
    out: &mut Vec<u8>,
    words: &mut Vec<Word>,
    tickets: &mut Vec<Ticket>,
    ids: &[u8],
    waiters: &[Waiter],
) -> bool {
    let mut known = true;
    let mut rest = waiters;
    while let Some(first) = rest.first() {
        let mut last = first;
        let mut n = 1;
        for w in &rest[1..] {
            if w.word.start != last.word.end + 1 || ids[last.word.end] != b' ' {
                break;
            }
            last = w;
            n += 1;
        }
        let (run, after) = rest.split_at(n);
        rest = after;
        if !out.is_empty() {
            out.push(b' ');
        }
        let base = out.len();
        let origin = first.word.start;
        out.extend_from_slice(&ids[origin..last.word.end]);
        for w in run {
            if w.colon == 0 {
                known = false;
            } else {
                let at = base + (w.word.start - origin);
                words.push(Word {
                    at,
                    colon: at + usize::from(w.colon),
                    end: base + (w.word.end - origin),
                });
                tickets.push(w.written(ids));
            }
        }
    }
    known
}

/// `QUEUED_ACQUIRE_LUA`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn queued_acquire(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
    line: Line<'_>,
) -> Step<Reply> {
    check_format(ks, &mut sc.place, now, keys)?;
    sc.helpers.fill(keys, WAIT_SUFFIX, true);
    let found = read_lines(ks, sc, now, line.me, true)?;
    let mut held = false;
    for k in keys {
        if call(ks.get(now, k.as_bytes()))?.is_some() {
            held = true;
        }
    }
    let counters = sc.counters.fill(keys, FENCE_SUFFIX, fence);
    check_counters(ks, now, counters)?;
    if (line.yields && found.other_first) || held {
        return Ok(join_lines(ks, sc, now, line));
    }
    for k in keys {
        ks.set(now, k.as_bytes(), token, Some(ttl));
    }
    let counters = &sc.counters;
    Ok(Reply::Int(bump_counters(ks, now, counters)?))
}

/// `tell_first_waiter!`: whether a live manager in `mark`'s line was told
/// that `key` was released (on `channel:<id>`); a line with nobody live
/// is deleted, a value of another shape left alone.
#[allow(clippy::too_many_arguments)]
fn tell_first_waiter(
    ks: &mut Keyspace,
    place: &mut Vec<u8>,
    parsed: &mut Parsed,
    now: i64,
    mark: &[u8],
    key: &[u8],
    channel: &[u8],
    out: &mut Vec<Published>,
) -> bool {
    // `redis.pcall('GET', mark)`: an error is not a line.
    let Ok(Some(v)) = ks.get(now, mark) else {
        return false;
    };
    if !parsed.read(v) {
        return false;
    }
    for &Word { colon, end, .. } in &parsed.words {
        let id = &v[colon + 1..end];
        // `redis.pcall('GET', place)`: an error value is true in Lua.
        if !matches!(ks.get(now, place_in(place, mark, id)), Ok(None)) {
            let mut message = Vec::with_capacity(id.len() + 1 + key.len());
            message.extend_from_slice(id);
            message.push(b' ');
            message.extend_from_slice(key);
            out.push(Published {
                channel: self::place(channel, id),
                message,
            });
            return true;
        }
    }
    ks.del(now, mark);
    false
}

/// `leave_line!`: manager `me` leaves each line: its place is deleted when
/// it holds one of `values` (`redis.pcall`: errors are ignored). A
/// writer's release takes either kind of place; a reader's only a
/// reader's, so that it never takes out a writer of its manager that still
/// waits.
fn leave_lines(
    ks: &mut Keyspace,
    place: &mut Vec<u8>,
    now: i64,
    marks: &Names,
    me: &[u8],
    values: &[&[u8]],
) {
    for mark in marks.iter() {
        let p = place_in(place, mark, me);
        if matches!(ks.get(now, p), Ok(Some(v)) if values.contains(&v)) {
            ks.del(now, p);
        }
    }
}

/// `RELEASE_LUA`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn release(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    channel: &[u8],
    leave: Option<&[u8]>,
    out: &mut Vec<Published>,
) -> Step<Reply> {
    // Every lock key is read before anything is written: an error leaves
    // the node as it was.
    let mut held = 1;
    sc.mine.clear();
    for (i, k) in keys.iter().enumerate() {
        if call(ks.get(now, k.as_bytes()))? == Some(token) {
            sc.mine.push(i);
        } else {
            held = 0;
        }
    }
    let marks = sc.helpers.fill(keys, WAIT_SUFFIX, true);
    if let Some(me) = leave {
        leave_lines(
            ks,
            &mut sc.place,
            now,
            marks,
            me,
            &[WRITER_PLACE, READER_PLACE],
        );
    }
    let mut waited = 0;
    let mut mine = sc.mine.iter().copied().peekable();
    for (i, (k, mark)) in keys.iter().zip(marks.iter()).enumerate() {
        if mine.next_if_eq(&i).is_none() {
            continue;
        }
        ks.del(now, k.as_bytes());
        if tell_first_waiter(
            ks,
            &mut sc.place,
            &mut sc.parsed,
            now,
            mark,
            k.as_bytes(),
            channel,
            out,
        ) {
            waited = 2;
        }
    }
    Ok(Reply::Int(held + waited))
}

/// The watchers' key of lock key `key`.
fn watchers_key(key: &str) -> Vec<u8> {
    let mut w = Vec::with_capacity(key.len() + WATCH_SUFFIX.len());
    w.extend_from_slice(key.as_bytes());
    w.extend_from_slice(WATCH_SUFFIX.as_bytes());
    w
}

/// `INSPECT_LUA`'s watch (`KEYS[3]`): `watcher` joins the watchers of
/// `key` until `now + ttl_ms`; the set lives as long as its last member.
/// A watchers key of another type is left as it is (`redis.pcall`).
pub(crate) fn watch(ks: &mut Keyspace, now: i64, key: &str, watcher: Watcher) {
    let w = watchers_key(key);
    let me = Decimal::of_u64(watcher.manager);
    let until = now.saturating_add(i64::try_from(watcher.ttl_ms).unwrap_or(i64::MAX));
    // `ZREMRANGEBYSCORE`, `ZADD`, `ZRANGE -1 -1`: one lookup.
    if let Ok(last) = ks.zadd_after_upto(now, &w, now as f64, until as f64, me.bytes()) {
        ks.pexpire(now, &w, lua_long(last - now as f64));
    }
}

/// `RELEASE_LUA`'s watched path (`KEYS[3]`), once lock key `key` was
/// deleted: every live watcher of it is told on `channel:<id>`, in the
/// set's order (`redis.pcall`: a watchers key of another type tells
/// nobody).
pub(crate) fn tell_watchers(
    ks: &mut Keyspace,
    now: i64,
    key: &str,
    channel: &[u8],
    out: &mut Vec<Published>,
) {
    let w = watchers_key(key);
    if ks.zrem_upto(now, &w, now as f64).is_err() {
        return;
    }
    let Some(Entry {
        value: Value::Zset(members),
        ..
    }) = ks.entry(now, &w)
    else {
        return;
    };
    for (_, id) in members {
        let mut message = Vec::with_capacity(id.len() + 1 + key.len());
        message.extend_from_slice(id);
        message.push(b' ');
        message.extend_from_slice(key.as_bytes());
        out.push(Published {
            channel: place(channel, id),
            message,
        });
    }
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
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    want: &[u8],
) -> Step<Reply> {
    check_format(ks, &mut sc.place, now, keys)?;
    for k in keys {
        if call(ks.get(now, k.as_bytes()))? != Some(token) {
            return Ok(Reply::Int(0));
        }
    }
    let counters = sc.counters.fill(keys, FENCE_SUFFIX, true);
    let current = read_counters(ks, now, counters)?;
    if want_too_large(want) {
        return Err(refuse("FENCEMAX"));
    }
    set_counters(ks, now, counters, &current, want);
    Ok(Reply::Int(1))
}

/// `shared_held!`: whether every key holds the marker and the token among
/// its live readers (every key is read).
fn shared_held(
    ks: &mut Keyspace,
    now: i64,
    keys: &[String],
    readers: &Names,
    token: &[u8],
) -> Step<bool> {
    let mut held = true;
    for (k, r) in keys.iter().zip(readers.iter()) {
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
    // `ZREMRANGEBYSCORE`, `ZADD`, `ZRANGE -1 -1`: one lookup.
    let last = call(ks.zadd_after_upto(now, readers, now as f64, until_ms, token))?;
    Ok(lua_long(last - now as f64))
}

/// `SHARED_ACQUIRE_LUA`. With a manager, `line` is its place in the
/// keys' lines (its `yields` decides whether it gives way).
#[allow(clippy::too_many_arguments)]
pub(crate) fn shared_acquire(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
    fence: bool,
    line: Option<Line<'_>>,
) -> Step<Reply> {
    check_format(ks, &mut sc.place, now, keys)?;
    let readers = sc.helpers.fill(keys, READERS_SUFFIX, true);
    let mut held = false;
    for (k, r) in keys.iter().zip(readers.iter()) {
        if call(ks.get(now, k.as_bytes()))?.is_some_and(|v| v != READERS_MARKER) {
            held = true;
        }
        call(ks.zcard(now, r))?;
    }
    let counters = sc.counters.fill(keys, FENCE_SUFFIX, fence);
    check_counters(ks, now, counters)?;
    if let Some(line) = line {
        sc.helpers.fill(keys, WAIT_SUFFIX, true);
        let found = read_lines(ks, sc, now, line.me, false)?;
        if held || (line.yields && found.writer_ahead) {
            return Ok(join_lines(ks, sc, now, line));
        }
    } else if held {
        return Ok(Reply::Int(-1));
    }
    let readers = sc.helpers.fill(keys, READERS_SUFFIX, true);
    let until_ms = now as f64 + ttl as f64;
    for (k, r) in keys.iter().zip(readers.iter()) {
        let left = add_reader(ks, now, r, token, until_ms)?;
        ks.set(now, k.as_bytes(), READERS_MARKER, Some(left));
        ks.pexpire(now, r, left);
    }
    Ok(Reply::Int(bump_counters(ks, now, &sc.counters)?))
}

/// `SHARED_EXTEND_LUA`.
pub(crate) fn shared_extend(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    ttl: i64,
) -> Step<Reply> {
    let readers = sc.helpers.fill(keys, READERS_SUFFIX, true);
    if !shared_held(ks, now, keys, readers, token)? {
        return Ok(Reply::Int(0));
    }
    let until_ms = now as f64 + ttl as f64;
    for (k, r) in keys.iter().zip(readers.iter()) {
        let left = add_reader(ks, now, r, token, until_ms)?;
        ks.pexpire(now, k.as_bytes(), left);
        ks.pexpire(now, r, left);
    }
    Ok(Reply::Int(1))
}

/// `SHARED_RELEASE_LUA`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn shared_release(
    ks: &mut Keyspace,
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    channel: &[u8],
    leave: Option<&[u8]>,
    out: &mut Vec<Published>,
) -> Step<Reply> {
    let held = shared_held(
        ks,
        now,
        keys,
        sc.helpers.fill(keys, READERS_SUFFIX, true),
        token,
    )?;
    if let Some(me) = leave {
        leave_lines(
            ks,
            &mut sc.place,
            now,
            sc.helpers.fill(keys, WAIT_SUFFIX, true),
            me,
            &[READER_PLACE],
        );
    }
    let readers = sc.helpers.fill(keys, READERS_SUFFIX, true);
    let mut waited = 0;
    for (k, r) in keys.iter().zip(readers.iter()) {
        let value = call(ks.get(now, k.as_bytes()))?;
        let (unset, marker) = (value.is_none(), value == Some(READERS_MARKER));
        // `ZREMRANGEBYSCORE`, `ZREM`, `ZRANGE -1 -1`: one lookup.
        match call(ks.zrem_after_upto(now, r, now as f64, token))? {
            None => {
                ks.del(now, r);
                if marker {
                    ks.del(now, k.as_bytes());
                    let mark = &mut sc.line;
                    mark.clear();
                    mark.extend_from_slice(k.as_bytes());
                    mark.extend_from_slice(WAIT_SUFFIX.as_bytes());
                    if tell_first_waiter(
                        ks,
                        &mut sc.place,
                        &mut sc.parsed,
                        now,
                        mark,
                        k.as_bytes(),
                        channel,
                        out,
                    ) {
                        waited = 2;
                    }
                }
            }
            Some(last) => {
                let left = lua_long(last - now as f64);
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
    sc: &mut Scratch,
    now: i64,
    keys: &[String],
    token: &[u8],
    want: &[u8],
) -> Step<Reply> {
    check_format(ks, &mut sc.place, now, keys)?;
    let readers = sc.helpers.fill(keys, READERS_SUFFIX, true);
    let held = shared_held(ks, now, keys, readers, token)?;
    let counters = sc.counters.fill(keys, FENCE_SUFFIX, true);
    let current = read_counters(ks, now, counters)?;
    if !held {
        return Ok(Reply::Int(0));
    }
    if want_too_large(want) {
        return Err(refuse("FENCEMAX"));
    }
    set_counters(ks, now, counters, &current, want);
    Ok(Reply::Int(1))
}

/// `tonumber(ARGV[8]) or 0` of the decimal the backend sends for
/// `ticket`: the nearest double, as `strtod` rounds (the lua module's
/// tests check that `as` rounds the same).
pub(crate) fn ticket_arg(ticket: u64) -> f64 {
    ticket as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_copied_as_read_are_what_the_scripts_write_back() {
        let mut n = 1u64;
        for _ in 0..18 {
            for digits in [n.to_string(), format!("0{n}"), (n - 1).to_string()] {
                let d = digits.as_bytes();
                if writes_back_as_is(d) {
                    assert_eq!(format_d(number(d)).bytes(), d, "{digits}");
                }
            }
            n = n * 10 - 1;
        }
        assert!(writes_back_as_is(b"0") && writes_back_as_is(b"999999999999999"));
        assert!(!writes_back_as_is(b"01") && !writes_back_as_is(b"9999999999999999"));
    }
}
