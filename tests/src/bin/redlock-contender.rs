//! A process that contends for one key, as one of several application
//! processes would: a manager with the library's defaults (wake-ups on
//! unless the second argument is `poll`), one thread looping `lock` then
//! `release` until the given wall-clock time, then printing how many times
//! it held the lock and how many of its pauses a release notification cut
//! short. `redis_wake.rs` runs several of them against real servers.
//!
//! Usage: `redlock-contender KEY wake|poll UNTIL_UNIX_MS URL...`

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use redlock_redis::Redlock;

fn now_ms() -> anyhow::Result<u128> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = || anyhow::anyhow!("usage: KEY wake|poll UNTIL_UNIX_MS URL...");
    let key = args.next().ok_or_else(usage)?;
    let wake_ups = args.next().ok_or_else(usage)? == "wake";
    let until: u128 = args
        .next()
        .ok_or_else(usage)?
        .parse()
        .context("UNTIL_UNIX_MS")?;
    let urls: Vec<String> = args.collect();
    let locks = Redlock::builder(Vec::new())
        .wake_ups(wake_ups)
        .connect(&urls)?;
    let mut held = 0u64;
    while now_ms()? < until {
        let lock = locks.lock(key.as_str(), Duration::from_secs(10))?;
        held += 1;
        lock.release()?;
    }
    println!("{held} {}", locks.stats().manager.woken);
    Ok(())
}
