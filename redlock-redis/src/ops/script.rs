//! The Lua scripts, hashed once per process and sent by `EVALSHA`, with a
//! fallback to `EVAL` on `NOSCRIPT` (after `SCRIPT FLUSH` or a restart);
//! and [`Resp`], which writes the commands that carry them.
//!
//! Every script reads (and so type-checks) all its keys before it writes
//! any, so an error reply leaves the node unchanged (for the keys the
//! backend sends: a name never contains `keys::SEPARATOR`, so no lock key
//! is another's helper key in one command; checked by the differential
//! tests, `tests/tests/integration/differential.rs`).

use std::sync::LazyLock;

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::{FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX};

/// Lua that refuses, with an error reply and before any other read or
/// write, a lock key `KEYS[1..n]` whose format key (its resource, the part
/// before its first U+001F, then [`FORMAT_SUFFIX`](crate::keys::FORMAT_SUFFIX))
/// holds anything but this version's
/// [`WIRE_FORMAT`](redlock_core::keys::WIRE_FORMAT) (`WIREFORMAT`; written
/// out here and checked by a test), or is a key of another type
/// (`redis.pcall`: a `WRONGTYPE` is a value; another error, such as an
/// ACL's `NOPERM`, is the script's reply as it would be from
/// `redis.call`). Absent means format 1, which
/// never writes it. The message names the format found when it is a
/// decimal of 1 to 9 digits without a leading zero. Expects the local `n`.
/// One text for every script that acquires or joins state (not the
/// releases and extends: a holder can always let go of its token).
macro_rules! check_format {
    () => {
        r"
for i = 1, n do
  local f = redis.pcall('GET', string.match(KEYS[i], '^[^\031]*') .. '\031format')
  if type(f) == 'table' and not string.find(tostring(f.err), 'WRONGTYPE', 1, true) then
    return f
  end
  if f and f ~= '1' then
    local found = 'an unknown wire format'
    if type(f) == 'string' and #f <= 9 and string.match(f, '^[1-9]%d*$') then
      found = 'wire format ' .. f
    end
    return redis.error_reply('WIREFORMAT the resource\'s keys are in ' .. found ..
      ', this client speaks 1: upgrade every client of it together')
  end
end
"
    };
}

/// Lua that increments the fencing counters `KEYS[first..last]` and raises
/// every one of them to the largest, `top` (0 when there are none), so
/// that a later lock on any of the keys gets a larger value; then returns
/// `top`. Expects the locals `first` and `last`. One text for every
/// acquire script.
macro_rules! bump_counters {
    () => {
        r"
local top = 0
for i = first, last do
  local v = redis.call('INCR', KEYS[i])
  if v > top then
    top = v
  end
end
for i = first, last do
  if tonumber(redis.call('GET', KEYS[i])) < top then
    redis.call('SET', KEYS[i], top)
  end
end
return top
"
    };
}

/// Lua that refuses, with an error reply and before any write, a fencing
/// counter `KEYS[first..last]` that is not a counter (`WRONGTYPE`) or
/// that cannot rise by an increment and the quorum's raise any more
/// (`FENCEMAX`: at or above [`FENCE_LIMIT`](redlock_core::decide::FENCE_LIMIT)
/// `- 1`, written out here in decimal and checked by a test). Counters
/// stay below 2^53, so Lua's doubles hold them exactly. Expects the
/// locals `first` and `last`. One text for every acquire script.
macro_rules! check_counters {
    () => {
        r"
for i = first, last do
  local v = redis.call('GET', KEYS[i])
  if v then
    if not string.match(v, '^%d+$') or string.match(v, '^0%d') then
      return redis.error_reply('WRONGTYPE a fencing counter holds something else')
    end
    v = string.gsub(v, '^0+(%d)', '%1')
    if #v > 16 or (#v == 16 and v >= '9007199254740990') then
      return redis.error_reply('FENCEMAX a fencing counter is at its largest value')
    end
  end
end
"
    };
}

/// Lua that defines `is_line(v)`: whether `v` has a waiting mark's shape
/// (`ticket:id` words separated by spaces), so that a script deletes or
/// rewrites a mark only when it is one. One text for every script that
/// reads marks.
macro_rules! is_line {
    () => {
        r"
local function is_line(v)
  if type(v) ~= 'string' or v == '' then
    return false
  end
  local rest = string.gsub(v, '%d+:%S+', '')
  return string.match(rest, '^ *$') ~= nil
end
"
    };
}

