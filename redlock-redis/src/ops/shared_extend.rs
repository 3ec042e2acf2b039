//! Extend a shared claim: the shared extend script.
//!
//! A reader's keys and marker: see [Shared claims](super#shared-claims).
//!
//! Acts only when every `R` holds the marker and has the token among its
//! live readers.
//!
//! Must equal the node model's
//! [`Command::SharedExtend`] (its twin:
//! `fn shared_extend` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "SharedExtend";

/// What its reply answers, in errors.
const WHAT: &str = "the shared extend script";

/// Extends a shared claim: only if every lock key holds the readers'
/// marker and has the token among its live readers, sets the token's
/// expiry to now + TTL and both keys' expiry to the latest reader's.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets.
/// `ARGV`: token, TTL in ms. Returns 1 if it did, else 0.
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

pub(crate) static SHARED_EXTEND: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_EXTEND_LUA));

/// Appends the call of the script for `command` (a
/// [`Command::SharedExtend`]; any other is not written), sent `via`: the
/// lock keys, then their reader sets; token, TTL in ms.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::SharedExtend {
        keys: locks,
        token,
        ttl_ms,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: true,
        counters: false,
        marks: false,
        watchers: false,
    };
    let args = [Arg::Bytes(token), Arg::Int(ttl_ms)];
    SHARED_EXTEND.write(packed, via, keys, &args);
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
        let (r1, r2) = (claim(&["k"]).shared(), claim_by(&["k"], 8).shared());
        let acquire = Request::Acquire {
            claim: &r1,
            ttl: ttl(),
            fence: false,
        };
        let extend = |claim| Request::Extend { claim, ttl: ttl() };
        replay(
            MODEL,
            &[
                (acquire, "Acquire(Granted { fence: None })"),
                (extend(&r1), "Held(true)"),
                (extend(&r2), "Held(false)"),
            ],
        );
    }
}
