//! The Lua scripts, hashed once per process and sent by `EVALSHA`, with a
//! fallback to `EVAL` on `NOSCRIPT` (after `SCRIPT FLUSH` or a restart).
//!
//! Every script reads (and so type-checks) all its keys before it writes
//! any, so an error reply leaves the node unchanged.

use std::sync::LazyLock;

use redis::{Cmd, ConnectionLike, ErrorKind, ServerErrorKind, Value};

use crate::pool::{Failure, Session};

/// Acquires all lock keys or none; with fencing, increments each key's
/// counter.
///
/// `KEYS[1..n]`: the lock keys; `KEYS[n+1..2n]` (with fencing only): their
/// fencing counters. `ARGV`: token, TTL in ms, `n`.
/// Returns -1 when a lock key exists, else the largest counter after the
/// increment (0 without fencing).
const ACQUIRE_LUA: &str = r"
local n = tonumber(ARGV[3])
for i = 1, n do
  if redis.call('GET', KEYS[i]) then
    return -1
  end
end
for i = n + 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and not string.match(v, '^%d+$') then
    return redis.error_reply('WRONGTYPE fencing counter ' .. KEYS[i] .. ' is not a counter')
  end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local top = 0
for i = n + 1, #KEYS do
  local c = redis.call('INCR', KEYS[i])
  if c > top then
    top = c
  end
end
for i = n + 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i])) < top then
    redis.call('SET', KEYS[i], top)
  end
end
return top
";

/// Deletes every lock key that holds our token. `ARGV`: token.
/// Returns 1 when all of them did, else 0.
const RELEASE_LUA: &str = r"
local held = 1
local mine = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    mine[#mine + 1] = KEYS[i]
  else
    held = 0
  end
end
for i = 1, #mine do
  redis.call('DEL', mine[i])
end
return held
";

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

/// Raises each fencing counter to at least a value, only if every lock key
/// holds our token. `KEYS[1..n]`: lock keys, `KEYS[n+1..2n]`: counters.
/// `ARGV`: token, the value as a canonical decimal (compared exactly, as
/// text, not as a Lua double). Returns 1 if the keys were held, else 0.
const RAISE_FENCE_LUA: &str = r"
local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local current = {}
for i = n + 1, #KEYS do
  local v = redis.call('GET', KEYS[i]) or '0'
  if not string.match(v, '^%d+$') then
    return redis.error_reply('WRONGTYPE fencing counter ' .. KEYS[i] .. ' is not a counter')
  end
  current[i] = (string.gsub(v, '^0+(%d)', '%1'))
end
local want = ARGV[2]
for i = n + 1, #KEYS do
  local cur = current[i]
  if #cur < #want or (#cur == #want and cur < want) then
    redis.call('SET', KEYS[i], want)
  end
end
return 1
";

/// A Lua script with its SHA1, computed once.
pub(crate) struct LuaScript {
    code: &'static str,
    hash: String,
}

impl LuaScript {
    fn new(code: &'static str) -> Self {
        LuaScript {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    /// Runs the script by `EVALSHA`; on `NOSCRIPT`, by `EVAL` (which also
    /// caches it on the server again). Two round trips at most, both within
    /// the session's deadline. (`redis::Script::invoke` would send
    /// `SCRIPT LOAD` and `EVALSHA` again: three.)
    pub(crate) fn run(
        &self,
        session: &mut Session<'_>,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value, Failure> {
        match session.query(&self.command("EVALSHA", &self.hash, keys, args)) {
            Err(Failure::Redis(err))
                if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) =>
            {
                session.query(&self.command("EVAL", self.code, keys, args))
            }
            other => other,
        }
    }

    /// The script as one `EVAL` command with its whole body: for pipelines,
    /// where an `EVALSHA` answered `NOSCRIPT` could only be retried after
    /// the requests behind it had run, out of order.
    pub(crate) fn eval(&self, keys: &[&str], args: &[&[u8]]) -> Cmd {
        self.command("EVAL", self.code, keys, args)
    }

    fn command(&self, verb: &str, body: &str, keys: &[&str], args: &[&[u8]]) -> Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(body).arg(keys.len()).arg(keys);
        for arg in args {
            cmd.arg(*arg);
        }
        cmd
    }
}

/// Loads every script on a new connection, in one round trip, so that
/// `EVALSHA` hits from the first call (also after a server restart).
///
/// This also vets the node: a Sentinel (or another server without scripting)
/// answers "unknown command" here in plain text, rather than later echoing
/// the binary lock token in a reply redis-rs cannot parse. A `NOPERM` (an
/// ACL user without `SCRIPT`) is tolerated: the calls fall back to `EVAL`.
pub(crate) fn preload(conn: &mut redis::Connection) -> Result<(), redis::RedisError> {
    let scripts = [&*ACQUIRE, &*RELEASE, &*EXTEND, &*RAISE_FENCE];
    let mut packed = Vec::new();
    for script in scripts {
        packed.extend(
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(script.code)
                .get_packed_command(),
        );
    }
    let replies = conn.req_packed_commands(&packed, 0, scripts.len())?;
    for reply in replies {
        if let Value::ServerError(err) = reply {
            if err.kind() != Some(ServerErrorKind::NoPerm) {
                return Err(err.into());
            }
        }
    }
    Ok(())
}

pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(ACQUIRE_LUA));
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(RELEASE_LUA));
pub(crate) static EXTEND: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(EXTEND_LUA));
pub(crate) static RAISE_FENCE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(RAISE_FENCE_LUA));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha1_hex_and_distinct() {
        let hashes = [
            &ACQUIRE.hash,
            &RELEASE.hash,
            &EXTEND.hash,
            &RAISE_FENCE.hash,
        ];
        for hash in hashes {
            assert_eq!(hash.len(), 40);
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        let distinct: std::collections::HashSet<_> = hashes.into_iter().collect();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn commands_carry_keys_then_args() {
        let cmd = RELEASE.command("EVALSHA", &RELEASE.hash, &["a", "b"], &[b"tok"]);
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let expected: Vec<Vec<u8>> = vec![
            b"EVALSHA".to_vec(),
            RELEASE.hash.clone().into_bytes(),
            b"2".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
            b"tok".to_vec(),
        ];
        assert_eq!(args, expected);
    }
}
