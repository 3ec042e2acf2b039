//! Raise the fencing counters of a held shared claim: the shared fencing script.
//!
//! A reader's keys and marker: see [Shared claims](super#shared-claims).
//!
//! Acts only when every `R` holds the marker and has the token among its
//! live readers.
//!
//! Must equal the node model's
//! [`Command::SharedRaiseFence`] (its twin:
//! `fn shared_raise_fence` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "SharedRaiseFence";

/// What its reply answers, in errors.
const WHAT: &str = "the shared fencing script";

/// Raises each fencing counter to at least a value as
/// [`raise_fence`](super::raise_fence) does, only if every lock
/// key holds the readers' marker and has the token among its live readers.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets;
/// `KEYS[2n+1..3n]`: their counters. `ARGV`: token, the value as a
/// canonical decimal. Returns 1 if the keys were held, else 0.
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

pub(crate) static SHARED_RAISE_FENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_RAISE_FENCE_LUA));

/// Appends the call of the script for `command` (a
/// [`Command::SharedRaiseFence`]; any other is not written), sent `via`:
/// the lock keys, their reader sets, their counters; token, the value in
/// decimal.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::SharedRaiseFence {
        keys: locks,
        token,
        at_least,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: true,
        counters: true,
        marks: false,
        watchers: false,
    };
    let args = [Arg::Bytes(token), Arg::Int(at_least)];
    SHARED_RAISE_FENCE.write(packed, via, keys, &args);
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): 1 held (and raised), 0 not.
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
        let acquire = Request::Acquire {
            claim: &r1,
            ttl: ttl(),
            fence: true,
        };
        let raise = |claim| Request::RaiseFence { claim, at_least: 9 };
        replay(
            MODEL,
            &[
                (acquire, "Acquire(Granted { fence: Some(1) })"),
                (raise(&r1), "Held(true)"),
                (raise(&r2), "Held(false)"),
            ],
        );
    }
}
