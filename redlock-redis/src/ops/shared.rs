//! The scripts of shared claims (the readers of a read-write lock): a
//! sorted set of readers next to each lock key, and a marker in the lock
//! key that the exclusive scripts, and `SET NX`, already take for a holder.

use std::sync::LazyLock;

use super::LuaScript;

/// Lua that reads the server's clock into `now` (ms) and sets `held` when
/// every lock key `KEYS[1..n]` holds the readers' marker and has the token
/// `ARGV[1]` among its live readers (`KEYS[n+1..2n]`). Expects the local
/// `n`. One text for the scripts that act only on a held shared claim.
macro_rules! shared_held {
    () => {
        r"
local marker = 'redlock:readers'
if redis.replicate_commands then
  redis.replicate_commands()
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = true
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  local s = redis.call('ZSCORE', KEYS[n + i], ARGV[1])
  if v ~= marker or not s or tonumber(s) <= now then
    held = false
  end
end
"
    };
}

/// Lua, in a loop over the keys `i`: drops the expired readers of key
/// `i`'s reader set `readers` and adds the token `ARGV[1]` until `until_ms`;
/// `left` is then how long the latest reader lives. Expects the locals
/// `n`, `i`, `now` and `until_ms`. One text for acquiring and extending a
/// read.
macro_rules! add_reader {
    () => {
        r"
  local readers = KEYS[n + i]
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', string.format('%d', now))
  redis.call('ZADD', readers, until_ms, ARGV[1])
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local left = string.format('%d', tonumber(last[2]) - now)
"
    };
}

/// The value a lock key `R` holds while it has readers (shared claims, see
/// [`SHARED_ACQUIRE_LUA`]): 15 bytes, so never a token (20 bytes), which is
/// why the exclusive scripts, comparing `R` with their token, never take it
/// for theirs, and `SET NX` and the acquire scripts see `R` held. Written
/// out in each shared script (`local marker = ...`); this copy is for the
/// tests that check they agree.
#[cfg(test)]
pub(crate) const READERS_MARKER: &str = "redlock:readers";

/// Acquires a shared claim (a reader of a read-write lock) on all lock
/// keys or none.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets
/// (`R␟readers`); `KEYS[2n+1..2n+c]`: their fencing counters (`c` is `n`
/// with fencing, else 0); `KEYS[2n+c+1..2n+c+n]`: their waiting marks.
/// `ARGV`: token, TTL in ms, `n`, fencing (`1` or `0`), the manager's id
/// (empty for none), whether to give way to other managers' writers (`1`
/// or `0`), the marks' TTL in ms, the manager's ticket.
///
/// A reader set is a sorted set of tokens scored by their expiry in ms on
/// the server's clock (`TIME`); a member whose score is not above now has
/// expired. While a key has live readers, the lock key holds the marker
/// `redlock:readers`, and it and the set expire with the latest reader.
///
/// Without a manager, returns -1, having changed nothing, when a lock key
/// holds anything but the marker (a writer). With one, the reader waits in
/// the marks' lines as [`QUEUED_ACQUIRE_LUA`](super::QUEUED_ACQUIRE_LUA)
/// does, its place holding `r` (a reader's; a manager whose writer waits
/// keeps `1`): it returns -1 and joins every key's line at its ticket's
/// place when a writer holds a key, or when it gives way to a live writer
/// of another manager ahead of it in a line (readers do not give way to
/// readers, so waiting readers go in together). Else it drops each set's
/// expired readers, adds the token until now + TTL, sets the marker and
/// both keys' expiry to the latest reader's, and with fencing increments
/// the counters as [`ACQUIRE_LUA`](super::ACQUIRE_LUA) does; returns the
/// largest counter (0 without fencing), keeping its place in the lines
/// until the read's release leaves them.
///
/// The node model's [`Command::SharedAcquire`](redlock_core::model::Command::SharedAcquire) must equal it
/// (its twin: `fn shared_acquire` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const SHARED_ACQUIRE_LUA: &str = concat!(
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
local marker = 'redlock:readers'
if redis.replicate_commands then
  redis.replicate_commands()
end
local held = false
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= marker then
    held = true
  end
  redis.call('ZCARD', KEYS[n + i])
end
local first, last = 2 * n + 1, 2 * n + c
",
    check_counters!(),
    r"
if me ~= '' then
  local marks_at, writer = 2 * n + c, false
  local ttl = ARGV[7]
  local ticket = tonumber(ARGV[8]) or 0
",
    read_lines!(),
    join_lines!(),
    r"
  if held or (ARGV[6] == '1' and writer_ahead) then
    return wait()
  end
elseif held then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = string.format('%d', now + tonumber(ARGV[2]))
for i = 1, n do
",
    add_reader!(),
    r"
  redis.call('SET', KEYS[i], marker, 'PX', left)
  redis.call('PEXPIRE', readers, left)