/// Lua that tells the first live manager in the waiting line `mark` that
/// `key` was released, on that manager's own channel (`ARGV[2]:<id>`,
/// `redis.pcall`: best effort), and sets the local `told`; a line with
/// nobody live left in it is deleted; a value of another shape is left
/// alone. Expects the locals `mark` and `key` and the function `is_line`
/// ([`is_line!`]). One text for every release script ([`RELEASE_LUA`] and
/// the shared one).
macro_rules! tell_first_waiter {
    () => {
        r"
local told = false
local v = redis.pcall('GET', mark)
if is_line(v) then
  for _, id in string.gmatch(v, '(%d+):(%S+)') do
    if redis.pcall('GET', mark .. ':' .. id) then
      redis.pcall('PUBLISH', ARGV[2] .. ':' .. id, id .. ' ' .. key)
      told = true
      break
    end
  end
  if not told then
    redis.pcall('DEL', mark)
  end
end
"
    };
}

/// Lua that takes the manager `ARGV[3]` out of the waiting line `mark`:
/// deletes its place `mark:<id>` when that holds a reader's place (`r`),
/// or a writer's (`1`) when the local `writers_leave` is true
/// (`redis.pcall`: best effort). A writer's release takes either, a
/// reader's only `r`, so that it never takes out a writer of its manager
/// that still waits. Expects the locals `mark` and `writers_leave`. One
/// text for every release script.
macro_rules! leave_line {
    () => {
        r"
  local place = mark .. ':' .. ARGV[3]
  local p = redis.pcall('GET', place)
  if p == 'r' or (writers_leave and p == '1') then
    redis.pcall('DEL', place)
  end
"
    };
}

/// Lua that reads the waiting line of each lock key for the manager `me`
/// (the marks are `KEYS[marks_at + 1..marks_at + n]`): `lines[i]` holds
/// the live waiters but `me`, in order, as `{ticket, id}`; `kinds[i]` the
/// value `me`'s place gets when it waits (`1` for a writer, or when `me`
/// already waits as one; else `r`); `other_first` is set when another
/// manager is first in some line (a writer gives way to it),
/// `writer_ahead` when a live writer of another manager is ahead of `me`
/// in some line (a reader gives way to it). Refuses a line or a place of
/// another shape (`WRONGTYPE`) before any write. Expects the locals `n`,
/// `me`, `marks_at`, `writer` and the function `is_line` ([`is_line!`]).
/// One text for the queued acquire and the shared one.
macro_rules! read_lines {
    () => {
        r"
local lines, kinds = {}, {}
local other_first, writer_ahead = false, false
for i = 1, n do
  local mark = KEYS[marks_at + i]
  local line = {}
  local v = redis.call('GET', mark)
  if v and not is_line(v) then
    return redis.error_reply('WRONGTYPE a waiting line holds something else')
  end
  local place = redis.call('GET', mark .. ':' .. me)
  if place and place ~= '1' and place ~= 'r' then
    return redis.error_reply('WRONGTYPE a place in a waiting line holds something else')
  end
  if writer or place == '1' then
    kinds[i] = '1'
  else
    kinds[i] = 'r'
  end
  local first, ahead = true, true
  if v then
    for t, id in string.gmatch(v, '(%d+):(%S+)') do
      local p = redis.call('GET', mark .. ':' .. id)
      if p then
        if id == me then
          ahead = false
        else
          if first then
            other_first = true
          end
          if ahead and p == '1' then
            writer_ahead = true
          end
          line[#line + 1] = {tonumber(t), id}
        end
        first = false
      end
    end
  end
  lines[i] = line
end
"
    };
}

/// Lua that defines `wait()`: joins each line read by [`read_lines!`] (at
/// most 16 waiters) at the place of the ticket `ticket` (behind equal
/// tickets), sets `me`'s place to `kinds[i]` and both for the marks' TTL
/// `ttl` (ms), and returns -1. Expects the locals of [`read_lines!`] and
/// `ticket` and `ttl`. One text for the queued acquire and the shared one.
macro_rules! join_lines {
    () => {
        r"
local function wait()
  for i = 1, n do
    local mark = KEYS[marks_at + i]
    local line = lines[i]
    if #line < 16 then
      local at = #line + 1
      for k, e in ipairs(line) do
        if e[1] > ticket then
          at = k
          break
        end
      end
      table.insert(line, at, {ticket, me})
    end
    redis.call('SET', mark .. ':' .. me, kinds[i], 'PX', ttl)
    if #line == 0 then
      redis.call('DEL', mark)
    else
      local words = {}
      for k, e in ipairs(line) do
        words[k] = string.format('%d', e[1]) .. ':' .. e[2]
      end
      redis.call('SET', mark, table.concat(words, ' '), 'PX', ttl)
    end
  end
  return -1
end
"
    };
}

mod shared;

#[cfg(test)]
pub(crate) use shared::READERS_MARKER;
pub(crate) use shared::{SHARED_ACQUIRE, SHARED_EXTEND, SHARED_RAISE_FENCE, SHARED_RELEASE};

/// Acquires all lock keys or none; with fencing, increments each key's
/// counter.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]` (with fencing only): their
/// fencing counters. `ARGV`: token, TTL in ms, `n`.
/// Returns -1 when a lock key exists, else the largest counter after the
/// increment (0 without fencing).
///
/// The node model's [`Command::Acquire`](redlock_core::model::Command::Acquire) must equal it
/// (its twin: `fn acquire` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const ACQUIRE_LUA: &str = concat!(
    r"
local n = tonumber(ARGV[3])
",
    check_format!(),
    r"
for i = 1, n do
  if redis.call('GET', KEYS[i]) then
    return -1
  end
end
local first, last = n + 1, #KEYS
",
    check_counters!(),
    r"
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
",
    bump_counters!()
);

