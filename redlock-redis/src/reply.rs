//! The replies of the lock commands, decoded straight from the bytes of a
//! whole reply (one the wire's [`Framer`](crate::wire) found whole and
//! checked).
//!
//! Every reply a lock cycle reads is one of a few RESP2 kinds: a simple
//! string (`+OK`), an integer (a script's answer), a bulk string or a null
//! (`SET ... GET`), or an array of those. redis-rs's parser decodes a
//! reply from a reader through a streaming parser that zeroes up to
//! 8 KiB of buffer for every reply, which cost more than the rest of a
//! lone caller's client work (docs/benchmarks.md, the history line of
//! `reply.rs`). [`decode`] takes those kinds from the slice
//! itself and gives the same [`Value`]; every other reply (an error, the
//! other RESP3 types, a number written otherwise than in plain digits)
//! still goes to redis-rs's parser, which stays the one definition of what
//! a reply means: the tests below check [`decode`] against it.

use redis::Value;

use crate::wire::MAX_DEPTH;

/// `reply` (exactly one whole reply) as redis-rs's parser decodes it, when
/// it is a simple string, an integer, a bulk string, a null (`$-1`, `*-1`,
/// `_`) or an array of these; `None` for anything else, and for bytes that
/// are not one such reply.
pub(crate) fn decode(reply: &[u8]) -> Option<Value> {
    let mut rest = reply;
    let value = element(&mut rest, 0)?;
    rest.is_empty().then_some(value)
}

/// The value at the start of `rest`, which moves past it.
fn element(rest: &mut &[u8], depth: usize) -> Option<Value> {
    let (&kind, after) = rest.split_first()?;
    *rest = after;
    let line = line(rest)?;
    match kind {
        b'+' => {
            let text = std::str::from_utf8(line).ok()?;
            Some(if text == "OK" {
                Value::Okay
            } else {
                Value::SimpleString(text.to_owned())
            })
        }
        b':' => digits(line).map(Value::Int),
        b'_' if line.is_empty() => Some(Value::Nil),
        b'$' => match digits(line)? {
            -1 => Some(Value::Nil),
            size => {
                let size = usize::try_from(size).ok()?;
                let end = size.checked_add(2)?;
                if rest.get(size..end)? != b"\r\n" {
                    return None;
                }
                let bytes = rest[..size].to_vec();
                *rest = &rest[end..];
                Some(Value::BulkString(bytes))
            }
        },
        b'*' => match digits(line)? {
            -1 => Some(Value::Nil),
            count => {
                let count = usize::try_from(count).ok()?;
                if depth >= MAX_DEPTH {
                    return None;
                }
                // Every element takes 3 bytes at least.
                let mut items = Vec::with_capacity(count.min(rest.len() / 3));
                for _ in 0..count {
                    items.push(element(rest, depth + 1)?);
                }
                Some(Value::Array(items))
            }
        },
        _ => None,
    }
}

/// The line at the start of `rest` (up to the first CRLF), which moves
/// past it and its CRLF.
fn line<'r>(rest: &mut &'r [u8]) -> Option<&'r [u8]> {
    let end = line_end(rest)?;
    let line = &rest[..end];
    *rest = &rest[end + 2..];
    Some(line)
}

