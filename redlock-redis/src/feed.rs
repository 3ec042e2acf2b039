//! Release notifications over Pub/Sub: the release script publishes a
//! deleted key on the channel of the first manager whose waiting mark is on
//! it (`<RELEASE_CHANNEL>:<id>`), and each manager listens to its own
//! channel on one subscriber connection per master ([`Feed`]), opened when
//! one of its callers first waits.

use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redis::{RedisError, Value};
use redlock_core::backend::{ReleaseFeed, ReleaseSink};
use redlock_core::NodeId;

use crate::ops::Resp;
use crate::pool::Reporter;
use crate::wire::{deadline_in, Endpoint, Wire};

/// The prefix of the Pub/Sub channels on which the release script
/// publishes the keys it deleted while another manager waited for them:
/// the first waiting manager's own channel, `redlock:released:<its id>`,
/// as `<its id> <key>` (see
/// [`Builder::wake_ups`](redlock_core::Builder::wake_ups)). Each manager
/// subscribes to its own channel only, so a release wakes one listener,
/// not every manager's. Pub/Sub ignores the database number: managers on
/// other databases of the same server could hear these too (an extra
/// round for a waiter on a key of the same name, nothing more).
pub const RELEASE_CHANNEL: &str = "redlock:released";

/// How often a listener that heard nothing looks whether its manager is
/// gone.
const POLL: Duration = Duration::from_millis(250);
/// The first and the longest pause between two attempts to connect.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// One master's release notifications for one manager.
pub(crate) struct Feed {
    pub(crate) node: NodeId,
    pub(crate) endpoint: Endpoint,
    pub(crate) timeout: Duration,
    pub(crate) reporter: Reporter,
    /// Shared with the backend, whose releases report keys others wait for.
    pub(crate) sink: Arc<OnceLock<ReleaseSink>>,
}

impl ReleaseFeed for Feed {
    fn start(&self, sink: ReleaseSink) {
        let _ = self.sink.set(sink.clone());
        let listener = Listener {
            endpoint: self.endpoint.clone(),
            timeout: self.timeout,
            reporter: self.reporter.clone(),
            sink,
        };
        // Without a thread, waiters poll as without notifications.
        let _ = thread::Builder::new()
            .name(format!("redlock-feed-{}", self.node))
            .spawn(move || listener.run());
    }
}

struct Listener {
    endpoint: Endpoint,
    timeout: Duration,
    reporter: Reporter,
    sink: ReleaseSink,
}

impl Listener {
    /// Connects, subscribes and passes on what it hears until the manager
    /// is gone; reconnects (pausing 100 ms, doubling up to 2 s) when the
    /// connection fails. Errors reach the manager's event hook, redacted.
    fn run(self) {
        let mut pause = FIRST_RETRY;
        while !self.sink.is_closed() {
            match self.subscribe() {
                // Not allowed to subscribe (an ACL user without the
                // channel): reported once; this manager's waiters poll.
                Err(err) if err.code() == Some("NOPERM") => {
                    self.reporter.report(err);
                    return;
                }
                Ok(mut wire) => {
                    pause = FIRST_RETRY;
                    self.sink.listening();
                    if let Err(err) = self.listen(&mut wire) {
                        self.reporter.report(err);
                    }
                }
                Err(err) => {
                    self.reporter.report(err);
                    self.sleep(pause);
                    pause = (pause * 2).min(LAST_RETRY);
                }
            }
        }
    }

    /// Connects (within twice the node timeout, see [`Wire::connect`]) and
    /// subscribes (within the node timeout again).
    fn subscribe(&self) -> Result<Wire, RedisError> {
        let mut wire = Wire::connect(&self.endpoint, self.timeout, &[])?;
        let mut packed = Vec::new();
        Resp(&mut packed)
            .command(2)
            .bulk(b"SUBSCRIBE")
            .bulk(channel(self.sink.manager()).as_bytes());
        let deadline = deadline_in(self.timeout);
        wire.write(&packed, deadline)?;
        // The confirmation, within the node timeout.
        match wire.read(deadline)? {
            Value::Array(items) if is(items.first(), b"subscribe") => {}
            Value::ServerError(err) => return Err(err.into()),
            other => {
                return Err(RedisError::from((
                    redis::ErrorKind::Client,
                    "unexpected reply to SUBSCRIBE",
                    format!("{other:?}"),
                )))
            }
        }
        Ok(wire)
    }

