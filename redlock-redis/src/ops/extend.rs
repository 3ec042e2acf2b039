//! Extend an exclusive claim: the extend script (compare-and-`PEXPIRE`).
//!
//! A Lua compare-and-`PEXPIRE`, all keys or none.
//!
//! Must equal the node model's
//! [`Command::Extend`] (its twin:
//! `fn extend` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "Extend";

/// What its reply answers, in errors.
const WHAT: &str = "the extend script";

/// Resets the TTL of every lock key, only if all hold our token.
/// `ARGV`: token, TTL in ms. Returns 1 if it did, else 0.
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

pub(crate) static EXTEND: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(EXTEND_LUA));

/// Appends the call of the script for `command` (a [`Command::Extend`];
/// any other is not written), sent `via`: the lock keys; token, TTL in ms.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::Extend {
        keys: locks,
        token,
        ttl_ms,
    } = *command
    else {
        return;
    };
    let args = [Arg::Bytes(token), Arg::Int(ttl_ms)];
    EXTEND.write(packed, via, Keys::locks(locks), &args);
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): 1 held (and extended), 0 not.
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
        let (a, b) = (claim(&["a", "b"]), claim_by(&["a", "b"], 8));
        let acquire = Request::Acquire {
            claim: &a,
            ttl: ttl(),
            fence: false,
        };
        let extend = |claim| Request::Extend { claim, ttl: ttl() };
        replay(
            MODEL,
            &[
                (acquire, "Acquire(Granted { fence: None })"),
                (extend(&a), "Held(true)"),
                (extend(&b), "Held(false)"),
            ],
        );
    }
}
