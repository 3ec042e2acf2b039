//! The node model (`redlock_core::model`) against a real server: generated
//! sequences of commands from several managers on a few resources run on
//! the model and on a `redis-server` (whichever binary the harness runs:
//! `scripts/test.sh` runs this module on every server kind), and every
//! reply, every message published, and the whole key space after each
//! step must be equal. The commands are written by the Redis backend's
//! own writer (`redlock_redis::testing::command_words`), so what is proven
//! equal to the model is what the backend sends.
//!
//! Each step goes in one transaction, `MULTI`, `TIME`, a probe key's
//! `SET ... PX`, the command(s), a script that dumps the key space, `TIME`,
//! `EXEC`. On Redis 7.0 and later the transaction's commands take as now
//! the instant it started (a busy machine may leave that well before the
//! first `TIME`), which the probe's expiry (`PEXPIRETIME`) tells; before
//! 7.0 each command reads the clock anew, between the two `TIME`s. The
//! model runs the step, then dumps, at instants from there on, give or
//! take 2 ms, and after an agreeing step goes on with the server's
//! expiries and scores. Before 7.0 the dump measures each expiry as
//! `TIME` + `PTTL` (both read the clock anew, a moment apart), and the
//! model goes on with that measure. Tolerance, stated: an expiry
//! (`PEXPIRETIME`, or `PTTL` before 7.0) may differ by 3 ms (before 7.0,
//! plus the step's span, since its commands read the clock at different
//! instants of it, and the longest measure so far), and a reader's score,
//! which the shared scripts take from `TIME` when they run, by the time
//! between the transaction's start and the second `TIME`, plus 3 ms.
//! Some steps' transactions are stretched by a busy script before their
//! commands or before the dump, as a loaded machine stretches them.
//! Values, types, replies (errors by their code) and messages are exact,
//! and a command the library could send (names without U+001F) answered
//! with an error must leave the key space as it was.
//!
//! Names include other resources' helper keys (a lock on `a␟fence`), a
//! 2,000-byte name and non-ASCII ones; tokens include the readers' marker
//! and bytes that are not text; other clients write helper keys of every
//! shape, and another wire format's marker (`R␟format`: `2`, `1`, other
//! values, a sorted set), which every acquiring script reads first. Resource names are Rust strings in this library's API, so names
//! that are not UTF-8 cannot reach a node and are not generated.
//!
//! The sequences that ever disagreed (`corpus`) run first. A failing run
//! prints the shrunk sequence in the corpus's form.

use std::io::{BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use redis::Value as Wire;
use redlock_core::keys::{
    FENCE_SUFFIX, FORMAT_SUFFIX, READERS_SUFFIX, SEPARATOR, WAIT_SUFFIX, WATCH_SUFFIX,
};
use redlock_core::model::{Command, Entry, Node, Published, Reply, Value, Watcher, READERS_MARKER};
use redlock_redis::testing::command_words;
use redlock_tests::harness::RedisServer;

/// How much TTLs and readers' scores may differ, in ms (see the module
/// docs).
const TTL_TOLERANCE: i64 = 3;

/// A `TIME` reply in milliseconds.
fn millis(time: &Wire) -> Result<i64, String> {
    match time {
        Wire::Array(t) if t.len() == 2 => {
            let secs: i64 = String::from_utf8_lossy(&bytes(&t[0])?).parse().unwrap_or(0);
            let micros: i64 = String::from_utf8_lossy(&bytes(&t[1])?).parse().unwrap_or(0);
            Ok(secs * 1000 + micros / 1000)
        }
        other => Err(format!("TIME: {other:?}")),
    }
}

/// The release channels' prefix the commands carry.
const CHANNEL: &[u8] = b"diff";

/// The resources: plain ones, one whose name is another resource's helper
/// key of each kind, a long one, non-ASCII ones.
fn names() -> Vec<String> {
    vec![
        "a".to_owned(),
        "b".to_owned(),
        format!("a{FENCE_SUFFIX}"),
        format!("b{WAIT_SUFFIX}"),
        format!("a{READERS_SUFFIX}"),
        format!("b{WAIT_SUFFIX}:2"),
        format!("{}ü", "L".repeat(2_000)),
        "🔒 ключ\r\n:1".to_owned(),
        format!("a{WATCH_SUFFIX}"),
    ]
}

/// What follows a resource's name in a key another client writes.
fn suffixes() -> Vec<String> {
    vec![
        String::new(),
        FENCE_SUFFIX.to_owned(),
        WAIT_SUFFIX.to_owned(),
        READERS_SUFFIX.to_owned(),
        format!("{WAIT_SUFFIX}:1"),
        format!("{WAIT_SUFFIX}:2"),
        // Another wire format's marker (a later version's, or `1`, or a
        // value or type no version writes).
        FORMAT_SUFFIX.to_owned(),
        WATCH_SUFFIX.to_owned(),
    ]
}

/// The tokens: four managers' 20-byte ones, one that is no text, the
/// readers' marker itself (a value no real token has), and two values of
/// managers with an identity (a token, then the identity: `Claim::value`),
/// the second starting with the first manager's token, which it must never
/// pass for.
fn token(who: usize) -> Vec<u8> {
    match who {
        0..=3 => vec![b'A' + who as u8; 20],
        4 => b"\r\n\0\xff tok\x1f\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec(),
        5 => READERS_MARKER.to_vec(),
        6 => [&[b'G'; 20][..], "web-1:42 ß".as_bytes()].concat(),
        _ => [&[b'A'; 20][..], b"host-b"].concat(),
    }
}

const MANAGERS: [u64; 4] = [1, 2, 3, u64::MAX];

/// What another client writes.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    /// A string, with a TTL or none.
    Str(&'static str, Option<u64>),
    /// A sorted-set member with a score.
    Zset(i64),
    Del,
}

/// One step of a sequence.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// Real time passes (ms).
    Wait(u64),
    /// `SET NX PX GET` (or `SET NX PX` and `TYPE` before Redis 7.0).
    SetNx { key: usize, who: usize, ttl: u64 },
    Acquire {
        keys: Vec<usize>,
        who: usize,
        ttl: u64,
        fence: bool,
    },
    Queued {
        keys: Vec<usize>,
        who: usize,
        ttl: u64,
        fence: bool,
        manager: usize,
        mark_ttl: u64,
        yields: bool,
        ticket: u64,
    },
    Extend {
        keys: Vec<usize>,
        who: usize,
        ttl: u64,
    },
    Release {
        keys: Vec<usize>,
        who: usize,
        leave: Option<usize>,
        /// An election's release: tells the key's watchers.
        watched: bool,
    },
    Raise {
        keys: Vec<usize>,
        who: usize,
        at_least: u64,
    },
    Read {
        keys: Vec<usize>,
        who: usize,
        ttl: u64,
        fence: bool,
        manager: Option<usize>,
        yields: bool,
        mark_ttl: u64,
        ticket: u64,
    },
    ReadExtend {
        keys: Vec<usize>,
        who: usize,
        ttl: u64,
    },
    ReadRelease {
        keys: Vec<usize>,
        who: usize,
        leave: Option<usize>,
    },
    ReadRaise {
        keys: Vec<usize>,
        who: usize,
        at_least: u64,
    },
    /// Who holds `names[key]`: the inspect script; with a watcher (a
    /// manager and for how long), it watches the key from then on.
    Inspect {
        key: usize,
        watcher: Option<(usize, u64)>,
    },
    /// Another client writes `names[name] + suffixes[suffix]`.
    Other {
        name: usize,
        suffix: usize,
        write: Write,
    },
}