    /// Passes on every message until the manager is gone (`Ok`) or the
    /// connection fails. Each read waits [`POLL`] at most, so a manager
    /// that is gone is noticed; a message that began to arrive must be
    /// whole within the node timeout (checked every [`POLL`]), or the
    /// connection is given up as stalled.
    fn listen(&self, wire: &mut Wire) -> Result<(), RedisError> {
        // When a message (or data that is none) was first seen unfinished.
        let mut unfinished: Option<Instant> = None;
        while !self.sink.is_closed() {
            match wire.read(deadline_in(POLL)) {
                Ok(Value::Array(items)) if is(items.first(), b"message") => {
                    unfinished = None;
                    if let Some(Value::BulkString(payload)) = items.get(2) {
                        if let Some((key, waiter)) = parse(payload) {
                            self.sink.released(key, waiter);
                        }
                    }
                }
                Ok(_) => unfinished = None,
                Err(err) if err.is_timeout() && wire.mid_reply() => {
                    let since = *unfinished.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.timeout {
                        return Err(stalled());
                    }
                }
                Err(err) if err.is_timeout() => unfinished = None,
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Sleeps `pause`, waking early when the manager is gone.
    fn sleep(&self, pause: Duration) {
        let mut left = pause;
        while !left.is_zero() && !self.sink.is_closed() {
            let step = left.min(POLL);
            thread::sleep(step);
            left -= step;
        }
    }
}

/// The error of a subscription whose server began a message and did not
/// finish it within the node timeout.
fn stalled() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the server began a message and did not finish it within the node timeout: \
         the subscription is opened again",
    ))
}

/// The channel of the manager `id`'s notifications.
pub(crate) fn channel(id: u64) -> String {
    format!("{RELEASE_CHANNEL}:{id}")
}

/// A notification's `<waiting manager's id> <key>`; a payload without the
/// id (published by something else) names the key alone.
fn parse(payload: &[u8]) -> Option<(&str, Option<u64>)> {
    let text = std::str::from_utf8(payload).ok()?;
    Some(match text.split_once(' ') {
        Some((id, key)) => match id.parse() {
            Ok(id) => (key, Some(id)),
            Err(_) => (text, None),
        },
        None => (text, None),
    })
}

fn is(value: Option<&Value>, word: &[u8]) -> bool {
    matches!(value, Some(Value::BulkString(w)) if w.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::tests::read_words;
    use crate::wire::Address;
    use std::io::Write;
    use std::net::TcpListener;

    /// A fake server that answers the handshake and `SUBSCRIBE`, then
    /// begins a message (a 100 kB payload announced) and trickles it one
    /// byte every 100 µs: no socket read waits long enough to time out.
    fn trickling_publisher() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            let Some(Ok(mut stream)) = listener.incoming().next() else {
                return;
            };
            let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
            while let Some(words) = read_words(&mut reader) {
                if words[0] != "SUBSCRIBE" {
                    let _ = stream.write_all(b"+OK\r\n");
                    continue;
                }
                let confirm = format!(
                    "*3\r\n$9\r\nsubscribe\r\n${}\r\n{}\r\n:1\r\n",
                    words[1].len(),
                    words[1]
                );
                let _ = stream.write_all(confirm.as_bytes());
                let _ = stream.write_all(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$100000\r\n");
                while stream.write_all(b"a").is_ok() {
                    std::thread::sleep(Duration::from_micros(100));
                }
                return;
            }
        });
        port
    }

    #[test]
    fn bug3_a_message_that_never_ends_is_given_up_within_the_node_timeout() {
        let timeout = Duration::from_millis(200);
        let listener = Listener {
            endpoint: Endpoint::new(
                Address::Tcp {
                    host: "127.0.0.1".to_owned(),
                    port: trickling_publisher(),
                },
                None,
                None,
                0,
            ),
            timeout,
            reporter: Reporter::silent(NodeId::new("fake")),
            sink: ReleaseSink::detached(),
        };
        let mut wire = listener.subscribe().expect("subscribed");
        // Expected: the node timeout and two polls; ten times that fails
        // only on a hang.
        let bound = (timeout + POLL * 2) * 10;
        let (done, result) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = done.send(listener.listen(&mut wire));
        });
        let listened = result
            .recv_timeout(bound)
            .map_err(|_| format!("still listening to a stalled message after {bound:?}"))
            .expect("listening to end within its bound");
        let err = listened.expect_err("given up");
        assert!(err.is_timeout(), "{err}");
    }

    #[test]
    fn a_payload_names_the_waiter_then_the_key() {
        assert_eq!(parse(b"42 locks:a b"), Some(("locks:a b", Some(42))));
        assert_eq!(parse(b"locks:a"), Some(("locks:a", None)));
        assert_eq!(parse(b"x locks:a"), Some(("x locks:a", None)));
        assert_eq!(parse(b"\xff"), None);
    }
}
