//! Every lock attempt of a run: its token and keys, shared by its messages,
//! and what became of it (for the checker).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use redlock_core::backend::TOKEN_LEN;

/// Where a lock attempt stands, as far as the leftover check goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Its acquisition is under way.
    Trying,
    /// Its client holds it.
    Held,
    /// Its client gave it up: released it, or abandoned a failed round
    /// (released on every node).
    GivenUp,
    /// Its client crashed while trying or holding: its keys wait for the TTL.
    Crashed,
}

/// One lock attempt (one token).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockRec {
    pub(crate) token: [u8; TOKEN_LEN],
    pub(crate) mask: u8,
    pub(crate) client: u8,
    pub(crate) fate: Fate,
    /// The nodes where a release of it ran (bit per node).
    pub(crate) released_on: u32,
    /// The nodes a release of it reached (up or down), bit per node.
    pub(crate) release_landed: u32,
    /// The nodes a release of it was lost on the way to.
    pub(crate) release_lost: u32,
    /// The nodes a release of it never left for: still queued on its
    /// process's worker when the process's exit deadline passed.
    pub(crate) release_died: u32,
    /// The nodes a release of it was not sent to (they refused its winning
    /// round: `Lease::skips`).
    pub(crate) release_skipped: u32,
    /// A hand-off's claim: the lock whose release it was queued behind.
    pub(crate) handed_from: Option<u32>,
    /// Its claim is shared (a read of a read-write lock).
    pub(crate) shared: bool,
}

/// The attempts of a run, numbered in the order their tokens were made,
/// and found by token: the nodes keep tokens, not lock numbers (with
/// unique tokens, the scenarios' default, a token is one attempt's; with
/// `unique_tokens` off, the latest attempt with it).
#[derive(Debug, Default)]
pub(crate) struct Locks(Vec<LockRec>, HashMap<[u8; TOKEN_LEN], u32, Tokens>);

/// The hasher of the locks' tokens: a multiply-rotate over their bytes
/// (the map is only looked up, never iterated: its hasher changes
/// nothing but the cost; a run's tokens start with their lock number).
#[derive(Debug, Default, Clone, Copy)]
struct Tokens;

#[derive(Debug, Default, Clone, Copy)]
struct TokenHasher(u64);

impl BuildHasher for Tokens {
    type Hasher = TokenHasher;

    fn build_hasher(&self) -> TokenHasher {
        TokenHasher(0)
    }
}

impl TokenHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for TokenHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let mut word = [0u8; 8];
        let rest = chunks.remainder();
        word[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(word));
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        // The table takes its index from the low bits: fold the high in.
        self.0 ^ (self.0 >> 29)
    }
}

impl Locks {
    pub(crate) fn new() -> Self {
        Locks(
            Vec::with_capacity(64),
            HashMap::with_capacity_and_hasher(64, Tokens),
        )
    }

    /// The attempt with `token` (the latest, if several share it).
    pub(crate) fn by_token(&self, token: &[u8; TOKEN_LEN]) -> Option<u32> {
        self.1.get(token).copied()
    }

    /// Records a new attempt; returns its number.
    pub(crate) fn add(&mut self, token: [u8; TOKEN_LEN], mask: u8, client: u8) -> u32 {
        let lock = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
        self.1.insert(token, lock);
        self.0.push(LockRec {
            token,
            mask,
            client,
            fate: Fate::Trying,
            released_on: 0,
            release_landed: 0,
            release_lost: 0,
            release_died: 0,
            release_skipped: 0,
            handed_from: None,
            shared: false,
        });
        lock
    }

    /// The number the next attempt will get.
    pub(crate) fn next(&self) -> u32 {
        u32::try_from(self.0.len()).unwrap_or(u32::MAX)
    }

    pub(crate) fn get(&self, lock: u32) -> Option<&LockRec> {
        self.0.get(lock as usize)
    }

    pub(crate) fn get_mut(&mut self, lock: u32) -> Option<&mut LockRec> {
        self.0.get_mut(lock as usize)
    }

    /// Sets the fate of `lock` (a crash does not undo a give-up: its
    /// release was sent already).
    pub(crate) fn set_fate(&mut self, lock: u32, fate: Fate) {
        if let Some(rec) = self.get_mut(lock) {
            if !(fate == Fate::Crashed && rec.fate == Fate::GivenUp) {
                rec.fate = fate;
            }
        }
    }
}
