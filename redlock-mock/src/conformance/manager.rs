//! The suite's checks through the manager (the behaviour users see).

use std::time::Duration;

use redlock_core::backend::{Fencing, LockBackend, SharedClaims};
use redlock_core::{LockError, Redlock};

use super::failure::{bail, ensure, Context as _};
use super::{Conformance, Result, EXPIRY_BOUND, TTL};

impl<B: LockBackend + 'static> Conformance<B> {
    /// Lock, check validity, release; the key is free again afterwards.
    pub fn manager_lock_cycle(&self) -> Result<()> {
        let locks = self.manager(3)?;
        let key = self.key("cycle");
        for _ in 0..5 {
            let lock = locks.try_lock(key.as_str(), TTL)?;
            ensure!(
                lock.is_valid() && lock.validity() <= TTL,
                "bad validity {:?}",
                lock.validity()
            );
            lock.release()?;
        }
        let lock = locks.try_lock([self.key("cycle-a"), self.key("cycle-b")], TTL)?;
        drop(lock);
        ensure!(
            locks.flush(Duration::from_secs(5)),
            "nodes did not catch up"
        );
        locks.try_lock(self.key("cycle-b"), TTL)?.release()?;
        Ok(())
    }

    /// A held lock is refused to a second manager until released.
    pub fn manager_contention_and_handover(&self) -> Result<()> {
        let (first, second) = (self.manager(5)?, self.manager(5)?);
        let key = self.key("handover");
        let lock = first.try_lock(key.as_str(), TTL)?;
        match second.try_lock(key.as_str(), TTL) {
            Err(LockError::Contended(report)) => {
                ensure!(
                    report.refused() >= 3,
                    "contention with only {} refusals",
                    report.refused()
                );
            }
            Err(e) => bail!("expected Contended, got {e}"),
            Ok(_) => bail!("two managers held the same lock"),
        }
        lock.release()?;
        second
            .lock_timeout(key.as_str(), TTL, Duration::from_secs(5))?
            .release()?;
        Ok(())
    }

    /// Extend keeps a lock past its first TTL; once expired, extend and
    /// release report not held.
    pub fn manager_extend_and_expiry(&self) -> Result<()> {
        let locks = self.manager(3)?;
        let key = self.key("lifetime");
        let short = Duration::from_millis(300);
        let mut lock = locks.try_lock(key.as_str(), short)?;
        let validity = lock.extend(TTL)?;
        ensure!(
            validity > short,
            "extend did not lengthen validity: {validity:?}"
        );
        lock.release()?;
        let mut lock = locks.try_lock(key.as_str(), Duration::from_millis(100))?;
        let other = self.manager(3)?;
        other
            .lock_timeout(key.as_str(), TTL, EXPIRY_BOUND)?
            .release()?;
        match lock.extend(TTL) {
            Err(LockError::NotHeld(_)) => {}
            other => bail!("extend after expiry: expected NotHeld, got {other:?}"),
        }
        ensure!(!lock.is_valid(), "an expired lock still claims validity");
        match lock.release() {
            Err(LockError::NotHeld(_)) => Ok(()),
            other => bail!("release after expiry: expected NotHeld, got {other:?}"),
        }
    }

    /// A semaphore admits its permits and no more, across managers; it is
    /// built on the backend's one-key acquire (the base contract).
    pub fn manager_semaphore(&self) -> Result<()> {
        let (first, second) = (self.manager(3)?, self.manager(3)?);
        let name = self.key("semaphore");
        let a = first.semaphore(&name, 2)?.try_acquire(TTL)?;
        let b = second.semaphore(&name, 2)?.try_acquire(TTL)?;
        ensure!(a.slot() != b.slot(), "two holders of permit {}", a.slot());
        match second.semaphore(&name, 2)?.try_acquire(TTL) {
            Err(LockError::Contended(_)) => {}
            Err(e) => bail!("a third permit: expected Contended, got {e}"),
            Ok(_) => bail!("a semaphore of 2 admitted 3"),
        }
        a.release()?;
        b.release()?;
        Ok(())
    }
}

impl<B: Fencing + 'static> Conformance<B> {
    /// (Backends with fencing.) Through a manager with fencing on, each
    /// holder's token is larger than the last one's, across managers.
    pub fn manager_fencing_tokens_rise(&self) -> Result<()> {
        let build = || -> Result<Redlock<B>> {
            Ok(Redlock::builder((self.make)(3))
                .node_timeout(Duration::from_secs(2))
                .fencing(true)
                .build()?)
        };
        let (first, second) = (build()?, build()?);
        let name = self.key("fenced");
        let a = first.try_lock(name.as_str(), TTL)?;
        let ta = a.fencing_token().context("fencing is on: a token")?;
        a.release()?;
        let b = second.try_lock(name.as_str(), TTL)?;
        let tb = b.fencing_token().context("fencing is on: a token")?;
        b.release()?;
        ensure!(tb > ta, "a later holder's token {tb} is not above {ta}");
        Ok(())
    }
}

impl<B: SharedClaims + 'static> Conformance<B> {
    /// (Backends with shared claims.) A read-write lock, built on shared
    /// claims, admits readers together and a writer alone, across managers.
    pub fn manager_rwlock(&self) -> Result<()> {
        let (first, second) = (self.manager(3)?, self.manager(3)?);
        let name = self.key("rwlock");
        let (one, two) = (first.rwlock(&name)?, second.rwlock(&name)?);
        let r1 = one.try_read(TTL)?;
        let r2 = two.try_read(TTL)?;
        let r3 = second.try_read(&name, TTL)?;
        r3.release()?;
        match two.try_write(TTL) {
            Err(LockError::Contended(_)) => {}
            Err(e) => bail!("a write over readers: expected Contended, got {e}"),
            Ok(_) => bail!("a writer was admitted with readers inside"),
        }
        r1.release()?;
        r2.release()?;
        let w = two.try_write(TTL)?;
        match one.try_read(TTL) {
            Err(LockError::Contended(_)) => {}
            Err(e) => bail!("a read under a writer: expected Contended, got {e}"),
            Ok(_) => bail!("a reader was admitted with a writer inside"),
        }
        w.release()?;
        Ok(())
    }
}
