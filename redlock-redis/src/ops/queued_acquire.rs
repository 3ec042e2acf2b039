//! Acquire for a caller that waits in line: the queued acquire script.
//!
//! A claim with [`Claim::queue`](redlock_core::backend::Claim::queue):
//! the acquire script's grant, plus the resources' *waiting marks*
//! `R␟waiting` (see [`WAIT_SUFFIX`](crate::WAIT_SUFFIX)), the line of
//! managers waiting for each key (the script's doc below). Marks never
//! make a node grant what it would refuse otherwise. Claims without a
//! queue never touch marks.
//!
//! Must equal the node model's
//! [`Command::QueuedAcquire`] (its twin:
//! `fn queued_acquire` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "QueuedAcquire";

/// What its reply answers, in errors.
const WHAT: &str = "the acquire script";

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
/// lock's release, [`release`](super::release), or by going away), also when the
/// caller is this manager again. The first live one owns the mark.
///
/// Returns -1 when it gave way to another manager's mark or when a lock
/// key exists: then it waits in every key's line at its ticket's place
/// (behind equal tickets) and its `M:id` keys live for the marks' TTL.
/// Else it grants as [`acquire`](super::acquire) does and returns the largest counter
/// (0 without fencing), keeping its place in the keys' lines: when the
/// round failed on other nodes, the lines still agree across nodes for
/// the next one. The lock's release leaves them ([`release`](super::release)).
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

pub(crate) static QUEUED_ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(QUEUED_ACQUIRE_LUA));

/// Appends the call of the script for `command` (a
/// [`Command::QueuedAcquire`]; any other is not written), sent `via`: the
/// lock keys, with fencing their counters, their marks; then the
/// arguments in the order the script's doc gives.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::QueuedAcquire {
        keys: locks,
        token,
        ttl_ms,
        fence,
        manager,
        mark_ttl_ms,
        yields,
        ticket,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: false,
        counters: fence,
        marks: true,
        watchers: false,
    };
    let args = [
        Arg::Bytes(token),
        Arg::Int(ttl_ms),
        super::n(locks),
        Arg::Int(u64::from(fence)),
        Arg::Int(manager),
        Arg::Int(mark_ttl_ms),
        Arg::Int(u64::from(yields)),
        Arg::Int(ticket),
    ];
    QUEUED_ACQUIRE.write(packed, via, keys, &args);
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): -1 refused (and waiting in line), else granted
/// with the largest counter (fencing) or 0.
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
        use redlock_core::backend::Queued;
        use redlock_core::Ttl;
        let marks = Ttl::new(std::time::Duration::from_millis(300)).expect("ttl");
        let a = claim(&["k"]).queued(Queued::new(1, marks, true).with_ticket(1));
        let b = claim_by(&["k"], 8).queued(Queued::new(2, marks, true).with_ticket(2));
        let acquire = |claim, fence| Request::Acquire {
            claim,
            ttl: ttl(),
            fence,
        };
        replay(
            MODEL,
            &[
                (acquire(&a, false), "Acquire(Granted { fence: None })"),
                (acquire(&b, true), "Acquire(HeldByOther)"),
            ],
        );
    }
}
