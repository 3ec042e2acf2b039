//! Acquire a shared claim (a reader): the shared acquire script.
//!
//! A reader's keys and marker: see [Shared claims](super#shared-claims).
//!
//! The shared acquire refuses while `R` holds anything but the marker (a
//! writer), and gives way to a live writer of another manager ahead of it
//! in a key's line (then it waits in the lines, as the script's doc below
//! says); else it drops the expired readers, adds its token for the TTL,
//! sets the marker and both expiries, and with fencing bumps `R␟fence` as
//! the exclusive acquire does. One key without
//! fencing is still this script, never `SET NX`.
//!
//! Must equal the node model's
//! [`Command::SharedAcquire`] (its twin:
//! `fn shared_acquire` in `redlock-core/src/model/scripts.rs`): the differential
//! tests (`tests/tests/integration/differential.rs`) prove the Lua equal to
//! it on every server kind, and this file's test decodes the model's own
//! replies to it with [`read`].

use std::sync::LazyLock;

use redis::Value;
use redlock_core::model::Command;

use super::script::{Arg, Keys, LuaScript, Via};
use super::Read;
use crate::session::Failure;

/// The node model's command this operation must equal (checked by the
/// test below against [`Command::of`]'s choice and the model's replies).
#[cfg(test)]
pub(crate) const MODEL: &str = "SharedAcquire";

/// What its reply answers, in errors.
const WHAT: &str = "the acquire script";

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
/// the marks' lines as [`queued_acquire`](super::queued_acquire)
/// does, its place holding `r` (a reader's; a manager whose writer waits
/// keeps `1`): it returns -1 and joins every key's line at its ticket's
/// place when a writer holds a key, or when it gives way to a live writer
/// of another manager ahead of it in a line (readers do not give way to
/// readers, so waiting readers go in together). Else it drops each set's
/// expired readers, adds the token until now + TTL, sets the marker and
/// both keys' expiry to the latest reader's, and with fencing increments
/// the counters as [`acquire`](super::acquire) does; returns the
/// largest counter (0 without fencing), keeping its place in the lines
/// until the read's release leaves them.
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

pub(crate) static SHARED_ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_ACQUIRE_LUA));

/// Appends the call of the script for `command` (a
/// [`Command::SharedAcquire`]; any other is not written), sent `via`: the
/// lock keys, their reader sets, with fencing their counters, their marks;
/// then the arguments in the order the script's doc gives.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::SharedAcquire {
        keys: locks,
        token,
        ttl_ms,
        fence,
        manager,
        yields,
        mark_ttl_ms,
        ticket,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: true,
        counters: fence,
        marks: true,
        watchers: false,
    };
    // No manager: no line to wait in, and an empty id.
    let me = manager.map_or(Arg::Bytes(b""), Arg::Int);
    let args = [
        Arg::Bytes(token),
        Arg::Int(ttl_ms),
        super::n(locks),
        Arg::Int(u64::from(fence)),
        me,
        Arg::Int(u64::from(yields)),
        Arg::Int(mark_ttl_ms),
        Arg::Int(ticket),
    ];
    SHARED_ACQUIRE.write(packed, via, keys, &args);
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): -1 refused, else granted with the largest
/// counter (fencing) or 0.
pub(super) fn read(command: &Command<'_>, reply: Value) -> Result<Read, Failure> {
    super::read_int(WHAT, command, reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::pairing::{claim, claim_by, replay, ttl};
    use redlock_core::backend::Request;

    #[test]
    fn reads_the_models_replies_to_its_command() {
        let (r1, r2) = (claim(&["k"]).shared(), claim_by(&["k"], 8).shared());
        let writer = claim_by(&["k"], 9);
        let acquire = |claim, fence| Request::Acquire {
            claim,
            ttl: ttl(),
            fence,
        };
        replay(
            MODEL,
            &[
                (acquire(&r1, true), "Acquire(Granted { fence: Some(1) })"),
                (acquire(&r2, false), "Acquire(Granted { fence: None })"),
            ],
        );
        replay(
            "SetNxGet",
            &[(acquire(&writer, false), "Acquire(Granted { fence: None })")],
        );
        replay(
            MODEL,
            &[
                (
                    acquire(&writer, true),
                    "Acquire(Granted { fence: Some(1) })",
                ),
                (acquire(&r1, false), "Acquire(HeldByOther)"),
            ],
        );
    }
}
