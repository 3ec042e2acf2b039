//! How a script goes to the server: [`LuaScript`], hashed once per process
//! and sent by `EVALSHA`, with a fallback to `EVAL` on `NOSCRIPT` (after
//! `SCRIPT FLUSH` or a restart); its [`Keys`] and [`Arg`]s; and [`Resp`],
//! which writes the commands that carry them (and every plain command).

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::{FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX, WATCH_SUFFIX};

/// A Lua script with its SHA1, computed once.
pub(crate) struct LuaScript {
    pub(super) code: &'static str,
    /// Its SHA1 in hex (the tests compare commands with redis-rs's).
    #[cfg(test)]
    pub(super) hash: String,
    /// The first two words of its `EVALSHA`, written once: `EVALSHA` and
    /// the hash.
    evalsha: Vec<u8>,
}

/// How a script is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `EVALSHA` with the hash: 40 bytes, no hashing on the server; answered
    /// `NOSCRIPT` when the server does not have the script.
    Hash,
    /// `EVAL` with the whole body, which the server hashes on every call
    /// (and caches).
    Body,
}

/// The keys a script runs on: a claim's lock keys, then, with `readers`,
/// the reader set of each (`key` + [`READERS_SUFFIX`]), then, with
/// `counters`, the fencing counter of each (`key` + [`FENCE_SUFFIX`]),
/// then, with `marks`, the waiting mark of each (`key` + [`WAIT_SUFFIX`]),
/// then, with `watchers`, the watchers of each (`key` + [`WATCH_SUFFIX`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys<'a> {
    pub(crate) locks: &'a [String],
    pub(crate) readers: bool,
    pub(crate) counters: bool,
    pub(crate) marks: bool,
    /// Then each lock key's watchers ([`WATCH_SUFFIX`]).
    pub(crate) watchers: bool,
}

impl<'a> Keys<'a> {
    /// Just the lock keys.
    pub(crate) fn locks(locks: &'a [String]) -> Self {
        Keys {
            locks,
            readers: false,
            counters: false,
            marks: false,
            watchers: false,
        }
    }

    fn len(self) -> usize {
        let each = 1 + usize::from(self.readers) + usize::from(self.counters);
        self.locks.len() * (each + usize::from(self.marks) + usize::from(self.watchers))
    }
}

/// A script argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Bytes(&'a [u8]),
    /// Sent in decimal.
    Int(u64),
}

impl LuaScript {
    pub(super) fn new(code: &'static str) -> Self {
        let hash = redis::Script::new(code).get_hash().to_owned();
        let mut evalsha = Vec::new();
        Resp(&mut evalsha).bulk(b"EVALSHA").bulk(hash.as_bytes());
        LuaScript {
            code,
            #[cfg(test)]
            hash,
            evalsha,
        }
    }

    #[cfg(test)]
    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }

    /// Appends the command that runs the script on `keys` with `args`:
    /// `EVALSHA hash numkeys keys... args...` (or `EVAL body ...`).
    pub(crate) fn write(&self, packed: &mut Vec<u8>, via: Via, keys: Keys<'_>, args: &[Arg<'_>]) {
        let mut resp = Resp(packed);
        resp.command(3 + keys.len() + args.len());
        match via {
            Via::Hash => resp.words(&self.evalsha),
            Via::Body => resp.bulk(b"EVAL").bulk(self.code.as_bytes()),
        };
        resp.int(keys.len() as u64);
        for key in keys.locks {
            resp.bulk(key.as_bytes());
        }
        if keys.readers {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), READERS_SUFFIX.as_bytes());
            }
        }
        if keys.counters {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), FENCE_SUFFIX.as_bytes());
            }
        }
        if keys.marks {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), WAIT_SUFFIX.as_bytes());
            }
        }
        if keys.watchers {
            for key in keys.locks {
                resp.bulk_joined(key.as_bytes(), WATCH_SUFFIX.as_bytes());
            }
        }
        for arg in args {
            match *arg {
                Arg::Bytes(bytes) => resp.bulk(bytes),
                Arg::Int(n) => resp.int(n),
            };
        }
    }
}

