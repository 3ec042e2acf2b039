//! A node's key space with Redis's own types and expiry: strings (lock
//! tokens, counters, waiting lines) and sorted sets (readers), each key
//! with an optional expiry in milliseconds on the node's clock.
//!
//! Expiry is Redis's: a key set at `t` with `PX ttl` expires at
//! `t + ttl` and is still there at that very millisecond (Redis deletes a
//! key when `now > expires_at`); `PTTL` is `expires_at - now`.

use std::collections::HashMap;

use crate::keys::FORMAT_SUFFIX;

/// The key space's hasher: foldhash, seeded per process as std's is, and
/// several times faster than SipHash on short keys (the model runs every
/// in-memory node's and every simulated node's commands).
type Hasher = foldhash::fast::RandomState;

/// One key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (a token, a counter in decimal, a waiting line, ...).
    Str(Vec<u8>),
    /// A sorted set: members with their scores, ordered by score, then
    /// member bytes, as Redis orders them. Never empty (Redis deletes an
    /// emptied set).
    Zset(Vec<(f64, Vec<u8>)>),
}

impl Value {
    /// Redis's `TYPE` of it.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::model::Value;
    /// assert_eq!(Value::Str(b"x".to_vec()).type_name(), "string");
    /// assert_eq!(Value::Zset(vec![(1.0, b"m".to_vec())]).type_name(), "zset");
    /// ```
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Zset(_) => "zset",
        }
    }
}

/// A live key's value and expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its value.
    pub value: Value,
    /// When it expires, in milliseconds on the node's clock; `None`: never.
    pub expires_at: Option<i64>,
}

/// Why a command failed on a key, as Redis answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// `WRONGTYPE`: the key holds another type.
    WrongType,
    /// `ERR value is not an integer or out of range` (`INCR` of a string
    /// that is not a canonical integer).
    NotInteger,
    /// `ERR increment or decrement would overflow`.
    Overflow,
}

impl CallError {
    /// The error code Redis starts its reply with.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::model::CallError::WrongType.code(), "WRONGTYPE");
    /// ```
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            CallError::WrongType => "WRONGTYPE",
            CallError::NotInteger | CallError::Overflow => "ERR",
        }
    }
}

/// The key space. Expired keys are never seen; they leave the map when
/// overwritten, deleted or [purged](Keyspace::purge).
#[derive(Default)]
pub struct Keyspace {
    map: HashMap<Vec<u8>, Entry, Hasher>,
    /// No key in the map expires before this: [`Keyspace::purge`] before
    /// it has nothing to drop.
    earliest: i64,
    /// Buffers of deleted keys and strings, for the next keys and strings
    /// set: a lock taken and released allocates nothing once warm.
    spare: Vec<Vec<u8>>,
    /// How many keys in the map (live or expired) end with
    /// [`FORMAT_SUFFIX`]: while there are none, no format key can be
    /// found ([`Keyspace::may_hold_format_keys`]).
    format_keys: usize,
}

/// How many buffers [`Keyspace::spare`] keeps at most.
const SPARE: usize = 32;

impl Clone for Keyspace {
    /// The keys (not the spare buffers).
    fn clone(&self) -> Self {
        Keyspace {
            map: self.map.clone(),
            earliest: self.earliest,
            spare: Vec::new(),
            format_keys: self.format_keys,
        }
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("map", &self.map)
            .field("earliest", &self.earliest)
            .finish_non_exhaustive()
    }
}

type Res<T> = Result<T, CallError>;

/// A sorted set's members with their scores, in order.
type Members = Vec<(f64, Vec<u8>)>;

