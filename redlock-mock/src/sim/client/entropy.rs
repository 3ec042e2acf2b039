//! A client's randomness for the machines: tokens, fencing holder ids and
//! jitter from its seeded stream, each token recorded as a lock attempt.

use redlock_core::backend::{Token, TOKEN_LEN};
use redlock_core::engine::Entropy;
use redlock_core::EntropyError;

use crate::sim::locks::Locks;
use crate::sim::rng::SimRng;

/// [`Entropy`] over a client's [`SimRng`]. Every token is a new lock
/// attempt in `locks` (its number is left in `issued` for the driver to
/// pair with the claim it sees in the next transmit). Unique tokens carry
/// the attempt's number and the client; with `unique` off, every client
/// uses the same token for the same cycle number (out of model).
pub(super) struct SimEntropy<'a> {
    pub(super) rng: &'a mut SimRng,
    pub(super) locks: &'a mut Locks,
    pub(super) issued: &'a mut Option<u32>,
    pub(super) client: u8,
    pub(super) mask: u8,
    pub(super) cycle: u32,
    pub(super) unique: bool,
}

impl Entropy for SimEntropy<'_> {
    fn token(&mut self) -> Result<Token, EntropyError> {
        let lock = self.locks.next();
        let mut bytes = [0u8; TOKEN_LEN];
        if self.unique {
            bytes[..4].copy_from_slice(&lock.to_le_bytes());
            bytes[4] = self.client;
            for chunk in bytes[5..].chunks_mut(8) {
                let r = self.rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
        } else {
            bytes = [self.cycle as u8; TOKEN_LEN];
        }
        *self.issued = Some(self.locks.add(bytes, self.mask, self.client));
        Ok(Token::from_bytes(bytes))
    }

    fn holder(&mut self) -> Result<u64, EntropyError> {
        Ok(self.rng.next_u64())
    }

    fn jitter(&mut self) -> u64 {
        self.rng.next_u64()
    }
}
