//! The Lua fragments several scripts share, each written once: a macro
//! per fragment, expanded by `concat!` into the scripts of the operations
//! that name it (so they stay `&'static str` constants, hashed once).

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
/// ([`is_line!`]). One text for every release script ([`release`](super::release) and
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

/// Lua that reads the server's clock into the local `now` (milliseconds)
/// and drops the watchers whose time is up (a score not above `now`) from
/// the watchers key `KEYS[3]` (`w`); the local `gone` is an error table
/// when that key is of another type (`redis.pcall`), which the script
/// then leaves alone. One text for the inspect script, which adds a
/// watcher, and the release, which tells them
/// ([`WATCH_SUFFIX`](crate::WATCH_SUFFIX)).
macro_rules! purge_watchers {
    () => {
        r"
  local w = KEYS[3]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local gone = redis.pcall('ZREMRANGEBYSCORE', w, '-inf', string.format('%d', now))
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
