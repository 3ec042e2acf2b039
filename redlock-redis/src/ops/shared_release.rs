//! Release a shared claim: the shared release script.
//!
//! A reader's keys and marker: see [Shared claims](super#shared-claims).
//!
//! Removes the token; a key left without readers loses `R␟readers` and the
//! marker, and its first waiting manager is told as for an exclusive
//! release ([`release`](super::release)). Nothing but the counter stays
//! once the last reader left.
//!
//! Must equal the node model's
//! [`Command::SharedRelease`] (its twin:
//! `fn shared_release` in `redlock-core/src/model/scripts.rs`): the differential
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
pub(crate) const MODEL: &str = "SharedRelease";

/// What its reply answers, in errors.
const WHAT: &str = "the release script";

/// Releases a shared claim: removes the token from every key's readers
/// (after dropping the expired ones). A key left without readers loses its
/// reader set and, when it holds the readers' marker, the marker too, and
/// the first live manager waiting for it is told as
/// [`release`](super::release) tells it; a key with readers left
/// gets the expiry of the latest one.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their reader sets;
/// `KEYS[2n+1..3n]`: their waiting marks. `ARGV`: token, channel prefix,
/// and, for a read that waited in line, its manager's id: that manager
/// leaves the keys' lines first, as in [`release`](super::release),
/// but only where its place is a reader's (`r`): a writer of the same
/// manager that waits keeps its place.
/// Returns as [`release`](super::release): 1 when every key had
/// the token among its live readers (and held the marker), else 0, plus 2
/// when a manager waited for a freed key.
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

pub(crate) static SHARED_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(SHARED_RELEASE_LUA));

/// Appends the call of the script for `command` (a
/// [`Command::SharedRelease`]; any other is not written), sent `via`: the
/// lock keys, their reader sets, their marks; token, channel prefix and,
/// when it leaves the lines, the manager's id.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::SharedRelease {
        keys: locks,
        token,
        channel,
        leave,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: true,
        counters: false,
        marks: true,
        watchers: false,
    };
    match leave {
        Some(manager) => {
            let args = [Arg::Bytes(token), Arg::Bytes(channel), Arg::Int(manager)];
            SHARED_RELEASE.write(packed, via, keys, &args);
        }
        None => {
            let args = [Arg::Bytes(token), Arg::Bytes(channel)];
            SHARED_RELEASE.write(packed, via, keys, &args);
        }
    }
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): as [`release`](super::release)'s, 1 when every
/// key had the token among its live readers, plus 2 when a manager waited
/// for a freed key.
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
        replay(
            MODEL,
            &[
                (acquire, "Acquire(Granted { fence: None })"),
                (
                    Request::Release { claim: &r2 },
                    "released held=false waited=false",
                ),
                (
                    Request::Release { claim: &r1 },
                    "released held=true waited=false",
                ),
            ],
        );
    }
}