impl Keyspace {
    /// An empty key space.
    ///
    /// # Examples
    ///
    /// ```
    /// let keys = redlock_core::model::Keyspace::new();
    /// assert_eq!(keys.live(0).count(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Keyspace::default()
    }

    /// Drops every key (a restart without persistence, `FLUSHALL`).
    pub fn clear(&mut self) {
        self.map.clear();
        self.earliest = i64::MAX;
        self.format_keys = 0;
    }

    /// `bytes` in a buffer of a deleted key or string if there is one.
    fn buffer(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut buf) => {
                buf.extend_from_slice(bytes);
                buf
            }
            None => bytes.to_vec(),
        }
    }

    /// Keeps a deleted key's or string's buffer for [`Keyspace::buffer`].
    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < SPARE && buf.capacity() > 0 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Removes `key` (a live or expired entry), keeping its buffers;
    /// whether it was there and live.
    fn remove(&mut self, now: i64, key: &[u8]) -> bool {
        let Some((k, entry)) = self.map.remove_entry(key) else {
            return false;
        };
        self.format_keys -= usize::from(is_format(&k));
        let live = !expired(&entry, now);
        self.recycle(k);
        if let Value::Str(v) = entry.value {
            self.recycle(v);
        }
        live
    }

    /// Puts `entry` at `key`, which has no live entry (an expired one is
    /// replaced), in a spare buffer; a new format key is counted.
    #[inline]
    fn add_key(&mut self, key: &[u8], entry: Entry) {
        let owned = self.buffer(key);
        if self.map.insert(owned, entry).is_none() {
            self.format_keys += usize::from(is_format(key));
        }
    }

    /// Notes that a key in the map expires at `at`.
    fn expires(&mut self, at: Option<i64>) {
        if let Some(at) = at {
            self.earliest = self.earliest.min(at);
        }
    }

    /// Puts `entry` at `key`, whatever was there (for tests that take a
    /// server's key space over).
    pub fn insert(&mut self, key: &[u8], entry: Entry) {
        self.put(key, entry);
    }

    /// Puts `entry` at `key`, whatever was there, as [`Keyspace::insert`]
    /// does; the entry it replaces, live or expired (for a simulator's
    /// rules outside the model, which reuse its buffers).
    pub fn put(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        self.expires(entry.expires_at);
        match self.map.get_mut(key) {
            Some(slot) => Some(std::mem::replace(slot, entry)),
            None => {
                self.format_keys += usize::from(is_format(key));
                self.map.insert(key.to_vec(), entry);
                None
            }
        }
    }

    /// Drops every expired key.
    pub fn purge(&mut self, now: i64) {
        if now <= self.earliest {
            return;
        }
        if self.format_keys == 0 {
            // (The loop without the count is the faster one.)
            self.map.retain(|_, e| !expired(e, now));
        } else {
            let format_keys = &mut self.format_keys;
            self.map.retain(|k, e| {
                let live = !expired(e, now);
                if !live {
                    *format_keys -= usize::from(is_format(k));
                }
                live
            });
        }
        self.earliest = self
            .map
            .values()
            .filter_map(|e| e.expires_at)
            .min()
            .unwrap_or(i64::MAX);
    }

    /// The live keys at `now`, in no particular order.
    pub fn live(&self, now: i64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.map
            .iter()
            .filter(move |(_, e)| !expired(e, now))
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// Whether some key (live or expired) may be a format key
    /// ([`crate::keys::format_key`]): when not, every format key reads
    /// as absent and the scripts' format check can skip its lookups.
    #[must_use]
    #[inline]
    pub fn may_hold_format_keys(&self) -> bool {
        self.format_keys > 0
    }

    /// The live entry at `key`.
    #[must_use]
    #[inline]
    pub fn entry(&self, now: i64, key: &[u8]) -> Option<&Entry> {
        self.map.get(key).filter(|e| !expired(e, now))
    }

    /// The live entry at `key`, to change in place (for a simulator's rules
    /// outside the model).
    pub fn entry_mut(&mut self, now: i64, key: &[u8]) -> Option<&mut Entry> {
        // Its expiry may change: the next purge looks at every key.
        self.earliest = i64::MIN;
        self.live_mut(now, key)
    }

    /// Replaces the value of the live entry at `key`, its expiry kept (for
    /// a simulator's rules outside the model); the value it held. Unlike
    /// [`Keyspace::entry_mut`], no expiry can change, so the next purge
    /// still skips a key space with nothing expired.
    pub fn replace_value(&mut self, now: i64, key: &[u8], value: Value) -> Option<Value> {
        self.live_mut(now, key)
            .map(|entry| std::mem::replace(&mut entry.value, value))
    }

    /// The value of the live entry at `key`, to change in place, and its
    /// expiry, in one lookup (for a simulator's rules outside the model).
    /// As with [`Keyspace::replace_value`], no expiry can change.
    pub fn value_mut(&mut self, now: i64, key: &[u8]) -> Option<(&mut Value, Option<i64>)> {
        self.live_mut(now, key)
            .map(|entry| (&mut entry.value, entry.expires_at))
    }

    /// The live entry at `key`, in one lookup: an expired one stays in the
    /// map (unseen) until it is overwritten, deleted or purged.
    fn live_mut(&mut self, now: i64, key: &[u8]) -> Option<&mut Entry> {
        self.map.get_mut(key).filter(|e| !expired(e, now))
    }

    /// `GET`: the string at `key`.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a sorted set.
    #[inline]
    pub fn get(&self, now: i64, key: &[u8]) -> Res<Option<&[u8]>> {
        match self.entry(now, key) {
            None => Ok(None),
            Some(Entry {
                value: Value::Str(v),
                ..
            }) => Ok(Some(v.as_slice())),
            Some(_) => Err(CallError::WrongType),
        }
    }

    /// `SET key value [PX px]`: replaces any value of any type; without
    /// `px` the key never expires.
    pub fn set(&mut self, now: i64, key: &[u8], value: &[u8], px: Option<i64>) {
        let expires_at = px.map(|px| now.saturating_add(px));
        self.expires(expires_at);
        match self.map.get_mut(key) {
            // The key's and the string's buffers are kept.
            Some(Entry {
                value: Value::Str(v),
                expires_at: at,
            }) => {
                v.clear();
                v.extend_from_slice(value);
                *at = expires_at;
            }
            Some(slot) => {
                *slot = Entry {
                    value: Value::Str(value.to_vec()),
                    expires_at,
                };
            }
            None => {
                let entry = Entry {
                    value: Value::Str(self.buffer(value)),
                    expires_at,
                };
                self.add_key(key, entry);
            }
        }
    }

    /// `SET key value PX px` (`px` > 0) where the string at `key` may
    /// already be `value`: when a live string is there and `same` says it
    /// is the value, only its expiry is set (in one lookup); whether it
    /// was (else nothing changed and the caller sets the value).
    pub(crate) fn set_expiry_if(
        &mut self,
        now: i64,
        key: &[u8],
        px: i64,
        same: impl FnOnce(&[u8]) -> bool,
    ) -> bool {
        debug_assert!(px > 0, "SET takes a positive PX");
        let at = now.saturating_add(px);
        match self.live_mut(now, key) {
            Some(Entry {
                value: Value::Str(v),
                expires_at,
            }) if same(v) => *expires_at = Some(at),
            _ => return false,
        }
        self.expires(Some(at));
        true
    }

    /// `DEL`: whether a live key was there.
    pub fn del(&mut self, now: i64, key: &[u8]) -> bool {
        self.remove(now, key)
    }

    /// `INCR`: the string at `key` as a canonical integer plus one (a
    /// missing key counts as 0); the expiry stays.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`], [`CallError::NotInteger`],
    /// [`CallError::Overflow`], as Redis.
    pub fn incr(&mut self, now: i64, key: &[u8]) -> Res<i64> {
        let current = match self.live_mut(now, key) {
            None => 0,
            Some(Entry {
                value: Value::Str(v),
                ..
            }) => parse_i64(v).ok_or(CallError::NotInteger)?,
            Some(_) => return Err(CallError::WrongType),
        };
        let next = current.checked_add(1).ok_or(CallError::Overflow)?;
        let digits = super::lua::Decimal::of(next);
        match self.live_mut(now, key) {
            // The expiry stays.
            Some(Entry {
                value: Value::Str(v),
                ..
            }) => {
                v.clear();
                v.extend_from_slice(digits.bytes());
            }
            _ => {
                let entry = Entry {
                    value: Value::Str(self.buffer(digits.bytes())),
                    expires_at: None,
                };
                self.add_key(key, entry);
            }
        }
        Ok(next)
    }

    /// `PEXPIRE key ms`: whether the key was there. A time not after now
    /// deletes it, as Redis does.
    pub fn pexpire(&mut self, now: i64, key: &[u8], ms: i64) -> bool {
        let Some(entry) = self.live_mut(now, key) else {
            return false;
        };
        if ms <= 0 {
            self.remove(now, key);
        } else {
            let at = now.saturating_add(ms);
            entry.expires_at = Some(at);
            self.expires(Some(at));
        }
        true
    }

    fn zset_mut(&mut self, now: i64, key: &[u8]) -> Res<Option<&mut Members>> {
        match self.live_mut(now, key) {
            None => Ok(None),
            Some(Entry {
                value: Value::Zset(members),
                ..
            }) => Ok(Some(members)),
            Some(_) => Err(CallError::WrongType),
        }
    }

    /// `ZCARD`.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zcard(&mut self, now: i64, key: &[u8]) -> Res<usize> {
        Ok(self.zset_mut(now, key)?.map_or(0, |m| m.len()))
    }

    /// `ZSCORE`.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zscore(&mut self, now: i64, key: &[u8], member: &[u8]) -> Res<Option<f64>> {
        Ok(self
            .zset_mut(now, key)?
            .and_then(|m| m.iter().find(|(_, x)| x == member).map(|(s, _)| *s)))
    }

    /// `ZADD key score member` (a new set never expires): whether the
    /// member is new.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zadd(&mut self, now: i64, key: &[u8], score: f64, member: &[u8]) -> Res<bool> {
        let members = match self.zset_mut(now, key)? {
            Some(members) => members,
            None => {
                let entry = Entry {
                    value: Value::Zset(Vec::new()),
                    expires_at: None,
                };
                self.add_key(key, entry);
                match self.map.get_mut(key) {
                    Some(Entry {
                        value: Value::Zset(members),
                        ..
                    }) => members,
                    _ => return Ok(true),
                }
            }
        };
        Ok(put_member(members, score, member))
    }

    /// `ZREMRANGEBYSCORE key -inf max`, then `ZADD key score member`, then
    /// `ZRANGE key -1 -1 WITHSCORES` (the last score), in one lookup while
    /// the set is not emptied (an emptied set is deleted, then created).
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string (nothing changes).
    pub(crate) fn zadd_after_upto(
        &mut self,
        now: i64,
        key: &[u8],
        max: f64,
        score: f64,
        member: &[u8],
    ) -> Res<f64> {
        if let Some(members) = self.zset_mut(now, key)? {
            members.retain(|(s, _)| *s > max);
            if !members.is_empty() {
                put_member(members, score, member);
                return Ok(members.last().map_or(score, |(s, _)| *s));
            }
            self.remove(now, key);
        }
        self.zadd(now, key, score, member)?;
        Ok(score)
    }

    /// `ZREMRANGEBYSCORE key -inf max`, then `ZREM key member`, then
    /// `ZRANGE key -1 -1 WITHSCORES` (the last score), in one lookup; an
    /// emptied set is deleted.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string (nothing changes).
    pub(crate) fn zrem_after_upto(
        &mut self,
        now: i64,
        key: &[u8],
        max: f64,
        member: &[u8],
    ) -> Res<Option<f64>> {
        let last = match self.zset_mut(now, key)? {
            Some(members) => {
                members.retain(|(s, m)| *s > max && m != member);
                members.last().map(|(s, _)| *s)
            }
            None => return Ok(None),
        };
        if last.is_none() {
            self.remove(now, key);
        }
        Ok(last)
    }

    /// `ZREMRANGEBYSCORE key -inf max`; an emptied set is deleted.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zrem_upto(&mut self, now: i64, key: &[u8], max: f64) -> Res<()> {
        let empty = match self.zset_mut(now, key)? {
            Some(members) => {
                members.retain(|(s, _)| *s > max);
                members.is_empty()
            }
            None => false,
        };
        if empty {
            self.remove(now, key);
        }
        Ok(())
    }

    /// `ZREM key member`; an emptied set is deleted.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zrem(&mut self, now: i64, key: &[u8], member: &[u8]) -> Res<()> {
        let empty = match self.zset_mut(now, key)? {
            Some(members) => {
                members.retain(|(_, m)| m != member);
                members.is_empty()
            }
            None => false,
        };
        if empty {
            self.remove(now, key);
        }
        Ok(())
    }

    /// `ZRANGE key -1 -1 WITHSCORES`: the last member's score.
    ///
    /// # Errors
    ///
    /// [`CallError::WrongType`] for a string.
    pub fn zlast_score(&mut self, now: i64, key: &[u8]) -> Res<Option<f64>> {
        Ok(self
            .zset_mut(now, key)?
            .and_then(|m| m.last().map(|(s, _)| *s)))
    }
}