/// Whether an error reply is `NOSCRIPT`: the server does not have the
/// script that an `EVALSHA` named (after `SCRIPT FLUSH` or a restart), and
/// did nothing.
pub(crate) fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Writes commands in RESP, as `redis::Cmd` packs them, straight into a
/// buffer: no `Cmd` to build (two vectors, and the whole script body
/// copied for `EVAL`) and no packed copy of it per command.
///
/// A command is `command(n)` followed by exactly `n` words (`bulk`,
/// `bulk_joined`, `int`).
pub(crate) struct Resp<'a>(pub(crate) &'a mut Vec<u8>);

impl Resp<'_> {
    /// Starts a command of `words` words (the verb counts).
    pub(crate) fn command(&mut self, words: usize) -> &mut Self {
        let mut buf = [0; HEADER];
        let start = header(&mut buf, b'*', words as u64);
        self.0.extend_from_slice(&buf[start..]);
        self
    }

    /// One word.
    pub(crate) fn bulk(&mut self, word: &[u8]) -> &mut Self {
        self.bulk_joined(word, b"")
    }

    /// One word made of `head` then `tail`.
    pub(crate) fn bulk_joined(&mut self, head: &[u8], tail: &[u8]) -> &mut Self {
        let len = head.len() + tail.len();
        let mut buf = [0; HEADER];
        let start = header(&mut buf, b'$', len as u64);
        let header = &buf[start..];
        // Room for the whole word at once: its header, the word, a CRLF.
        self.0.reserve(header.len() + len + 2);
        self.0.extend_from_slice(header);
        self.0.extend_from_slice(head);
        if !tail.is_empty() {
            self.0.extend_from_slice(tail);
        }
        self.0.extend_from_slice(b"\r\n");
        self
    }

    /// Words already in RESP (written once, such as [`SET`]'s): each counts
    /// in [`Resp::command`]'s `words`.
    pub(crate) fn words(&mut self, resp: &[u8]) -> &mut Self {
        self.0.extend_from_slice(resp);
        self
    }

    /// One word: `n` in decimal, written with its header from one slice.
    pub(crate) fn int(&mut self, n: u64) -> &mut Self {
        let mut buf = [0; INT_WORD];
        buf[INT_WORD - 2..].copy_from_slice(b"\r\n");
        let digits = write_decimal(&mut buf[..INT_WORD - 2], n);
        let len = (INT_WORD - 2 - digits) as u64;
        let start = header(&mut buf[..digits], b'$', len);
        self.0.extend_from_slice(&buf[start..]);
        self
    }
}

/// The room a header takes at most: its mark, 20 digits, a CRLF.
const HEADER: usize = 23;

/// The room a number's word takes at most: `$20`, a CRLF, 20 digits, a
/// CRLF.
const INT_WORD: usize = 27;

/// Writes `mark` (`*` or `$`), `n` in decimal and a CRLF at the end of
/// `buf` (room for the mark, `n`'s digits and the CRLF) and returns where
/// it starts:
/// one slice, so that a word's header costs one copy.
fn header(buf: &mut [u8], mark: u8, n: u64) -> usize {
    let end = buf.len();
    buf[end - 2..].copy_from_slice(b"\r\n");
    let start = write_decimal(&mut buf[..end - 2], n) - 1;
    buf[start] = mark;
    start
}

/// `SET`, as one word in RESP (see [`Resp::words`]).
pub(crate) const SET: &[u8] = b"$3\r\nSET\r\n";
/// `NX PX`, as two words.
pub(crate) const NX_PX: &[u8] = b"$2\r\nNX\r\n$2\r\nPX\r\n";
/// `GET`, as one word.
pub(crate) const GET: &[u8] = b"$3\r\nGET\r\n";

