//! Acquire several resources, or one with fencing: the acquire script.
//!
//! One Lua script sets every lock key `R` or none; with fencing it also
//! `INCR`s each resource's counter `R␟fence` (see
//! [`FENCE_SUFFIX`](crate::FENCE_SUFFIX); counters have no TTL and are
//! never deleted) and returns the largest. (One resource without fencing
//! or a waiting line goes by [`set_nx`](super::set_nx); a caller waiting
//! in line by [`queued_acquire`](super::queued_acquire).)
//!
//! Must equal the node model's
//! [`Command::Acquire`] (its twin:
//! `fn acquire` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "Acquire";

/// What its reply answers, in errors.
const WHAT: &str = "the acquire script";

/// Acquires all lock keys or none; with fencing, increments each key's
/// counter.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]` (with fencing only): their
/// fencing counters. `ARGV`: token, TTL in ms, `n`.
/// Returns -1 when a lock key exists, else the largest counter after the
/// increment (0 without fencing).
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

pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(ACQUIRE_LUA));

/// Appends the call of the script for `command` (a [`Command::Acquire`];
/// any other is not written), sent `via`: the lock keys, then with fencing
/// their counters; token, TTL in ms, `n`.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::Acquire {
        keys: locks,
        token,
        ttl_ms,
        fence,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: false,
        counters: fence,
        marks: false,
        watchers: false,
    };
    let args = [Arg::Bytes(token), Arg::Int(ttl_ms), super::n(locks)];
    ACQUIRE.write(packed, via, keys, &args);
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
        let (a, b) = (claim(&["a", "b"]), claim_by(&["b", "c"], 8));
        let acquire = |claim, fence| Request::Acquire {
            claim,
            ttl: ttl(),
            fence,
        };
        replay(
            MODEL,
            &[
                (acquire(&a, true), "Acquire(Granted { fence: Some(1) })"),
                (acquire(&b, false), "Acquire(HeldByOther)"),
            ],
        );
    }
}