/// What a step's commands borrow.
struct Owned {
    keys: Vec<String>,
    token: Vec<u8>,
    key: Vec<u8>,
}

impl Owned {
    fn of(step: &Step, names: &[String], suffixes: &[String]) -> Owned {
        let pick = |keys: &[usize]| keys.iter().map(|&k| names[k].clone()).collect();
        let (keys, who) = match step {
            Step::Wait(_) => (Vec::new(), 0),
            Step::SetNx { key, who, .. } => (vec![names[*key].clone()], *who),
            Step::Inspect { key, .. } => (vec![names[*key].clone()], 0),
            Step::Acquire { keys, who, .. }
            | Step::Queued { keys, who, .. }
            | Step::Extend { keys, who, .. }
            | Step::Release { keys, who, .. }
            | Step::Raise { keys, who, .. }
            | Step::Read { keys, who, .. }
            | Step::ReadExtend { keys, who, .. }
            | Step::ReadRelease { keys, who, .. }
            | Step::ReadRaise { keys, who, .. } => (pick(keys), *who),
            Step::Other { .. } => (Vec::new(), 0),
        };
        let key = match step {
            Step::Other { name, suffix, .. } => {
                format!("{}{}", names[*name], suffixes[*suffix]).into_bytes()
            }
            _ => Vec::new(),
        };
        Owned {
            keys,
            token: token(who),
            key,
        }
    }

