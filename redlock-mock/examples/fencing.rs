//! Fencing tokens: a holder that stalls past its validity is stopped by the
//! storage, which rejects writes carrying a lower token than one it has seen.
//!
//! Run with `cargo run --example fencing` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::Mutex;
use std::time::Duration;

use redlock_core::{FencingToken, Redlock};
use redlock_mock::MockCluster;

/// Storage that remembers the highest token it accepted.
#[derive(Default)]
struct Storage {
    highest: Option<FencingToken>,
    value: String,
}

impl Storage {
    fn write(&mut self, token: FencingToken, value: &str) -> Result<(), String> {
        if self.highest.is_some_and(|seen| token < seen) {
            return Err(format!(
                "rejected write with token {token}: already saw {}",
                self.highest.map_or(0, |t| t.value())
            ));
        }
        self.highest = Some(token);
        self.value = value.to_owned();
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends()).fencing(true).build()?;
    let storage = Mutex::new(Storage::default());
    let ttl = Duration::from_millis(100);

    let a = locks.try_lock("config", ttl)?;
    let token_a = a
        .fencing_token()
        .ok_or_else(|| anyhow::anyhow!("fencing is on"))?;
    println!("client A holds the lock with token {token_a}, then stalls (a GC pause, say)");
    std::thread::sleep(ttl * 2);
    println!("A's lock expired: is_valid() = {}", a.is_valid());

    let b = locks.lock("config", ttl)?;
    let token_b = b
        .fencing_token()
        .ok_or_else(|| anyhow::anyhow!("fencing is on"))?;
    println!("client B takes the lock with token {token_b}");
    storage
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .write(token_b, "B's config")
        .map_err(anyhow::Error::msg)?;
    println!("B writes with token {token_b}: accepted");

    let late = storage
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .write(token_a, "A's stale config");
    match late {
        Err(why) => println!("A wakes up and writes with token {token_a}: {why}"),
        Ok(()) => anyhow::bail!("the stale write was accepted"),
    }
    println!(
        "storage holds: {}",
        storage
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .value
    );
    drop((a, b));
    Ok(())
}