/// Whether `key` is counted in [`Keyspace::format_keys`].
fn is_format(key: &[u8]) -> bool {
    key.ends_with(FORMAT_SUFFIX.as_bytes())
}

fn expired(entry: &Entry, now: i64) -> bool {
    entry.expires_at.is_some_and(|at| now > at)
}

/// Adds `member` with `score` to a set's `members` (moved if there):
/// whether it is new.
fn put_member(members: &mut Members, score: f64, member: &[u8]) -> bool {
    let before = members.len();
    members.retain(|(_, m)| m != member);
    let new = members.len() == before;
    let at = members
        .iter()
        .position(|(s, m)| order(*s, m, score, member).is_gt())
        .unwrap_or(members.len());
    members.insert(at, (score, member.to_vec()));
    new
}

/// Redis's sorted-set order: by score, then by member bytes.
fn order(a: f64, am: &[u8], b: f64, bm: &[u8]) -> std::cmp::Ordering {
    a.total_cmp(&b).then_with(|| am.cmp(bm))
}

/// Redis's `string2ll`: an optional `-`, then `0` alone or digits without
/// a leading zero, in range.
fn parse_i64(v: &[u8]) -> Option<i64> {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    let canonical = match digits {
        [b'0'] => v.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical || v.len() > 20 {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_lives_through_its_last_millisecond() {
        let mut keys = Keyspace::new();
        keys.set(100, b"k", b"v", Some(5));
        assert_eq!(keys.get(105, b"k"), Ok(Some(&b"v"[..])));
        assert_eq!(keys.get(106, b"k"), Ok(None));
    }

    #[test]
    fn incr_takes_canonical_integers_only_and_keeps_the_expiry() {
        let mut keys = Keyspace::new();
        for bad in [&b"007"[..], b"+1", b" 1", b"", b"-0", b"1.0"] {
            keys.set(0, b"c", bad, None);
            assert_eq!(keys.incr(0, b"c"), Err(CallError::NotInteger), "{bad:?}");
        }
        keys.set(0, b"c", b"41", Some(10));
        assert_eq!(keys.incr(0, b"c"), Ok(42));
        assert_eq!(keys.entry(0, b"c").and_then(|e| e.expires_at), Some(10));
        keys.set(0, b"c", b"9223372036854775807", None);
        assert_eq!(keys.incr(0, b"c"), Err(CallError::Overflow));
        keys.zadd(0, b"z", 1.0, b"m").ok();
        assert_eq!(keys.incr(0, b"z"), Err(CallError::WrongType));
    }

    #[test]
    fn purge_drops_exactly_the_expired_keys() {
        let mut keys = Keyspace::new();
        keys.set(0, b"late", b"v", Some(100));
        keys.purge(50);
        keys.set(50, b"soon", b"v", Some(10));
        keys.set(50, b"never", b"v", None);
        keys.purge(60);
        assert_eq!(keys.map.len(), 3, "nothing expired at 60");
        keys.purge(61);
        assert!(!keys.map.contains_key(&b"soon"[..]));
        keys.pexpire(61, b"never", 5);
        keys.insert(
            b"put",
            Entry {
                value: Value::Str(b"v".to_vec()),
                expires_at: Some(63),
            },
        );
        keys.purge(64);
        assert_eq!(keys.map.len(), 2, "put went at 64");
        keys.purge(67);
        assert_eq!(keys.map.len(), 1, "never went at 67");
        if let Some(e) = keys.entry_mut(67, b"late") {
            e.expires_at = Some(70);
        }
        keys.purge(71);
        assert_eq!(keys.map.len(), 0);
    }

    #[test]
    fn format_keys_are_counted_while_in_the_map() {
        let mut keys = Keyspace::new();
        let format = format!("r{FORMAT_SUFFIX}");
        let format = format.as_bytes();
        keys.set(0, b"r", b"t", Some(5));
        assert!(!keys.may_hold_format_keys());
        keys.set(0, format, b"2", Some(5));
        keys.set(1, format, b"3", None);
        assert_eq!(keys.format_keys, 1);
        keys.del(1, format);
        assert!(!keys.may_hold_format_keys());
        keys.incr(1, format).ok();
        keys.pexpire(1, format, 5);
        keys.purge(6);
        assert_eq!(keys.format_keys, 1, "live until 6");
        keys.purge(7);
        assert!(!keys.may_hold_format_keys());
        keys.zadd(7, format, 1.0, b"m").ok();
        keys.insert(
            b"s\x1fformat",
            Entry {
                value: Value::Str(b"1".to_vec()),
                expires_at: None,
            },
        );
        assert_eq!(keys.format_keys, 2);
        keys.zrem(7, format, b"m").ok();
        assert_eq!(keys.format_keys, 1);
        keys.clear();
        assert!(!keys.may_hold_format_keys());
        // A key written over its expired entry is counted once.
        keys.set(0, format, b"1", Some(1));
        keys.incr(5, format).ok();
        keys.del(5, format);
        keys.zadd(0, format, 1.0, b"m").ok();
        keys.pexpire(0, format, 1);
        keys.zadd(5, format, 1.0, b"m").ok();
        keys.del(5, format);
        assert!(!keys.may_hold_format_keys());
    }

    #[test]
    fn the_combined_sorted_set_calls_are_the_calls_in_turn() {
        let sets: [&[(f64, &[u8])]; 5] = [
            &[],
            &[(1.0, b"a")],
            &[(1.0, b"a"), (9.0, b"t")],
            &[(9.0, b"t")],
            &[(2.0, b"b"), (7.0, b"c"), (8.0, b"t")],
        ];
        for members in sets {
            for expires_at in [None, Some(20)] {
                let mut keys = Keyspace::new();
                for &(score, m) in members {
                    keys.zadd(0, b"z", score, m).ok();
                }
                if let (Some(at), Some(e)) = (expires_at, keys.entry_mut(0, b"z")) {
                    e.expires_at = Some(at);
                }
                keys.set(0, b"s", b"v", None);
                let (mut one, mut turn) = (keys.clone(), keys.clone());
                let mut each = turn.clone();
                assert_eq!(one.zadd_after_upto(5, b"z", 5.0, 30.0, b"t"), {
                    turn.zrem_upto(5, b"z", 5.0).ok();
                    turn.zadd(5, b"z", 30.0, b"t").ok();
                    turn.zlast_score(5, b"z").map(|s| s.unwrap_or(30.0))
                });
                assert_eq!(one.map, turn.map, "{members:?}");
                let mut one = keys.clone();
                assert_eq!(one.zrem_after_upto(5, b"z", 5.0, b"t"), {
                    each.zrem_upto(5, b"z", 5.0).ok();
                    each.zrem(5, b"z", b"t").ok();
                    each.zlast_score(5, b"z")
                });
                assert_eq!(one.map, each.map, "{members:?}");
            }
        }
        let mut keys = Keyspace::new();
        keys.set(0, b"s", b"v", None);
        assert_eq!(
            keys.zadd_after_upto(0, b"s", 0.0, 1.0, b"m"),
            Err(CallError::WrongType)
        );
        assert_eq!(
            keys.zrem_after_upto(0, b"s", 0.0, b"m"),
            Err(CallError::WrongType)
        );
        assert_eq!(keys.get(0, b"s"), Ok(Some(&b"v"[..])));
    }

    #[test]
    fn sorted_sets_order_by_score_then_member_and_vanish_when_empty() {
        let mut keys = Keyspace::new();
        for (score, member) in [(5.0, &b"b"[..]), (5.0, b"a"), (1.0, b"z")] {
            keys.zadd(0, b"z", score, member).ok();
        }
        assert_eq!(keys.zlast_score(0, b"z"), Ok(Some(5.0)));
        keys.zrem_upto(0, b"z", 4.0).ok();
        assert_eq!(keys.zcard(0, b"z"), Ok(2));
        keys.zrem(0, b"z", b"a").ok();
        keys.zrem(0, b"z", b"b").ok();
        assert!(keys.entry(0, b"z").is_none());
        assert_eq!(keys.get(0, b"z"), Ok(None));
    }
}
