//! Who holds a lock key: the inspect script (a read at one instant).
//!
//! A Lua script that reads lock key `R` (its value when it is a string,
//! its `PTTL`) and its fencing counter `R␟fence`, in one atomic step, so
//! that the value and the time left belong to the same holder. Writes
//! nothing. Its twin for a watcher then adds the watcher to the key's
//! watchers `R␟watchers` (the release of an election's lock tells them).
//!
//! Must equal the node model's [`Command::Inspect`] (its twin: `fn
//! inspect` in `redlock-core/src/model/mod.rs`): the differential tests
//! (`tests/tests/integration/differential.rs`) prove the Lua equal to it
//! on every server kind, and this file's test decodes the model's own
//! replies to it with [`read`].

use std::sync::LazyLock;

use redis::Value;
use redlock_core::backend::KeyView;
use redlock_core::model::{inspection, Command, Reply};

use super::script::{Arg, Keys, LuaScript, Via};
use crate::session::Failure;

/// The node model's command this operation must equal.
#[cfg(test)]
pub(crate) const MODEL: &str = "Inspect";

/// What its reply answers, in errors.
const WHAT: &str = "the inspect script";

/// Lua that defines `str(k)`: key `k`'s value when it is a string, else
/// `false`. One text for both scripts.
macro_rules! str_of {
    () => {
        r"
local function str(k)
  if redis.call('TYPE', k)['ok'] == 'string' then
    return redis.call('GET', k)
  end
  return false
end
"
    };
}

/// `KEYS[1]`: the lock key, `KEYS[2]`: its fencing counter. Returns the
/// lock key's value (`false`, a nil, unless it is a string), its `PTTL`,
/// and the counter's value (`false` unless it is a string). Kept as small
/// as it was: `redlock status` sends it by `EVAL` once per key, pipelined.
const INSPECT_LUA: &str = concat!(
    str_of!(),
    "return {str(KEYS[1]), redis.call('PTTL', KEYS[1]), str(KEYS[2])}\n"
);

/// The same read, then, for a watcher (`KEYS[3]`: the key's watchers;
/// `ARGV[1]`: its manager id, `ARGV[2]`: for how many milliseconds): the
/// watchers whose time is up (a score not above the server's `TIME`) are
/// removed, the watcher is added (or moved) with the score now +
/// `ARGV[2]`, and the set expires with its last member; a watchers key of
/// another type is left as it is (`redis.pcall`). The server replicates
/// the writes as effects (the default since Redis 5).
const INSPECT_WATCH_LUA: &str = concat!(
    str_of!(),
    "local seen = {str(KEYS[1]), redis.call('PTTL', KEYS[1]), str(KEYS[2])}\n",
    purge_watchers!(),
    r"
if type(gone) ~= 'table' then
  redis.call('ZADD', w, string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
  local last = redis.call('ZRANGE', w, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', w, string.format('%d', tonumber(last[2]) - now))
end
return seen
"
);

pub(crate) static INSPECT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(INSPECT_LUA));

pub(crate) static INSPECT_WATCH: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(INSPECT_WATCH_LUA));

/// Appends the call of the script for `command` (a [`Command::Inspect`];
/// any other is not written), sent `via`: the lock key, then its counter.
pub(super) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    let Command::Inspect { key, watcher } = *command else {
        return;
    };
    let locks = [key.to_owned()];
    let keys = Keys {
        locks: &locks,
        readers: false,
        counters: true,
        marks: false,
        watchers: watcher.is_some(),
    };
    match watcher {
        Some(w) => {
            let args = [Arg::Int(w.manager), Arg::Int(w.ttl_ms)];
            INSPECT_WATCH.write(packed, via, keys, &args);
        }
        None => INSPECT.write(packed, via, keys, &[]),
    }
}

/// Reads its reply (three values) as the model reads it
/// ([`inspection`]).
pub(crate) fn read(reply: Value) -> Result<KeyView, Failure> {
    let unexpected = || Failure::unexpected(WHAT, &reply);
    let Value::Array(items) = &reply else {
        return Err(unexpected());
    };
    let mut model = Vec::with_capacity(items.len());
    for item in items {
        model.push(match item {
            Value::BulkString(bytes) => Reply::Bulk(bytes.clone()),
            Value::Nil => Reply::Nil,
            Value::Int(n) => Reply::Int(*n),
            _ => return Err(unexpected()),
        });
    }
    inspection(Reply::Array(model)).ok_or_else(unexpected)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ops::pairing::{claim, ttl};
    use redlock_core::backend::Request;
    use redlock_core::model::Node;

    /// The model's replies, as a server sends them, read back.
    fn read_model(reply: Reply) -> KeyView {
        let wire = |r: &Reply| match r {
            Reply::Bulk(b) => Some(Value::BulkString(b.clone())),
            Reply::Nil => Some(Value::Nil),
            Reply::Int(n) => Some(Value::Int(*n)),
            _ => None,
        };
        let items = match reply {
            Reply::Array(items) => Some(items),
            _ => None,
        }
        .expect("an array");
        let items: Option<Vec<Value>> = items.iter().map(wire).collect();
        read(Value::Array(items.expect("values a server sends")))
            .ok()
            .expect("the model's reply reads")
    }

    #[test]
    fn reads_the_models_replies_to_its_command() {
        let mut node = Node::new();
        let a = claim(&["a"]);
        let acquire = Request::Acquire {
            claim: &a,
            ttl: ttl(),
            fence: true,
        };
        let command = Command::of(&acquire, b"ch").expect("modelled");
        node.apply(0, &command, &mut Vec::new());
        let inspect = Command::Inspect {
            key: "a",
            watcher: None,
        };
        assert_eq!(crate::ops::pairing::variant(&inspect), MODEL);
        let view = read_model(node.apply(10, &inspect, &mut Vec::new()));
        assert_eq!(view.value.as_deref(), Some(a.value()));
        assert_eq!(view.ttl, Some(Duration::from_millis(9_990)));
        assert_eq!(view.fence, Some(1));
        let watcher = Some(redlock_core::model::Watcher {
            manager: 3,
            ttl_ms: 50,
        });
        let watched = Command::Inspect { key: "b", watcher };
        let free = read_model(node.apply(10, &watched, &mut Vec::new()));
        assert_eq!(free, KeyView::default());
        assert!(read(Value::Int(1)).is_err());
        assert!(read(Value::Array(vec![Value::Nil, Value::Okay, Value::Nil])).is_err());
    }
}