    /// The step's commands; `set_get`: the server takes `SET NX GET`.
    fn commands(&self, step: &Step, set_get: bool) -> Vec<Command<'_>> {
        let (keys, token) = (&self.keys[..], &self.token[..]);
        let manager = |m: usize| MANAGERS[m];
        vec![match *step {
            Step::Wait(_) => return Vec::new(),
            Step::SetNx { ttl, .. } => {
                let key = self.keys[0].as_str();
                if !set_get {
                    return vec![
                        Command::SetNx {
                            key,
                            token,
                            ttl_ms: ttl,
                        },
                        Command::Type {
                            key: key.as_bytes(),
                        },
                    ];
                }
                Command::SetNxGet {
                    key,
                    token,
                    ttl_ms: ttl,
                }
            }
            Step::Acquire { ttl, fence, .. } => Command::Acquire {
                keys,
                token,
                ttl_ms: ttl,
                fence,
            },
            Step::Queued {
                ttl,
                fence,
                manager: m,
                mark_ttl,
                yields,
                ticket,
                ..
            } => Command::QueuedAcquire {
                keys,
                token,
                ttl_ms: ttl,
                fence,
                manager: manager(m),
                mark_ttl_ms: mark_ttl,
                yields,
                ticket,
            },
            Step::Extend { ttl, .. } => Command::Extend {
                keys,
                token,
                ttl_ms: ttl,
            },
            Step::Release { leave, watched, .. } => Command::Release {
                keys,
                token,
                channel: CHANNEL,
                leave: leave.map(manager),
                watched,
            },
            Step::Raise { at_least, .. } => Command::RaiseFence {
                keys,
                token,
                at_least,
            },
            Step::Read {
                ttl,
                fence,
                manager: m,
                yields,
                mark_ttl,
                ticket,
                ..
            } => Command::SharedAcquire {
                keys,
                token,
                ttl_ms: ttl,
                fence,
                manager: m.map(manager),
                yields,
                mark_ttl_ms: mark_ttl,
                ticket,
            },
            Step::ReadExtend { ttl, .. } => Command::SharedExtend {
                keys,
                token,
                ttl_ms: ttl,
            },
            Step::ReadRelease { leave, .. } => Command::SharedRelease {
                keys,
                token,
                channel: CHANNEL,
                leave: leave.map(manager),
            },
            Step::ReadRaise { at_least, .. } => Command::SharedRaiseFence {
                keys,
                token,
                at_least,
            },
            Step::Inspect { watcher, .. } => Command::Inspect {
                key: self.keys[0].as_str(),
                watcher: watcher.map(|(m, ttl_ms)| Watcher {
                    manager: manager(m),
                    ttl_ms,
                }),
            },
            Step::Other { ref write, .. } => match *write {
                Write::Str(value, px) => Command::Set {
                    key: &self.key,
                    value: value.as_bytes(),
                    px,
                },
                Write::Zset(score) => Command::ZAdd {
                    key: &self.key,
                    score,
                    member: b"m",
                },
                Write::Del => Command::Del { key: &self.key },
            },
        }]
    }
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let n = names().len();
    // Half the picks come from a hot few (two resources and one named as
    // the other's waiting line) and the first two tokens and managers, so
    // that a lock, its line, its holder and its waiters meet again within
    // a sequence (a wait then a grant; a hold of `b` and of `b␟waiting`
    // then a release of `b`).
    let hot = vec![0usize, 1, 3];
    let keys = prop_oneof![
        1 => proptest::sample::subsequence(hot.clone(), 1..=2),
        1 => proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=3),
    ];
    let key = prop_oneof![1 => proptest::sample::select(hot), 1 => 0..n];
    let who = prop_oneof![1 => 0..2usize, 1 => 0..8usize];
    let ttl = prop_oneof![
        3 => proptest::sample::select(vec![1u64, 2, 3, 5, 10, 25]),
        2 => proptest::sample::select(vec![80u64, 400]),
        2 => Just(60_000u64),
    ];
    let ticket = prop_oneof![
        0u64..40,
        Just(1_764_150_000_000_000u64),
        Just((1 << 53) - 1)
    ];
    let at_least = prop_oneof![
        0u64..20,
        Just(redlock_core::decide::FENCE_LIMIT - 1),
        Just(redlock_core::decide::FENCE_LIMIT),
        Just(redlock_core::decide::FENCE_LIMIT + 1),
        Just(i64::MAX.unsigned_abs()),
    ];
    let manager = prop_oneof![1 => 0..2usize, 1 => 0..MANAGERS.len()];
    let mark_ttl = prop_oneof![1 => ttl.clone(), 1 => Just(60_000u64)];
    let write = prop_oneof![
        proptest::sample::select(vec![
            "1",
            "007",
            "41",
            "9007199254740990",
            "9007199254740989",
            "-3",
            "",
            "x",
            "  ",
            "5:1",
            "3:2 9:1",
            "1:a2:b",
            "x1:y",
            "7:3",
            "1",
            "r",
            "2",
            "1234567890",
        ])
        .prop_flat_map(|v| prop_oneof![Just(Write::Str(v, None)), Just(Write::Str(v, Some(30)))]),
        (0i64..5).prop_map(Write::Zset),
        Just(Write::Del),
    ];
    prop_oneof![
        2 => proptest::sample::select(vec![0u64, 1, 2, 5, 15, 40]).prop_map(Step::Wait),
        2 => (key.clone(), who.clone(), ttl.clone()).prop_map(|(key, who, ttl)| Step::SetNx { key, who, ttl }),
        3 => (keys.clone(), who.clone(), ttl.clone(), any::<bool>())
            .prop_map(|(keys, who, ttl, fence)| Step::Acquire { keys, who, ttl, fence }),
        5 => (keys.clone(), who.clone(), ttl.clone(), any::<bool>(), manager.clone(), mark_ttl.clone(), any::<bool>(), ticket.clone())
            .prop_map(|(keys, who, ttl, fence, manager, mark_ttl, yields, ticket)| Step::Queued {
                keys, who, ttl, fence, manager, mark_ttl, yields, ticket,
            }),
        2 => (keys.clone(), who.clone(), ttl.clone())
            .prop_map(|(keys, who, ttl)| Step::Extend { keys, who, ttl }),
        4 => (keys.clone(), who.clone(), proptest::option::of(manager.clone()), any::<bool>())
            .prop_map(|(keys, who, leave, watched)| Step::Release { keys, who, leave, watched }),
        2 => (keys.clone(), who.clone(), at_least.clone())
            .prop_map(|(keys, who, at_least)| Step::Raise { keys, who, at_least }),
        4 => (keys.clone(), who.clone(), ttl.clone(), any::<bool>(), proptest::option::of(manager.clone()), any::<bool>(), mark_ttl, ticket)
            .prop_map(|(keys, who, ttl, fence, manager, yields, mark_ttl, ticket)| Step::Read {
                keys, who, ttl, fence, manager, yields, mark_ttl, ticket,
            }),
        1 => (keys.clone(), who.clone(), ttl.clone())
            .prop_map(|(keys, who, ttl)| Step::ReadExtend { keys, who, ttl }),
        2 => (keys.clone(), who.clone(), proptest::option::of(manager.clone()))
            .prop_map(|(keys, who, leave)| Step::ReadRelease { keys, who, leave }),
        1 => (keys, who, at_least)
            .prop_map(|(keys, who, at_least)| Step::ReadRaise { keys, who, at_least }),
        2 => (key.clone(), proptest::option::of((manager.clone(), ttl.clone())))
            .prop_map(|(key, watcher)| Step::Inspect { key, watcher }),
        2 => (key, 0..suffixes().len(), write)
            .prop_map(|(name, suffix, write)| Step::Other { name, suffix, write }),
    ]
}