/// Where the first line of `bytes` ends: the index of its CRLF.
pub(crate) fn line_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// A number written in plain decimal digits, with a `-` before them for a
/// negative one, that fits an `i64`.
fn digits(text: &[u8]) -> Option<i64> {
    let unsigned = text.strip_prefix(b"-").unwrap_or(text);
    if unsigned.is_empty() || !unsigned.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What redis-rs's parser makes of `reply`, when it decodes it.
    fn theirs(reply: &[u8]) -> Option<Value> {
        redis::parse_redis_value(reply).ok()
    }

    #[test]
    fn the_replies_of_a_lock_cycle_are_decoded_as_redis_rs_decodes_them() {
        let replies: [&[u8]; 12] = [
            b"+OK\r\n",
            b"+QUEUED\r\n",
            b":1\r\n",
            b":-1\r\n",
            b":9223372036854775807\r\n",
            b":-9223372036854775808\r\n",
            b"$-1\r\n",
            b"$0\r\n\r\n",
            b"$18\r\n\x00\x01\r\n\xff token bytes\xfe\r\n",
            b"*-1\r\n",
            b"*3\r\n:1\r\n$2\r\nab\r\n*2\r\n+OK\r\n$-1\r\n",
            b"_\r\n",
        ];
        for reply in replies {
            let ours = decode(reply);
            assert!(ours.is_some(), "{} is decoded here", reply.escape_ascii());
            assert_eq!(ours, theirs(reply), "{}", reply.escape_ascii());
        }
    }

    #[test]
    fn every_other_reply_is_left_to_redis_rs() {
        let others: [&[u8]; 14] = [
            // Errors: redis-rs gives them their kinds.
            b"-ERR unknown command\r\n",
            b"-NOSCRIPT No matching script\r\n",
            // Numbers written otherwise than in plain digits.
            b": 5\r\n",
            b":+5\r\n",
            b":99999999999999999999\r\n",
            b"$ 3\r\nabc\r\n",
            // The other RESP3 types.
            b",1.5\r\n",
            b"#t\r\n",
            b"%1\r\n+k\r\n:1\r\n",
            b">2\r\n+message\r\n+x\r\n",
            b"_x\r\n",
            // Not one whole reply.
            b"+OK\r\n+OK\r\n",
            b"$3\r\nabcd\r\n",
            b"*2\r\n:1\r\n",
        ];
        for reply in others {
            assert_eq!(decode(reply), None, "{}", reply.escape_ascii());
        }
    }

    #[test]
    fn a_simple_string_that_is_not_utf8_is_left_to_redis_rs() {
        assert_eq!(decode(b"+\xff\r\n"), None);
        assert_eq!(decode(b"*1\r\n+\xff\r\n"), None);
    }

    #[test]
    fn arrays_deeper_than_the_wire_allows_are_left_to_redis_rs() {
        let mut deep = "*1\r\n".repeat(MAX_DEPTH).into_bytes();
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(decode(&deep), theirs(&deep));
        let mut deeper = "*1\r\n".repeat(MAX_DEPTH + 1).into_bytes();
        deeper.extend_from_slice(b":1\r\n");
        assert_eq!(decode(&deeper), None);
    }

    /// A value of the kinds [`decode`] takes, and its RESP bytes.
    fn value() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
            prop::collection::vec(any::<u8>(), 0..24).prop_map(|bytes| {
                let mut out = format!("${}\r\n", bytes.len()).into_bytes();
                out.extend_from_slice(&bytes);
                out.extend_from_slice(b"\r\n");
                out
            }),
            "[^\r\n]{0,12}".prop_map(|text| format!("+{text}\r\n").into_bytes()),
            Just(b"+OK\r\n".to_vec()),
            Just(b"$-1\r\n".to_vec()),
            Just(b"*-1\r\n".to_vec()),
            Just(b"_\r\n".to_vec()),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop::collection::vec(inner, 0..6).prop_map(|items| {
                let mut out = format!("*{}\r\n", items.len()).into_bytes();
                for item in items {
                    out.extend_from_slice(&item);
                }
                out
            })
        })
    }

    proptest! {
        #[test]
        fn a_reply_of_these_kinds_decodes_as_redis_rs_decodes_it(reply in value()) {
            let ours = decode(&reply);
            prop_assert!(ours.is_some(), "{}", reply.escape_ascii());
            prop_assert_eq!(ours, theirs(&reply), "{}", reply.escape_ascii());
        }

        /// Whatever the bytes (a reply with a byte changed, or cut, or
        /// grown), a value decoded here is the value redis-rs decodes.
        #[test]
        fn any_bytes_decoded_here_decode_the_same_in_redis_rs(
            reply in value(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0..4u8,
        ) {
            let mut bytes = reply;
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                2 => bytes.insert(i, byte),
                _ => {
                    bytes.remove(i);
                }
            }
            if let Some(ours) = decode(&bytes) {
                prop_assert_eq!(Some(ours), theirs(&bytes), "{}", bytes.escape_ascii());
            }
        }
    }
}
