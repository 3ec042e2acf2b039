//! Release an exclusive claim: the release script (compare-and-delete).
//!
//! A Lua compare-and-delete over all keys, which also tells the first
//! manager waiting for a freed key (Pub/Sub on its own channel,
//! [`RELEASE_CHANNEL`]`:<id>`). [`write_release`]
//! also writes the release of a shared claim
//! ([`shared_release`](super::shared_release)).
//!
//! Must equal the node model's
//! [`Command::Release`] (its twin:
//! `fn release` in `redlock-core/src/model/scripts.rs`): the differential
//! tests (`tests/tests/integration/differential.rs`) prove the Lua equal to
//! it on every server kind, and this file's test decodes the model's own
//! replies to it with [`read`].

use std::sync::LazyLock;

use redis::Value;
use redlock_core::backend::{Claim, Request};
use redlock_core::model::Command;

use super::script::{Arg, Keys, LuaScript, Via};
use super::Read;
use crate::session::Failure;
use crate::RELEASE_CHANNEL;

/// The node model's command this operation must equal (checked by the
/// test below against [`Command::of`]'s choice and the model's replies).
#[cfg(test)]
pub(crate) const MODEL: &str = "Release";

/// What its reply answers, in errors.
const WHAT: &str = "the release script";

/// Deletes every lock key that holds our token and, for each deleted key
/// that managers wait for, publishes the first live one's id and the key
/// (`<id> <key>`) on that manager's channel (`<prefix>:<id>`), so that
/// that manager, and only it, tries again at once (the marks' lines: see
/// [`queued_acquire`](super::queued_acquire)).
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]`: their waiting marks;
/// for an election's lock (one key), `KEYS[3]`: its watchers, each live
/// one told (`<id> <key>` on `<prefix>:<id>`, in the set's order, after
/// the first waiter) once the key is deleted; best effort as well.
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
const RELEASE_LUA: &str = concat!(
    is_line!(),
    r"
local n = math.floor(#KEYS / 2)
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
  if KEYS[3] then
",
    purge_watchers!(),
    r"
    if type(gone) ~= 'table' then
      for _, id in ipairs(redis.call('ZRANGE', w, 0, -1)) do
        redis.pcall('PUBLISH', ARGV[2] .. ':' .. id, id .. ' ' .. key)
      end
    end
  end
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

pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(RELEASE_LUA));

/// Appends the call of the script for `command` (a [`Command::Release`];
/// any other is not written), sent `via`: the lock keys, then their marks;
/// token, channel prefix and, when it leaves the lines, the manager's id.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::Release {
        keys: locks,
        token,
        channel,
        leave,
        watched,
    } = *command
    else {
        return;
    };
    let keys = Keys {
        locks,
        readers: false,
        counters: false,
        marks: true,
        // The model tells the watchers of a lock of one key only.
        watchers: watched && locks.len() == 1,
    };
    match leave {
        Some(manager) => {
            let args = [Arg::Bytes(token), Arg::Bytes(channel), Arg::Int(manager)];
            RELEASE.write(packed, via, keys, &args);
        }
        None => RELEASE.write(packed, via, keys, &[Arg::Bytes(token), Arg::Bytes(channel)]),
    }
}

/// Appends the release of `claim`, sent `via`: the compare-and-delete of
/// an exclusive claim, the removal from the reader sets of a shared one
/// ([`shared_release`](super::shared_release)). With `leave`, a claim
/// that waited in line ([`Claim::queue`]) also takes its manager out of
/// the keys' lines (a lock's own release; not the cleanup written behind
/// acquires whose answers never came).
pub(crate) fn write_release(packed: &mut Vec<u8>, claim: &Claim, via: Via, leave: bool) {
    let channel = RELEASE_CHANNEL.as_bytes();
    let Some(mut release) = Command::of(&Request::Release { claim }, channel) else {
        return;
    };
    if let Command::Release { leave: manager, .. } | Command::SharedRelease { leave: manager, .. } =
        &mut release
    {
        if !leave {
            *manager = None;
        }
    }
    super::write(packed, via, &release);
}

/// Reads its reply, an integer, as the model reads it
/// ([`Command::outcome`]): 1 when every key held the token, plus 2 when a
/// manager waited for a freed key.
pub(super) fn read(command: &Command<'_>, reply: Value) -> Result<Read, Failure> {
    super::read_int(WHAT, command, reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::pairing::{claim, claim_by, replay, ttl};

    #[test]
    fn reads_the_models_replies_to_its_command() {
        let (a, b) = (claim(&["a", "b"]), claim_by(&["a", "b"], 8));
        let acquire = Request::Acquire {
            claim: &a,
            ttl: ttl(),
            fence: false,
        };
        replay(
            MODEL,
            &[
                (acquire, "Acquire(Granted { fence: None })"),
                (
                    Request::Release { claim: &b },
                    "released held=false waited=false",
                ),
                (
                    Request::Release { claim: &a },
                    "released held=true waited=false",
                ),
            ],
        );
    }
}