/// Dumps the key space: `{key, type, pttl, value, expiry, guess}` for
/// each live key (a sorted set's value: members and scores). `expiry`:
/// `PEXPIRETIME`, where the server has it (7.0 and later). Before 7.0,
/// `guess`: `{TIME + PTTL, how long that took}`, the expiry to within the
/// time between the two clock readings (`PTTL` reads the clock anew there,
/// in a script as well).
const DUMP: &str = r"
local function now()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)['ok']
  local at = redis.pcall('PEXPIRETIME', k)
  local guess = false
  local pttl
  if type(at) == 'number' then
    pttl = redis.call('PTTL', k)
  else
    at = false
    local before = now()
    pttl = redis.call('PTTL', k)
    if pttl >= 0 then
      guess = {before + pttl, now() - before}
    end
  end
  local e = {k, t, pttl, false, at, guess}
  if t == 'string' then
    e[4] = redis.call('GET', k)
  elseif t == 'zset' then
    e[4] = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  end
  out[#out + 1] = e
end
return out
";

/// One key as both sides report it: type, value, TTL (ms, relative) and,
/// where the server tells it (`PEXPIRETIME`, Redis 7.0 and later), the
/// expiry itself; before 7.0, the server's expiry as the dump measured it,
/// and to within how many ms.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    key: Vec<u8>,
    value: Value,
    ttl: Option<i64>,
    expires_at: Option<i64>,
    guess: Option<(i64, i64)>,
}

/// A busy loop of `ARGV[1]` turns inside a step's transaction, which holds
/// the server as a loaded machine's scheduler does: some steps run with
/// one before their commands, some between the commands and the dump, so
/// that every run meets transactions whose commands read the clock well
/// after the first `TIME`, or well before the dump. (Turns, not a time:
/// Valkey's scripts read one frozen `TIME`.)
const STRETCH: &str = r"
local x = 0
for i = 1, tonumber(ARGV[1]) do
  x = x + i
end
return 0
";

/// A stretch's turns: about 5 ms of one core of this machine.
const STRETCH_TURNS: u64 = 250_000;

/// Where step `i`'s transaction is stretched: before its commands, after
/// them (before the dump), or not at all.
fn stretch(i: usize) -> (bool, bool) {
    (i % 4 == 1, i % 4 == 3)
}

/// The key each step's transaction sets first, with a long TTL: its expiry
/// tells the instant the transaction's commands take as now (a name no
/// generated key has; left out of the comparison).
const PROBE: &[u8] = b"\x01probe";
const PROBE_TTL: i64 = 100_000_000;