/// Writes `n` in decimal at the end of `digits` (20 digits hold any `u64`)
/// and returns where it starts.
fn write_decimal(digits: &mut [u8], mut n: u64) -> usize {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{ACQUIRE, RELEASE};
    use redis::Value;

    fn written(script: &LuaScript, via: Via, keys: Keys<'_>, args: &[Arg<'_>]) -> Vec<u8> {
        let mut packed = Vec::new();
        script.write(&mut packed, via, keys, args);
        packed
    }

    #[test]
    fn a_header_holds_any_length() {
        let mut buf = [0; HEADER];
        let mut written = |mark, n| {
            let start = header(&mut buf, mark, n);
            buf[start..].to_vec()
        };
        assert_eq!(written(b'$', 0), b"$0\r\n");
        assert_eq!(written(b'*', 7), b"*7\r\n");
        assert_eq!(written(b'*', u64::MAX), b"*18446744073709551615\r\n");
    }

    #[test]
    fn a_number_is_the_word_redis_rs_packs() {
        for n in [0, 9, 10, 12_345, u64::MAX] {
            let mut packed = Vec::new();
            Resp(&mut packed).command(1).int(n);
            assert_eq!(packed, redis::cmd(&n.to_string()).get_packed_command());
        }
    }

    #[test]
    fn commands_carry_keys_then_args_as_redis_rs_packs_them() {
        let locks = ["a".to_owned(), "bé".to_owned()];
        let keys = Keys::locks(&locks);
        let args = [Arg::Bytes(b"tok\r\n\0"), Arg::Int(0), Arg::Int(u64::MAX)];
        let expected = redis::cmd("EVALSHA")
            .arg(&RELEASE.hash)
            .arg(2)
            .arg("a")
            .arg("bé")
            .arg(&b"tok\r\n\0"[..])
            .arg(0)
            .arg(u64::MAX)
            .get_packed_command();
        assert_eq!(written(&RELEASE, Via::Hash, keys, &args), expected);
        let fenced = Keys {
            locks: &locks,
            readers: false,
            counters: true,
            marks: false,
            watchers: false,
        };
        let expected = redis::cmd("EVAL")
            .arg(ACQUIRE.code)
            .arg(4)
            .arg(&["a", "bé", "a\u{1f}fence", "bé\u{1f}fence"])
            .arg(&b"tok"[..])
            .arg(10_000)
            .arg(2)
            .get_packed_command();
        let args = [Arg::Bytes(b"tok"), Arg::Int(10_000), Arg::Int(2)];
        assert_eq!(written(&ACQUIRE, Via::Body, fenced, &args), expected);
    }

    #[test]
    fn plain_commands_are_packed_as_redis_rs_packs_them() {
        let mut packed = Vec::new();
        Resp(&mut packed)
            .command(4)
            .bulk(b"SET")
            .bulk(b"")
            .bulk_joined(b"k", b"\x1ffence")
            .int(1234567890);
        let expected = redis::cmd("SET")
            .arg("")
            .arg("k\u{1f}fence")
            .arg(1_234_567_890)
            .get_packed_command();
        assert_eq!(packed, expected);
    }

    #[test]
    fn words_written_once_are_what_resp_writes() {
        let bulks = |words: &[&[u8]]| {
            let mut packed = Vec::new();
            let mut resp = Resp(&mut packed);
            for word in words {
                resp.bulk(word);
            }
            packed
        };
        assert_eq!(SET, bulks(&[b"SET"]));
        assert_eq!(NX_PX, bulks(&[b"NX", b"PX"]));
        assert_eq!(GET, bulks(&[b"GET"]));
        assert_eq!(
            RELEASE.evalsha,
            bulks(&[b"EVALSHA", RELEASE.hash.as_bytes()])
        );
    }

    #[test]
    fn noscript_is_told_from_other_errors() {
        let noscript = |reply: &[u8]| match redis::parse_redis_value(reply).expect("valid") {
            Value::ServerError(err) => is_noscript(&RedisError::from(err)),
            _ => false,
        };
        assert!(noscript(
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
        ));
        assert!(!noscript(b"-WRONGTYPE Operation against a key\r\n"));
        assert!(!noscript(b"-ERR unknown command 'EVALSHA'\r\n"));
    }
}