end
local first, last = 2 * n + 1, 2 * n + c
",
    bump_counters!()
);

/// Extends a shared claim: only if every lock key holds the readers'
/// marker and has the token among its live readers, sets the token's
/// expiry to now + TTL and both keys' expiry to the latest reader's.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets.
/// `ARGV`: token, TTL in ms. Returns 1 if it did, else 0.
///
/// The node model's [`Command::SharedExtend`](redlock_core::model::Command::SharedExtend) must equal it
/// (its twin: `fn shared_extend` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const SHARED_EXTEND_LUA: &str = concat!(
    r"
local n = #KEYS / 2
",
    shared_held!(),
    r"
if not held then
  return 0
end
local until_ms = string.format('%d', now + tonumber(ARGV[2]))
for i = 1, n do
",
    add_reader!(),
    r"
  redis.call('PEXPIRE', KEYS[i], left)
  redis.call('PEXPIRE', readers, left)
end
return 1
"
);

/// Releases a shared claim: removes the token from every key's readers
/// (after dropping the expired ones). A key left without readers loses its
/// reader set and, when it holds the readers' marker, the marker too, and
/// the first live manager waiting for it is told as
/// [`RELEASE_LUA`](super::RELEASE_LUA) tells it; a key with readers left
/// gets the expiry of the latest one.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets;
/// `KEYS[2n+1..3n]`: their waiting marks. `ARGV`: token, channel prefix,
/// and, for a read that waited in line, its manager's id: that manager
/// leaves the keys' lines first, as in [`RELEASE_LUA`](super::RELEASE_LUA),
/// but only where its place is a reader's (`r`): a writer of the same
/// manager that waits keeps its place.
/// Returns as [`RELEASE_LUA`](super::RELEASE_LUA): 1 when every key had
/// the token among its live readers (and held the marker), else 0, plus 2
/// when a manager waited for a freed key.
///
/// The node model's [`Command::SharedRelease`](redlock_core::model::Command::SharedRelease) must equal it
/// (its twin: `fn shared_release` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const SHARED_RELEASE_LUA: &str = concat!(
    is_line!(),
    r"
local n = #KEYS / 3
local writers_leave = false
",
    shared_held!(),
    r"
if ARGV[3] then
  for i = 1, n do
    local mark = KEYS[2 * n + i]
",
    leave_line!(),
    r"
  end
end
local waited = 0
for i = 1, n do
  local value = redis.call('GET', KEYS[i])
  local readers = KEYS[n + i]
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', string.format('%d', now))
  redis.call('ZREM', readers, ARGV[1])
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', readers)
    if value == marker then
      redis.call('DEL', KEYS[i])
      local mark, key = KEYS[2 * n + i], KEYS[i]
",
    tell_first_waiter!(),
    r"
      if told then
        waited = 2
      end
    end
  else
    local left = string.format('%d', tonumber(last[2]) - now)
    if value == marker or not value then
      redis.call('SET', KEYS[i], marker, 'PX', left)
    end
    redis.call('PEXPIRE', readers, left)
  end
end
return (held and 1 or 0) + waited
"
);

/// Raises each fencing counter to at least a value as
/// [`RAISE_FENCE_LUA`](super::RAISE_FENCE_LUA) does, only if every lock
/// key holds the readers' marker and has the token among its live readers.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets;
/// `KEYS[2n+1..3n]`: their counters. `ARGV`: token, the value as a
/// canonical decimal. Returns 1 if the keys were held, else 0.
///
/// The node model's [`Command::SharedRaiseFence`](redlock_core::model::Command::SharedRaiseFence) must equal it
/// (its twin: `fn shared_raise_fence` in `redlock-core/src/model/scripts.rs`; the
/// differential tests prove it on every server kind).
const SHARED_RAISE_FENCE_LUA: &str = concat!(
    r"
local n = #KEYS / 3
",
    check_format!(),
    shared_held!(),
    r"
local current = {}
for i = 2 * n + 1, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not string.match(v, '^%d+$') then
    return redis.error_reply('WRONGTYPE a fencing counter holds something else')
  end
  current[i] = (string.gsub(v, '^0+(%d)', '%1'))
end
if not held then
  return 0
end
local want = ARGV[2]
if #want > 16 or (#want == 16 and want > '9007199254740991') then
  return redis.error_reply('FENCEMAX a fencing counter cannot hold that value')
end
for i = 2 * n + 1, #KEYS do
  local cur = current[i]
  if #cur < #want or (#cur == #want and cur < want) then
    redis.call('SET', KEYS[i], want)
  end
end
return 1
"
);

pub(crate) static SHARED_ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_ACQUIRE_LUA));
pub(crate) static SHARED_EXTEND: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_EXTEND_LUA));
pub(crate) static SHARED_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_RELEASE_LUA));
pub(crate) static SHARED_RAISE_FENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_RAISE_FENCE_LUA));