/// Acquires all lock keys or none for a caller that waits in line, keeping
/// the waiting marks (see `redlock_core::backend::Queued`).
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..n+c]`: their fencing counters
/// (`c` is `n` with fencing, else 0); `KEYS[n+c+1..n+c+n]`: their waiting
/// marks. `ARGV`: token, TTL in ms, `n`, fencing (`1` or `0`), the waiting
/// manager's id, the marks' TTL in ms, whether to give way to other
/// managers' marks (`1` or `0`), the manager's ticket.
///
/// A mark `M` is the line of managers waiting for its key, in the order of
/// their tickets (the same on every node for one call, so the nodes' lines
/// agree): `ticket:id` words separated by spaces, at most 16. Each waiting
/// manager `id` also has a key `M:id` that lives for the marks' TTL from
/// its last refusal: one whose key is gone has left the line (by its
/// lock's release, [`RELEASE_LUA`], or by going away), also when the
/// caller is this manager again. The first live one owns the mark.
///
/// Returns -1 when it gave way to another manager's mark or when a lock
/// key exists: then it waits in every key's line at its ticket's place
/// (behind equal tickets) and its `M:id` keys live for the marks' TTL.
/// Else it grants as [`ACQUIRE_LUA`] does and returns the largest counter
/// (0 without fencing), keeping its place in the keys' lines: when the
/// round failed on other nodes, the lines still agree across nodes for
/// the next one. The lock's release leaves them ([`RELEASE_LUA`]).
///
/// The node model's [`Command::QueuedAcquire`](redlock_core::model::Command::QueuedAcquire) must equal it
/// (its twin: `fn queued_acquire` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const QUEUED_ACQUIRE_LUA: &str = concat!(
    is_line!(),
    r"
local n = tonumber(ARGV[3])
",
    check_format!(),
    r"
local c = 0
if ARGV[4] == '1' then
  c = n
end
local me = ARGV[5]
local ttl = ARGV[6]
local ticket = tonumber(ARGV[8]) or 0
local marks_at, writer = n + c, true
",
    read_lines!(),
    r"
local held = false
for i = 1, n do
  if redis.call('GET', KEYS[i]) then
    held = true
  end
end
do
  local first, last = n + 1, n + c
",
    check_counters!(),
    r"
end
",
    join_lines!(),
    r"
if (ARGV[7] == '1' and other_first) or held then
  return wait()
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local first, last = n + 1, n + c
",
    bump_counters!()
);

/// Deletes every lock key that holds our token and, for each deleted key
/// that managers wait for, publishes the first live one's id and the key
/// (`<id> <key>`) on that manager's channel (`<prefix>:<id>`), so that
/// that manager, and only it, tries again at once (the marks' lines: see
/// [`QUEUED_ACQUIRE_LUA`]).
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their waiting marks.
/// `ARGV`: token, channel prefix, and, for the release of a lock won by a
/// caller that waited in line, its manager's id: that manager leaves the
/// keys' lines (its `M:id` keys are deleted) before the next live one is
/// told. A failed round's release leaves the id out, so the caller keeps
/// its place for its next round. A mark with nobody live left in it is
/// deleted with the key. Returns 1 when all of them held the
/// token, else 0, plus 2 when a manager waited for a deleted key (the
/// releaser's next `lock` of it then waits in line too).
/// The notification is best effort: marks are read and `PUBLISH` sent by
/// `redis.pcall`, so neither a mark of another type nor a user the ACL does
/// not let publish keeps the release from happening (its waiters poll).
/// Every lock key is read before anything is written, so an error reply
/// (a lock key of another type) leaves the node as it was. A release of
/// one key, the common case, takes a path of its own that builds no table
/// and runs no loop over the keys: the same replies for less server time
/// per release (measured in docs/benchmarks.md).
///
/// The node model's [`Command::Release`](redlock_core::model::Command::Release) must equal it
/// (its twin: `fn release` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const RELEASE_LUA: &str = concat!(
    is_line!(),
    r"
local n = #KEYS / 2
local writers_leave = true
if n == 1 then
  local v = redis.call('GET', KEYS[1])
  if ARGV[3] then
    local mark = KEYS[2]
",
    leave_line!(),
    r"
  end
  if v ~= ARGV[1] then
    return 0
  end
  redis.call('DEL', KEYS[1])
  local mark, key = KEYS[2], KEYS[1]
",
    tell_first_waiter!(),
    r"
  if told then
    return 3
  end
  return 1
end
local held = 1
local mine = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    mine[#mine + 1] = i
  else
    held = 0
  end
end
if ARGV[3] then
  for i = n + 1, #KEYS do
    local mark = KEYS[i]
",
    leave_line!(),
    r"
  end
end
local waited = 0
for _, i in ipairs(mine) do
  redis.call('DEL', KEYS[i])
  local mark, key = KEYS[n + i], KEYS[i]
",
    tell_first_waiter!(),
    r"
  if told then
    waited = 2
  end
end
return held + waited
"
);

/// Resets the TTL of every lock key, only if all hold our token.
/// `ARGV`: token, TTL in ms. Returns 1 if it did, else 0.
///
/// The node model's [`Command::Extend`](redlock_core::model::Command::Extend) must equal it
/// (its twin: `fn extend` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const EXTEND_LUA: &str = r"
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
";

/// Raises each fencing counter to at least a value, only if every lock key
/// holds our token. `KEYS[1..n]`: lock keys, `KEYS[n+1..2n]`: counters.
/// `ARGV`: token, the value as a canonical decimal (compared exactly, as
/// text, not as a Lua double). Returns 1 if the keys were held, else 0.
///
/// The node model's [`Command::RaiseFence`](redlock_core::model::Command::RaiseFence) must equal it
/// (its twin: `fn raise_fence` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const RAISE_FENCE_LUA: &str = concat!(
    r"
local n = #KEYS / 2
",
    check_format!(),
    r"
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local current = {}
for i = n + 1, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not string.match(v, '^%d+$') then
    return redis.error_reply('WRONGTYPE a fencing counter holds something else')
  end
  current[i] = (string.gsub(v, '^0+(%d)', '%1'))
end
local want = ARGV[2]
if #want > 16 or (#want == 16 and want > '9007199254740991') then
  return redis.error_reply('FENCEMAX a fencing counter cannot hold that value')
end
for i = n + 1, #KEYS do
  local cur = current[i]
  if #cur < #want or (#cur == #want and cur < want) then
    redis.call('SET', KEYS[i], want)
  end
end
return 1
"
);

/// A Lua script with its SHA1, computed once.
pub(crate) struct LuaScript {
    code: &'static str,
    hash: String,
}

/// How a script is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `EVALSHA` with the hash: 40 bytes, no hashing on the server; answered
    /// `NOSCRIPT` when the server does not have the script.
    Hash,
    /// `EVAL` with the whole body, which the server hashes on every call
    /// (and caches).
    Body,
}

/// The keys a script runs on: a claim's lock keys, then, with `readers`,
/// the reader set of each (`key` + [`READERS_SUFFIX`]), then, with
/// `counters`, the fencing counter of each (`key` + [`FENCE_SUFFIX`]),
/// then, with `marks`, the waiting mark of each (`key` + [`WAIT_SUFFIX`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys<'a> {
    pub(crate) locks: &'a [String],
    pub(crate) readers: bool,
    pub(crate) counters: bool,
    pub(crate) marks: bool,
}

impl<'a> Keys<'a> {
    /// Just the lock keys.
    pub(crate) fn locks(locks: &'a [String]) -> Self {
        Keys {
            locks,
            readers: false,
            counters: false,
            marks: false,
        }
    }

    fn len(self) -> usize {
        let each = 1 + usize::from(self.readers) + usize::from(self.counters);
        self.locks.len() * (each + usize::from(self.marks))
    }
}

/// A script argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Bytes(&'a [u8]),
    /// Sent in decimal.
    Int(u64),
}

impl LuaScript {
    fn new(code: &'static str) -> Self {
        LuaScript {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    #[cfg(test)]
    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }

    /// Appends the command that runs the script on `keys` with `args`:
    /// `EVALSHA hash numkeys keys... args...` (or `EVAL body ...`).
    pub(crate) fn write(&self, packed: &mut Vec<u8>, via: Via, keys: Keys<'_>, args: &[Arg<'_>]) {
        let mut resp = Resp(packed);
        resp.command(3 + keys.len() + args.len());
        match via {
            Via::Hash => resp.bulk(b"EVALSHA").bulk(self.hash.as_bytes()),
            Via::Body => resp.bulk(b"EVAL").bulk(self.code.as_bytes()),
        };
        resp.int(keys.len() as u64);
        for key in keys.locks {
            resp.bulk(key.as_bytes());
        }
        if keys.readers {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), READERS_SUFFIX.as_bytes());
            }
        }
        if keys.counters {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), FENCE_SUFFIX.as_bytes());
            }
        }
        if keys.marks {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), WAIT_SUFFIX.as_bytes());
            }
        }
        for arg in args {
            match *arg {
                Arg::Bytes(bytes) => resp.bulk(bytes),
                Arg::Int(n) => resp.int(n),
            };
        }
    }
}

/// Whether an error reply is `NOSCRIPT`: the server does not have the
/// script that an `EVALSHA` named (after `SCRIPT FLUSH` or a restart), and
/// did nothing.
pub(crate) fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Writes commands in RESP, as `redis::Cmd` packs them, straight into a
/// buffer: no `Cmd` to build (two vectors, and the whole script body
/// copied for `EVAL`) and no packed copy of it per command.
///
/// A command is `command(n)` followed by exactly `n` words (`bulk`,
/// `bulk_joined`, `int`).
pub(crate) struct Resp<'a>(pub(crate) &'a mut Vec<u8>);

impl Resp<'_> {
    /// Starts a command of `words` words (the verb counts).
    pub(crate) fn command(&mut self, words: usize) -> &mut Self {
        self.0.push(b'*');
        self.decimal(words as u64);
        self.0.extend_from_slice(b"\r\n");
        self
    }

    /// One word.
    pub(crate) fn bulk(&mut self, word: &[u8]) -> &mut Self {
        self.bulk_joined(word, b"")
    }

    /// One word made of `head` then `tail`.
    pub(crate) fn bulk_joined(&mut self, head: &[u8], tail: &[u8]) -> &mut Self {
        self.0.push(b'$');
        self.decimal((head.len() + tail.len()) as u64);
        self.0.extend_from_slice(b"\r\n");
        self.0.extend_from_slice(head);
        self.0.extend_from_slice(tail);
        self.0.extend_from_slice(b"\r\n");
        self
    }

    /// One word: `n` in decimal.
    pub(crate) fn int(&mut self, n: u64) -> &mut Self {
        let mut digits = [0; 20];
        let start = write_decimal(&mut digits, n);
        self.bulk(&digits[start..])
    }

    fn decimal(&mut self, n: u64) {
        let mut digits = [0; 20];
        let start = write_decimal(&mut digits, n);
        self.0.extend_from_slice(&digits[start..]);
    }
}

/// Writes `n` in decimal at the end of `digits` (20 digits hold any `u64`)
/// and returns where it starts.
fn write_decimal(digits: &mut [u8; 20], mut n: u64) -> usize {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return start;
        }
    }
}

/// The bodies of every script, for a new connection to load (`SCRIPT LOAD`,
/// in the same round trip as the rest of its handshake) so that `EVALSHA`
/// hits from the first call (also after a server restart).
///
/// This also vets the node: a Sentinel (or another server without
/// scripting) answers "unknown command" here in plain text, rather than
/// later echoing the binary lock token in a reply that cannot be parsed. A
/// `NOPERM` (an ACL user without `SCRIPT`) is tolerated: the calls fall back
/// to `EVAL`.
pub(crate) fn preload() -> [&'static str; 9] {
    [
        ACQUIRE.code,
        QUEUED_ACQUIRE.code,
        RELEASE.code,
        EXTEND.code,
        RAISE_FENCE.code,
        SHARED_ACQUIRE.code,
        SHARED_EXTEND.code,
        SHARED_RELEASE.code,
        SHARED_RAISE_FENCE.code,
    ]
}

pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(ACQUIRE_LUA));
pub(crate) static QUEUED_ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(QUEUED_ACQUIRE_LUA));
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(RELEASE_LUA));
pub(crate) static EXTEND: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(EXTEND_LUA));
pub(crate) static RAISE_FENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(RAISE_FENCE_LUA));
#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn hashes_are_sha1_hex_and_distinct() {
        let hashes = [
            &ACQUIRE.hash,
            &QUEUED_ACQUIRE.hash,
            &RELEASE.hash,
            &EXTEND.hash,
            &RAISE_FENCE.hash,
            &SHARED_ACQUIRE.hash,
            &SHARED_EXTEND.hash,
            &SHARED_RELEASE.hash,
            &SHARED_RAISE_FENCE.hash,
        ];
        for hash in hashes {
            assert_eq!(hash.len(), 40);
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        let distinct: std::collections::HashSet<_> = hashes.into_iter().collect();
        assert_eq!(distinct.len(), 9);
        assert_eq!(preload().len(), 9);
    }

    #[test]
    fn the_shared_scripts_write_the_marker_that_is_never_a_token() {
        assert_ne!(READERS_MARKER.len(), 20);
        let quoted = format!("local marker = '{READERS_MARKER}'");
        for script in [
            &SHARED_ACQUIRE,
            &SHARED_EXTEND,
            &SHARED_RELEASE,
            &SHARED_RAISE_FENCE,
        ] {
            assert!(script.code.contains(&quoted), "{}", script.code);
        }
        // The exclusive scripts know nothing of readers.
        for script in [&ACQUIRE, &QUEUED_ACQUIRE, &RELEASE, &EXTEND, &RAISE_FENCE] {
            assert!(!script.code.contains("readers"));
        }
    }

    #[test]
    fn the_scripts_spell_the_fence_limit_as_the_core_defines_it() {
        let limit = redlock_core::decide::FENCE_LIMIT;
        let refused = format!("v >= '{}'", limit - 1);
        let most = format!("want > '{limit}'");
        let digits = format!("#v == {}", limit.to_string().len());
        for script in [&ACQUIRE, &QUEUED_ACQUIRE, &SHARED_ACQUIRE] {
            assert!(script.code.contains(&refused), "{}", script.code);
            assert!(script.code.contains(&digits), "{}", script.code);
        }
        for script in [&RAISE_FENCE, &SHARED_RAISE_FENCE] {
            assert!(script.code.contains(&most), "{}", script.code);
        }
        // Below 2^53: Lua's doubles hold every counter exactly.
        assert!(limit < 1 << 53);
    }

    #[test]
    fn the_scripts_spell_the_wire_format_as_the_core_defines_it() {
        use redlock_core::keys::{FORMAT_SUFFIX, SEPARATOR, WIRE_FORMAT};
        let ours = format!("f ~= '{WIRE_FORMAT}'");
        let speaks = format!("this client speaks {WIRE_FORMAT}:");
        // Lua's decimal escape for the separator, then the suffix's name.
        let escape = format!("\\{:03}", u32::from(SEPARATOR));
        let name = FORMAT_SUFFIX.strip_prefix(SEPARATOR).unwrap_or_default();
        let key = format!("'^[^{escape}]*') .. '{escape}{name}'");
        let acquiring = [
            &ACQUIRE,
            &QUEUED_ACQUIRE,
            &RAISE_FENCE,
            &SHARED_ACQUIRE,
            &SHARED_RAISE_FENCE,
        ];
        for script in acquiring {
            for text in [&ours, &speaks, &key, &"WIREFORMAT ".to_owned()] {
                assert!(
                    script.code.contains(text.as_str()),
                    "{text}: {}",
                    script.code
                );
            }
            // Before anything else is read: the first `GET` is the format's.
            let first_get = script.code.find("'GET'").unwrap_or_default();
            let format_get = script.code.find(&key).unwrap_or(usize::MAX);
            assert!(
                format_get > first_get && format_get - first_get < 40,
                "{}",
                script.code
            );
        }
        // Releases and extends never read it: a holder can always let go.
        for script in [&RELEASE, &EXTEND, &SHARED_RELEASE, &SHARED_EXTEND] {
            assert!(!script.code.contains("WIREFORMAT"), "{}", script.code);
            assert!(!script.code.contains(&escape), "{}", script.code);
        }
    }

    fn written(script: &LuaScript, via: Via, keys: Keys<'_>, args: &[Arg<'_>]) -> Vec<u8> {
        let mut packed = Vec::new();
        script.write(&mut packed, via, keys, args);
        packed
    }

    #[test]
    fn commands_carry_keys_then_args_as_redis_rs_packs_them() {
        let locks = ["a".to_owned(), "bé".to_owned()];
        let keys = Keys::locks(&locks);
        let args = [Arg::Bytes(b"tok\r\n\0"), Arg::Int(0), Arg::Int(u64::MAX)];
        let expected = redis::cmd("EVALSHA")
            .arg(&RELEASE.hash)
            .arg(2)
            .arg("a")
            .arg("bé")
            .arg(&b"tok\r\n\0"[..])
            .arg(0)
            .arg(u64::MAX)
            .get_packed_command();
        assert_eq!(written(&RELEASE, Via::Hash, keys, &args), expected);
        let fenced = Keys {
            locks: &locks,
            readers: false,
            counters: true,
            marks: false,
        };
        let expected = redis::cmd("EVAL")
            .arg(ACQUIRE.code)
            .arg(4)
            .arg(&["a", "bé", "a\u{1f}fence", "bé\u{1f}fence"])
            .arg(&b"tok"[..])
            .arg(10_000)
            .arg(2)
            .get_packed_command();
        let args = [Arg::Bytes(b"tok"), Arg::Int(10_000), Arg::Int(2)];
        assert_eq!(written(&ACQUIRE, Via::Body, fenced, &args), expected);
    }

    #[test]
    fn plain_commands_are_packed_as_redis_rs_packs_them() {
        let mut packed = Vec::new();
        Resp(&mut packed)
            .command(4)
            .bulk(b"SET")
            .bulk(b"")
            .bulk_joined(b"k", b"\x1ffence")
            .int(1234567890);
        let expected = redis::cmd("SET")
            .arg("")
            .arg("k\u{1f}fence")
            .arg(1_234_567_890)
            .get_packed_command();
        assert_eq!(packed, expected);
    }

    #[test]
    fn noscript_is_told_from_other_errors() {
        let noscript = |reply: &[u8]| match redis::parse_redis_value(reply).expect("valid") {
            Value::ServerError(err) => is_noscript(&RedisError::from(err)),
            _ => false,
        };
        assert!(noscript(
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
        ));
        assert!(!noscript(b"-WRONGTYPE Operation against a key\r\n"));
        assert!(!noscript(b"-ERR unknown command 'EVALSHA'\r\n"));
    }
}
