//! Fencing tokens on Redis, checked by the store the lock protects.
//!
//! A lock alone cannot stop a holder that pauses (a GC pause, a suspended
//! VM, SIGSTOP) past its validity and then writes: by then another client
//! holds the lock. With fencing on, every lock carries a token that rises
//! from holder to holder; the client sends it with each write, and the
//! store refuses a write whose token is lower than one it has seen. Here
//! client A stalls past its TTL, client B takes the lock and writes, and A's
//! late write is refused.
//!
//! The masters come from `REDLOCK_SERVERS`, comma-separated:
//!
//! ```text
//! REDLOCK_SERVERS=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
//!   cargo run -p redlock-redis --example fencing_store
//! ```
//!
//! Without it, the example says how to start throwaway servers and exits
//! with 64 (`EX_USAGE`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use redlock_redis::{FencingToken, Redlock};

mod common;
use common::{servers, EX_USAGE};

const RESOURCE: &str = "redlock-example:config";
const TTL: Duration = Duration::from_secs(2);

/// The protected resource: a toy store that remembers the highest token it
/// accepted and refuses writes with a lower one. A real store does the same
/// check atomically with the write (a conditional UPDATE, a compare-and-set,
/// an object store's precondition).
#[derive(Debug, Default)]
struct Store {
    highest: Option<FencingToken>,
    value: String,
}

/// A write the store refused.
#[derive(Debug)]
struct Refused {
    token: FencingToken,
    highest: FencingToken,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refused: token {} is older than {} already seen",
            self.token, self.highest
        )
    }
}

impl std::error::Error for Refused {}

impl Store {
    fn write(&mut self, token: FencingToken, value: &str) -> Result<(), Refused> {
        if let Some(highest) = self.highest.filter(|highest| token < *highest) {
            return Err(Refused { token, highest });
        }
        self.highest = Some(token);
        self.value = value.to_owned();
        Ok(())
    }
}

/// A client's manager: one per process, with fencing on (a second round
/// per acquire, to raise the counters).
fn client(urls: &[String]) -> anyhow::Result<Redlock> {
    Redlock::builder([])
        .fencing(true)
        // Generous for a loaded machine; on a LAN tens of milliseconds do.
        .node_timeout(Duration::from_millis(500))
        .acquire_timeout(Duration::from_secs(30))
        .connect(urls)
        .context("connect to the masters")
}

fn main() -> anyhow::Result<ExitCode> {
    let urls = match servers("fencing_store") {
        Ok(urls) => urls,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(EX_USAGE));
        }
    };
    // Two clients, as two processes would be.
    let (client_a, client_b) = (client(&urls)?, client(&urls)?);
    let store = Mutex::new(Store::default());
    let write = |token: FencingToken, value: &str| -> anyhow::Result<Result<(), Refused>> {
        Ok(store
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .write(token, value))
    };

    // A takes the lock, writes once, then stalls past its TTL.
    let a = client_a.lock(RESOURCE, TTL)?;
    let token_a = a
        .fencing_token()
        .context("fencing is on: every lock has a token")?;
    write(token_a, "A's first config")??;
    println!("client A holds the lock with token {token_a} and writes: accepted");
    println!(
        "client A stalls (a GC pause, say) past its {} ms TTL",
        TTL.as_millis()
    );
    std::thread::sleep(TTL + Duration::from_millis(200));
    ensure!(!a.is_valid(), "A's validity should be over");
    println!("client A's lock expired: is_valid() = {}", a.is_valid());

    // B takes the lock (free once A's keys expired) and writes.
    let b = client_b.lock(RESOURCE, Duration::from_secs(10))?;
    let token_b = b
        .fencing_token()
        .context("fencing is on: every lock has a token")?;
    println!("client B takes the lock with token {token_b}");
    ensure!(token_b > token_a, "tokens must rise from holder to holder");
    write(token_b, "B's config")??;
    println!("client B writes with token {token_b}: accepted");

    // A wakes up and writes, unaware: the store refuses it. (Checking
    // `a.ensure_held()` first would have told A too, but a pause can fall
    // between that check and the write; the store's check cannot be raced.)
    match write(token_a, "A's stale config")? {
        Err(refused) => println!("client A wakes up and writes with token {token_a}: {refused}"),
        Ok(()) => bail!("the store accepted a stale write"),
    }
    let value = store
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .value
        .clone();
    println!("the store holds: {value}");
    ensure!(value == "B's config", "the store holds {value:?}");

    b.release()?;
    // A's release finds its lock gone: the error says so.
    match a.release() {
        Err(err) => println!("client A's release: {err}"),
        Ok(()) => bail!("A's expired lock was released as if held"),
    }
    println!("done");
    Ok(ExitCode::SUCCESS)
}