fn model_dump(node: &Node, now: i64) -> Vec<Seen> {
    let mut out: Vec<Seen> = node
        .keys
        .live(now)
        .map(|(k, e)| Seen {
            key: k.to_vec(),
            value: e.value.clone(),
            ttl: e.expires_at.map(|at| at - now),
            expires_at: e.expires_at,
            guess: None,
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn bytes(v: &Wire) -> Result<Vec<u8>, String> {
    match v {
        Wire::BulkString(b) => Ok(b.clone()),
        Wire::SimpleString(s) => Ok(s.clone().into_bytes()),
        Wire::Int(n) => Ok(n.to_string().into_bytes()),
        other => Err(format!("not a string: {other:?}")),
    }
}

fn server_dump(v: &Wire) -> Result<Vec<Seen>, String> {
    let Wire::Array(entries) = v else {
        return Err(format!("dump: {v:?}"));
    };
    let mut out = Vec::new();
    for e in entries {
        let Wire::Array(f) = e else {
            return Err(format!("dump entry: {e:?}"));
        };
        let [key, kind, pttl, value, absolute, guess] = &f[..] else {
            return Err(format!("dump entry: {f:?}"));
        };
        let ttl = match pttl {
            Wire::Int(-1) => None,
            Wire::Int(n) => Some(*n),
            other => return Err(format!("pttl: {other:?}")),
        };
        let value = match (bytes(kind)?.as_slice(), value) {
            (b"string", v) => Value::Str(bytes(v)?),
            (b"zset", Wire::Array(flat)) => {
                let mut members = Vec::new();
                for pair in flat.chunks(2) {
                    let [m, s] = pair else {
                        return Err(format!("zset: {flat:?}"));
                    };
                    let score: f64 = String::from_utf8_lossy(&bytes(s)?)
                        .parse()
                        .map_err(|e| format!("score: {e}"))?;
                    members.push((score, bytes(m)?));
                }
                Value::Zset(members)
            }
            (kind, _) => return Err(format!("a key of type {}", String::from_utf8_lossy(kind))),
        };
        out.push(Seen {
            key: bytes(key)?,
            value,
            ttl,
            expires_at: match absolute {
                Wire::Int(at) if *at >= 0 => Some(*at),
                _ => None,
            },
            guess: match guess {
                Wire::Array(g) => match &g[..] {
                    [Wire::Int(at), Wire::Int(within)] => Some((*at, *within)),
                    other => return Err(format!("guess: {other:?}")),
                },
                _ => None,
            },
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Whether the model's key space is the server's, within the tolerance.
/// `shift`: how much later than the model's instant the server's scripts
/// may have read `TIME` (readers' scores are `TIME` + TTL, while expiry
/// takes the transaction's instant).
/// `slack`: the transaction's span (between its two `TIME`s), by which a
/// TTL may differ more before Redis 7.0, where each command reads the clock
/// anew (the server tells no exact expiry there).
fn same_keys(model: &[Seen], server: &[Seen], shift: (i64, i64), slack: i64) -> Result<(), String> {
    let score = |m: f64, s: f64| {
        let d = s - m;
        d >= (shift.0 - TTL_TOLERANCE) as f64 && d <= (shift.1 + TTL_TOLERANCE) as f64
    };
    let near = |a: f64, b: f64| (a - b).abs() <= TTL_TOLERANCE as f64;
    let show = |s: &[Seen]| {
        s.iter()
            .map(|e| {
                format!(
                    "{} = {} (ttl {:?})",
                    esc(&e.key),
                    show_value(&e.value),
                    e.ttl
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mismatch = || {
        Err(format!(
            "key spaces differ\n  model:  {}\n  server: {}",
            show(model),
            show(server)
        ))
    };
    // A key within the tolerance of its expiry on one side may be gone on
    // the other.
    let expiring = |e: &Seen| e.ttl.is_some_and(|ttl| ttl <= TTL_TOLERANCE);
    let (mut m, mut s) = (model.iter().peekable(), server.iter().peekable());
    loop {
        match (m.peek(), s.peek()) {
            (None, None) => return Ok(()),
            (Some(a), Some(b)) if a.key == b.key => {
                let ttl = match (a.ttl, b.ttl, a.expires_at, b.expires_at) {
                    (None, None, ..) => true,
                    (_, _, Some(x), Some(y)) => near(x as f64, y as f64),
                    (Some(x), Some(y), ..) => (x - y).abs() <= TTL_TOLERANCE + slack,
                    _ => false,
                };
                let value = match (&a.value, &b.value) {
                    (Value::Str(x), Value::Str(y)) => x == y,
                    (Value::Zset(x), Value::Zset(y)) => {
                        let (mut x, mut y) = (x.clone(), y.clone());
                        x.sort_by(|p, q| p.1.cmp(&q.1));
                        y.sort_by(|p, q| p.1.cmp(&q.1));
                        x.len() == y.len()
                            && x.iter().zip(&y).all(|(p, q)| p.1 == q.1 && score(p.0, q.0))
                    }
                    _ => false,
                };
                if !ttl || !value {
                    return mismatch();
                }
                m.next();
                s.next();
            }
            (Some(a), b) if b.is_none_or(|b| a.key < b.key) => {
                if !expiring(a) {
                    return mismatch();
                }
                m.next();
            }
            (_, Some(b)) => {
                if !expiring(b) {
                    return mismatch();
                }
                s.next();
            }
            (Some(_), None) => return mismatch(),
        }
    }
}

/// A key or value for a message: a long one by its start, end and length.
fn esc(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let n = s.chars().count();
    if n <= 60 {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(20).collect();
    let tail: String = s.chars().skip(n - 30).collect();
    format!("{head:?}..({n} chars)..{tail:?}")
}

fn show_value(v: &Value) -> String {
    match v {
        Value::Str(s) => esc(s),
        Value::Zset(m) => format!(
            "zset[{}]",
            m.iter()
                .map(|(s, m)| format!("{}@{s}", esc(m)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// Whether the server's reply is the model's.
fn same_reply(model: &Reply, server: &Wire) -> bool {
    match (model, server) {
        (Reply::Int(a), Wire::Int(b)) => a == b,
        (Reply::Nil, Wire::Nil) => true,
        (Reply::Ok, Wire::Okay) => true,
        (Reply::Ok, Wire::SimpleString(s)) => s == "OK",
        (Reply::Status(a), Wire::SimpleString(b)) => a == b,
        (Reply::Bulk(a), Wire::BulkString(b)) => a == b,
        (Reply::Array(a), Wire::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_reply(a, b))
        }
        (Reply::Error(e), Wire::ServerError(err)) => {
            let text = format!("{} {}", err.code(), err.details().unwrap_or(""));
            text.contains(e.code())
        }
        _ => false,
    }
}

/// The subscriber that hears what the scripts publish, on a connection of
/// its own read with `PING`s: every message published before a `PING`'s
/// answer comes before it.
struct Listener {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    parser: redis::Parser,
}

impl Listener {
    fn new(server: &RedisServer) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(server.addr())?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut listener = Listener {
            reader: BufReader::new(stream.try_clone()?),
            stream,
            parser: redis::Parser::new(),
        };
        let pattern = format!("{}:*", String::from_utf8_lossy(CHANNEL));
        let cmd = redis::cmd("PSUBSCRIBE").arg(pattern).get_packed_command();
        listener.stream.write_all(&cmd)?;
        listener.parser.parse_value(&mut listener.reader)?;
        Ok(listener)
    }

    /// The messages published since the last call.
    fn heard(&mut self) -> anyhow::Result<Vec<Published>> {
        self.stream
            .write_all(&redis::cmd("PING").get_packed_command())?;
        let mut out = Vec::new();
        loop {
            let Wire::Array(parts) = self.parser.parse_value(&mut self.reader)? else {
                anyhow::bail!("the listener got something else");
            };
            let kind = parts.first().map(bytes).transpose().ok().flatten();
            match kind.as_deref() {
                Some(b"pong") => return Ok(out),
                Some(b"pmessage") if parts.len() == 4 => out.push(Published {
                    channel: bytes(&parts[2]).map_err(anyhow::Error::msg)?,
                    message: bytes(&parts[3]).map_err(anyhow::Error::msg)?,
                }),
                _ => anyhow::bail!("the listener got {parts:?}"),
            }
        }
    }
}

/// A server and what runs sequences on it.
struct Bench {
    server: RedisServer,
    con: redis::Connection,
    listener: Listener,
    set_get: bool,
    names: Vec<String>,
    suffixes: Vec<String>,
}

impl Bench {
    fn start() -> anyhow::Result<Self> {
        let server = RedisServer::start()?;
        let mut con = server.client_with_timeout(Duration::from_secs(30))?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut con)?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("0")
            .trim()
            .to_owned();
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let listener = Listener::new(&server)?;
        eprintln!(
            "differential: {} (redis_version {version})",
            info.lines()
                .find(|l| l.starts_with("server_name:") || l.starts_with("valkey_version:"))
                .unwrap_or("redis")
        );
        Ok(Bench {
            server,
            con,
            listener,
            set_get: major >= 7,
            names: names(),
            suffixes: suffixes(),
        })
    }

    /// Runs `steps` on a flushed server and a fresh model; the first
    /// disagreement.
    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        let fail = |e: &dyn std::fmt::Display| format!("server: {e}");
        redis::cmd("FLUSHALL")
            .query::<()>(&mut self.con)
            .map_err(|e| fail(&e))?;
        self.listener.heard().map_err(|e| fail(&e))?;
        let mut model = Node::new();
        // Before Redis 7.0 (no `PEXPIRETIME`) the model goes on with the
        // expiries the dumps measured: each may be off the server's by as
        // long as its measure took, which later steps' comparisons must
        // allow (the longest so far). (Its own, set at a guessed instant
        // of a transaction, could be off by the transaction's span, which
        // on a loaded machine is long enough for a later command to find
        // a key expired on one side only.)
        let mut carried = 0;
        for (i, step) in steps.iter().enumerate() {
            if let Step::Wait(ms) = *step {
                std::thread::sleep(Duration::from_millis(ms));
                continue;
            }
            let owned = Owned::of(step, &self.names, &self.suffixes);
            let commands = owned.commands(step, self.set_get);
            let mut pipe = redis::pipe();
            pipe.atomic().ignore_errors();
            pipe.cmd("TIME");
            pipe.cmd("SET").arg(PROBE).arg("1").arg("PX").arg(PROBE_TTL);
            let (stretch_before, stretch_after) = stretch(i);
            if stretch_before {
                pipe.cmd("EVAL").arg(STRETCH).arg(0).arg(STRETCH_TURNS);
            }
            for command in &commands {
                let words = command_words(command, true);
                let mut cmd = redis::cmd(&String::from_utf8_lossy(&words[0]));
                for w in &words[1..] {
                    cmd.arg(&w[..]);
                }
                pipe.add_command(cmd);
            }
            if stretch_after {
                pipe.cmd("EVAL").arg(STRETCH).arg(0).arg(STRETCH_TURNS);
            }
            pipe.cmd("EVAL").arg(DUMP).arg(0);
            pipe.cmd("TIME");
            let replies: Vec<Wire> = pipe.query(&mut self.con).map_err(|e| fail(&e))?;
            let heard = self.listener.heard().map_err(|e| fail(&e))?;
            let (before, rest) = replies.split_first().ok_or("no replies")?;
            let (after, rest) = rest.split_last().ok_or("no second TIME")?;
            let (dump, replies) = rest.split_last().ok_or("no dump")?;
            let (_, mut replies) = replies.split_first().ok_or("no probe")?;
            if stretch_before {
                replies = replies.get(1..).ok_or("no stretch")?;
            }
            if stretch_after {
                replies = replies.split_last().ok_or("no stretch")?.1;
            }
            // The step and the dump ran between these two instants (ms).
            let (first, last_ms) = (millis(before)?, millis(after)?);
            let mut server = server_dump(dump)?;
            // The instant the commands took as now, where the server tells
            // expiries (Redis 7.0 and later: a transaction's commands take
            // the time it started, which a busy machine may leave well
            // before the first `TIME`).
            let taken = server
                .iter()
                .find(|e| e.key == PROBE)
                .and_then(|e| e.expires_at)
                .map(|at| at - PROBE_TTL);
            server.retain(|e| e.key != PROBE);
            let mut first_diff = None;
            let mut matched = false;
            // The command runs at `at`, the dump (another script) at
            // `seen`, a moment later: time moves between the commands of
            // a transaction.
            // A command's clock may read a little before the first `TIME`
            // (a transaction's or a script's time is taken when it starts;
            // `TIME` reads the clock when it runs).
            let span_ms = (last_ms - first).max(0);
            let slack = if taken.is_none() {
                span_ms.max(carried)
            } else {
                span_ms
            };
            let from = taken.unwrap_or(first);
            let span = (last_ms - from).clamp(0, 1_000);
            let order = (0..=span + 1).flat_map(|d| [from + d, from - d - 1]);
            'candidates: for at in order.filter(|at| *at >= from - 2) {
                let mut trial = model.clone();

                let mut published = Vec::new();
                let got: Vec<Reply> = commands
                    .iter()
                    .map(|c| trial.apply(at, c, &mut published))
                    .collect();
                if got.len() != replies.len()
                    || !got.iter().zip(replies).all(|(m, s)| same_reply(m, s))
                {
                    first_diff.get_or_insert(format!(
                        "replies differ\n  model:  {got:?}\n  server: {replies:?}"
                    ));
                    continue;
                }
                // An error reply leaves the node as it was (each script
                // reads, and so type-checks, every key before it writes),
                // for every command the library sends: names without the
                // separator, so that no lock key is another's helper key
                // in the same command.
                let library = owned.keys.iter().all(|k| !k.contains(SEPARATOR));
                if library
                    && got.iter().any(|r| matches!(r, Reply::Error(_)))
                    && model_dump(&trial, at) != model_dump(&model, at)
                {
                    return Err(format!(
                        "step {i}: {step:?}\nan error reply ({got:?}) changed the key space"
                    ));
                }
                if published != heard {
                    first_diff.get_or_insert(format!(
                        "messages differ\n  model:  {published:?}\n  server: {heard:?}"
                    ));
                    continue;
                }
                for seen in at..=(last_ms + 1).max(at) {
                    match same_keys(
                        &model_dump(&trial, seen),
                        &server,
                        (first - at, last_ms - at),
                        slack,
                    ) {
                        Ok(()) => {
                            // Values agree. The model goes on with the
                            // server's scores and expiries, so that a
                            // millisecond's difference does not grow:
                            // exact where the server tells them
                            // (`PEXPIRETIME`), else as the dump measured
                            // them (`TIME` + `PTTL`, to within its
                            // `guess.1`).
                            for e in model_dump(&trial, seen) {
                                if !server.iter().any(|s| s.key == e.key) {
                                    trial.keys.del(seen, &e.key);
                                }
                            }
                            for e in &server {
                                if let Some((_, within)) = e.guess {
                                    carried = carried.max(within + 1);
                                }
                                let expires_at = e.ttl.and(
                                    e.expires_at
                                        .or(e.guess.map(|g| g.0))
                                        .or(e.ttl.map(|ttl| seen + ttl)),
                                );
                                let entry = Entry {
                                    value: e.value.clone(),
                                    expires_at,
                                };
                                trial.keys.insert(&e.key, entry);
                            }
                            model = trial;
                            matched = true;
                            break 'candidates;
                        }
                        Err(diff) => {
                            first_diff.get_or_insert(diff);
                        }
                    }
                }
            }
            if !matched {
                return Err(format!(
                    "step {i} of {}: {step:?}\n{}",
                    steps.len(),
                    first_diff.unwrap_or_default()
                ));
            }
        }
        Ok(())
    }
}

/// A queued acquire of `keys` by token `who` for `manager`.
fn queued(keys: Vec<usize>, who: usize, ttl: u64, manager: usize, mark_ttl: u64) -> Step {
    Step::Queued {
        keys,
        who,
        ttl,
        fence: false,
        manager,
        mark_ttl,
        yields: false,
        ticket: 0,
    }
}

/// The sequences that ever disagreed, shrunk: they run first. Each caught
/// a breakage of the scripts or of the model (applied on purpose, one at a
/// time, and not committed: see the closing note of the node-model issue).
/// Names: 0 `a`, 1 `b`, 2 `a␟fence`, 3 `b␟waiting`, 4 `a␟readers`;
/// token 5 is the readers' marker. Suffix 6 is the format key's.
fn corpus() -> Vec<Vec<Step>> {
    let format = |write| Step::Other {
        name: 0,
        suffix: 6,
        write,
    };
    // Every acquiring script on `a` (and on `a␟fence`, whose format key is
    // `a`'s), then the release and extend of a lock held before.
    let every_script = || {
        let read = |keys: Vec<usize>, manager| Step::Read {
            keys,
            who: 2,
            ttl: 60_000,
            fence: true,
            manager,
            yields: true,
            mark_ttl: 400,
            ticket: 3,
        };
        vec![
            Step::Acquire {
                keys: vec![1, 0],
                who: 1,
                ttl: 60_000,
                fence: true,
            },
            Step::Acquire {
                keys: vec![2],
                who: 1,
                ttl: 60_000,
                fence: false,
            },
            queued(vec![0], 1, 60_000, 1, 400),
            read(vec![0], None),
            read(vec![1, 2], Some(1)),
            Step::Raise {
                keys: vec![0],
                who: 0,
                at_least: 7,
            },
            Step::ReadRaise {
                keys: vec![0],
                who: 0,
                at_least: 7,
            },
            Step::SetNx {
                key: 0,
                who: 1,
                ttl: 60_000,
            },
            Step::Extend {
                keys: vec![0],
                who: 0,
                ttl: 60_000,
            },
        ]
    };
    let mut formats = vec![Step::Acquire {
        keys: vec![0],
        who: 0,
        ttl: 60_000,
        fence: true,
    }];
    for write in [
        Write::Str("2", None),
        Write::Str("1", None),
        Write::Str("1234567890", Some(30)),
        Write::Del,
        Write::Zset(1),
    ] {
        formats.push(format(write));
        formats.extend(every_script());
    }
    formats.push(Step::Release {
        keys: vec![0],
        who: 0,
        leave: None,
        watched: false,
    });
    vec![
        // Another wire format's marker: every acquiring script refuses
        // before anything else, the others go on.
        formats,
        // A line of spaces is a line with nobody in it: a grant that
        // rewrote the line (and dropped its own place) deleted it.
        vec![
            Step::Other {
                name: 0,
                suffix: 2,
                write: Write::Str("  ", None),
            },
            Step::Queued {
                keys: vec![0],
                who: 0,
                ttl: 60_000,
                fence: false,
                manager: 0,
                mark_ttl: 400,
                yields: true,
                ticket: 1,
            },
        ],
        // The release deleted without comparing the token.
        vec![Step::Release {
            keys: vec![2],
            who: 0,
            leave: None,
            watched: false,
        }],
        vec![
            queued(vec![3], 0, 80, 0, 1),
            Step::Release {
                keys: vec![3, 7],
                who: 1,
                leave: None,
                watched: false,
            },
        ],
        // The extend renewed a key held by another token.
        vec![
            queued(vec![1], 0, 1, 0, 1),
            Step::Extend {
                keys: vec![1, 5],
                who: 0,
                ttl: 5,
            },
        ],
        // The model kept fencing counters outside its key space.
        vec![Step::Queued {
            keys: vec![6],
            who: 0,
            ttl: 1,
            fence: true,
            manager: 0,
            mark_ttl: 1,
            yields: false,
            ticket: 0,
        }],
        // A grant took the caller's place out of the line (the split-round
        // bug).
        vec![
            queued(vec![3], 0, 1, 0, 1),
            queued(vec![3, 4], 0, 1, 2, 80),
            queued(vec![3], 0, 1, 0, 1),
            Step::Queued {
                keys: vec![3],
                who: 0,
                ttl: 400,
                fence: false,
                manager: 2,
                mark_ttl: 2,
                yields: false,
                ticket: 9_007_199_254_740_991,
            },
        ],
        // The same, without a short TTL: a manager refused while `b` is
        // held keeps its place when it is granted after the release.
        vec![
            Step::Acquire {
                keys: vec![1],
                who: 1,
                ttl: 60_000,
                fence: false,
            },
            queued(vec![1], 0, 60_000, 0, 60_000),
            Step::Release {
                keys: vec![1],
                who: 1,
                leave: None,
                watched: false,
            },
            queued(vec![1], 0, 60_000, 0, 60_000),
        ],
        // The queued acquire overwrote a line of another shape (the
        // review issue's key-namespace fix undone).
        vec![
            Step::Queued {
                keys: vec![3],
                who: 0,
                ttl: 3,
                fence: false,
                manager: 3,
                mark_ttl: 1,
                yields: false,
                ticket: 1_764_150_000_000_000,
            },
            Step::Queued {
                keys: vec![1, 6],
                who: 2,
                ttl: 1,
                fence: true,
                manager: 2,
                mark_ttl: 60_000,
                yields: false,
                ticket: 1_764_150_000_000_000,
            },
        ],
        // A release deleted a lock named as the released key's line.
        vec![
            queued(vec![0], 0, 1, 0, 1),
            Step::Queued {
                keys: vec![1, 3],
                who: 5,
                ttl: 10,
                fence: false,
                manager: 0,
                mark_ttl: 400,
                yields: true,
                ticket: 9_007_199_254_740_991,
            },
            Step::ReadRelease {
                keys: vec![1, 4, 5],
                who: 1,
                leave: None,
            },
        ],
        // Holder identity: a value that starts with another manager's
        // token is not that manager's (no release, no extend); who holds
        // it, with its counter, then an inspection of a key of another
        // type and of a counter another client wrote.
        vec![
            Step::Acquire {
                keys: vec![0],
                who: 7,
                ttl: 60_000,
                fence: true,
            },
            Step::Inspect {
                key: 0,
                watcher: None,
            },
            Step::Release {
                keys: vec![0],
                who: 0,
                leave: None,
                watched: false,
            },
            Step::Extend {
                keys: vec![0],
                who: 0,
                ttl: 5,
            },
            Step::Inspect {
                key: 0,
                watcher: None,
            },
            Step::Release {
                keys: vec![0],
                who: 7,
                leave: None,
                watched: false,
            },
            Step::Inspect {
                key: 0,
                watcher: None,
            },
            Step::SetNx {
                key: 1,
                who: 6,
                ttl: 25,
            },
            Step::Inspect {
                key: 1,
                watcher: None,
            },
            Step::Other {
                name: 1,
                suffix: 0,
                write: Write::Del,
            },
            Step::Other {
                name: 1,
                suffix: 0,
                write: Write::Zset(3),
            },
            Step::Other {
                name: 1,
                suffix: 1,
                write: Write::Str("x", None),
            },
            Step::Inspect {
                key: 1,
                watcher: None,
            },
        ],
        // Watchers of an election's key: three join (one for 5 ms), the
        // lock is taken, another manager waits in line and, once the short
        // one's time is up, the lock is released as an election's: the
        // waiter is told, then the live watchers in the set's order; a
        // release that is not an election's tells nobody; a watchers key
        // another client made a string is left as it is and tells nobody.
        vec![
            Step::Inspect {
                key: 0,
                watcher: Some((0, 60_000)),
            },
            Step::Inspect {
                key: 0,
                watcher: Some((1, 5)),
            },
            Step::Inspect {
                key: 0,
                watcher: Some((3, 60_000)),
            },
            Step::Acquire {
                keys: vec![0],
                who: 0,
                ttl: 60_000,
                fence: true,
            },
            Step::Queued {
                keys: vec![0],
                who: 1,
                ttl: 60_000,
                fence: true,
                manager: 2,
                mark_ttl: 60_000,
                yields: true,
                ticket: 1,
            },
            Step::Wait(15),
            Step::Release {
                keys: vec![0],
                who: 0,
                leave: None,
                watched: true,
            },
            Step::Acquire {
                keys: vec![0],
                who: 3,
                ttl: 60_000,
                fence: false,
            },
            Step::Release {
                keys: vec![0],
                who: 3,
                leave: None,
                watched: false,
            },
            Step::Other {
                name: 0,
                suffix: 7,
                write: Write::Str("x", None),
            },
            Step::Inspect {
                key: 0,
                watcher: Some((0, 60_000)),
            },
            Step::Acquire {
                keys: vec![0],
                who: 0,
                ttl: 60_000,
                fence: false,
            },
            Step::Release {
                keys: vec![0],
                who: 0,
                leave: None,
                watched: true,
            },
        ],
    ]
}

fn cases() -> u32 {
    std::env::var("REDLOCK_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

#[test]
fn the_model_and_the_server_agree_on_every_step() -> anyhow::Result<()> {
    let bench = std::cell::RefCell::new(Bench::start()?);
    for (i, steps) in corpus().iter().enumerate() {
        if let Err(diff) = bench.borrow_mut().run(steps) {
            anyhow::bail!("corpus sequence {i} disagrees:\n{diff}");
        }
    }
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 100_000,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let started = std::time::Instant::now();
    let steps_run = std::cell::Cell::new(0usize);
    // Half the queued acquires are tried again, as a manager's retry
    // loop does, after one other step (a wait, a release, ...): a wait in
    // line, then a grant that keeps the place.
    let group =
        (step_strategy(), step_strategy(), any::<bool>()).prop_map(|(step, between, again)| {
            match step {
                Step::Queued { .. } if again => vec![step.clone(), between, step],
                step => vec![step],
            }
        });
    let sequences = proptest::collection::vec(group, 1..36)
        .prop_map(|groups| groups.into_iter().flatten().collect::<Vec<_>>());
    let result = runner.run(&sequences, |steps| {
        steps_run.set(steps_run.get() + steps.len());
        bench.borrow_mut().run(&steps).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => {
            eprintln!(
                "differential: {} sequences, {} steps in {:?} on port {}",
                cases(),
                steps_run.get(),
                started.elapsed(),
                bench.borrow().server.port()
            );
            Ok(())
        }
        Err(TestError::Fail(why, steps)) => {
            anyhow::bail!(
                "the model and the server disagree: {why}\n(add this to the corpus):\n{steps:?}"
            )
        }
        Err(e) => anyhow::bail!("{e}"),
    }
}
