//! The raw references: the same commands as a Redlock cycle (`SET key token
//! NX PX ttl`, then a compare-and-delete script by `EVALSHA`) over
//! persistent blocking connections, with nothing else around them.
//!
//! - sequential: one node after the other, each command waiting for its
//!   reply;
//! - floor: each command written to every node first, then every reply read
//!   (all nodes at once; a cycle waits for all N replies of both phases);
//! - ceiling: one thread plays `k` clients in lockstep: per phase, the `k`
//!   commands bound for a node go out in one write, then all replies are
//!   read. `k` cycles complete per two round trips.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use redis::io::tcp::TcpSettings;
use redis::{Connection, IntoConnectionInfo as _, Value};

use crate::cell::{Cell, Mode, Outcome, TTL};
use crate::measure::{Recorder, Window};
use crate::runner;

/// Deletes the key only while it holds our token.
const RELEASE_LUA: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

/// Connect, read and write timeout of the raw connections.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Which reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Sequential,
    Floor,
    Ceiling,
}

/// A connection to every node, the script loaded on each.
struct Nodes {
    conns: Vec<Connection>,
    sha: String,
    quorum: usize,
    ttl_ms: u64,
}

impl Nodes {
    fn connect(urls: &[String]) -> anyhow::Result<Self> {
        let sha = redis::Script::new(RELEASE_LUA).get_hash().to_owned();
        let mut conns = Vec::with_capacity(urls.len());
        for url in urls {
            let info = url
                .as_str()
                .into_connection_info()?
                .set_tcp_settings(TcpSettings::default().set_nodelay(true));
            let mut conn = redis::Client::open(info)?
                .get_connection_with_timeout(IO_TIMEOUT)
                .with_context(|| format!("connecting to {url}"))?;
            conn.set_read_timeout(Some(IO_TIMEOUT))?;
            conn.set_write_timeout(Some(IO_TIMEOUT))?;
            let loaded: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(RELEASE_LUA)
                .query(&mut conn)?;
            if loaded != sha {
                bail!("SCRIPT LOAD returned {loaded}, expected {sha}");
            }
            conns.push(conn);
        }
        Ok(Nodes {
            quorum: urls.len() / 2 + 1,
            conns,
            sha,
            ttl_ms: u64::try_from(TTL.as_millis())?,
        })
    }

    fn set(&self, key: &str, token: &str) -> Vec<u8> {
        redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl_ms)
            .get_packed_command()
    }

    fn release(&self, key: &str, token: &str) -> Vec<u8> {
        redis::cmd("EVALSHA")
            .arg(&self.sha)
            .arg(1)
            .arg(key)
            .arg(token)
            .get_packed_command()
    }

    /// One cycle, one node after the other; whether a quorum granted and
    /// released.
    fn sequential(&mut self, key: &str, token: &str) -> anyhow::Result<bool> {
        let set = self.set(key, token);
        let mut granted = 0;
        for conn in &mut self.conns {
            conn.send_packed_command(&set)?;
            granted += usize::from(conn.recv_response()? == Value::Okay);
        }
        let release = self.release(key, token);
        let mut released = 0;
        for conn in &mut self.conns {
            conn.send_packed_command(&release)?;
            released += usize::from(conn.recv_response()? == Value::Int(1));
        }
        Ok(granted >= self.quorum && released >= self.quorum)
    }

    /// One cycle, all nodes at once.
    fn floor(&mut self, key: &str, token: &str) -> anyhow::Result<bool> {
        let set = self.set(key, token);
        let granted = self.broadcast(&set, Value::Okay)?;
        let release = self.release(key, token);
        let released = self.broadcast(&release, Value::Int(1))?;
        Ok(granted >= self.quorum && released >= self.quorum)
    }

    /// Writes `packed` to every node, then reads every reply; how many were
    /// `expected`.
    fn broadcast(&mut self, packed: &[u8], expected: Value) -> anyhow::Result<usize> {
        for conn in &mut self.conns {
            conn.send_packed_command(packed)?;
        }
        let mut matched = 0;
        for conn in &mut self.conns {
            matched += usize::from(conn.recv_response()? == expected);
        }
        Ok(matched)
    }

    /// `keys.len()` cycles in lockstep, one write per node per phase; for
    /// each client, whether a quorum granted and released.
    fn lockstep(&mut self, keys: &[String], tokens: &[String]) -> anyhow::Result<Vec<bool>> {
        let sets: Vec<u8> = keys
            .iter()
            .zip(tokens)
            .flat_map(|(key, token)| self.set(key, token))
            .collect();
        let granted = self.pipeline(&sets, keys.len(), &Value::Okay)?;
        let releases: Vec<u8> = keys
            .iter()
            .zip(tokens)
            .flat_map(|(key, token)| self.release(key, token))
            .collect();
        let released = self.pipeline(&releases, keys.len(), &Value::Int(1))?;
        Ok(granted
            .iter()
            .zip(&released)
            .map(|(&g, &r)| g >= self.quorum && r >= self.quorum)
            .collect())
    }

    /// Writes `packed` (`k` commands) to every node in one write each, reads
    /// `k` replies from each; per command, on how many nodes it was
    /// `expected`.
    fn pipeline(
        &mut self,
        packed: &[u8],
        k: usize,
        expected: &Value,
    ) -> anyhow::Result<Vec<usize>> {
        for conn in &mut self.conns {
            conn.send_packed_command(packed)?;
        }
        let mut matched = vec![0; k];
        for conn in &mut self.conns {
            for count in &mut matched {
                *count += usize::from(conn.recv_response()? == *expected);
            }
        }
        Ok(matched)
    }
}

/// Runs one reference shape in `cell`.
pub(crate) fn run(cell: &Cell<'_>, shape: Shape) -> anyhow::Result<Outcome> {
    let (record, usage) = match shape {
        Shape::Sequential | Shape::Floor => {
            runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
                one_client(cell, shape, client, window, rec);
            })?
        }
        Shape::Ceiling => runner::threads(&cell.setup, 1, |_, window, rec| {
            lockstep_clients(cell, window, rec);
        })?,
    };
    Ok(Outcome {
        record,
        usage,
        overlaps: None,
        fair: None,
        procs: None,
        shared: None,
        node_timeouts: None,
    })
}

fn one_client(cell: &Cell<'_>, shape: Shape, client: usize, window: &Window, rec: &mut Recorder) {
    let mut nodes = match Nodes::connect(&cell.urls) {
        Ok(nodes) => nodes,
        Err(e) => return rec.fault(format!("{e:#}")),
    };
    let key = cell.key(client);
    let mut cycle = 0u64;
    while window.open() {
        cycle += 1;
        let token = format!("raw-{client}-{cycle}");
        let started = Instant::now();
        let result = match shape {
            Shape::Sequential => nodes.sequential(&key, &token),
            _ => nodes.floor(&key, &token),
        };
        match result {
            Ok(true) => rec.ok(window, started),
            Ok(false) => rec.error(window, started, "no quorum"),
            // The connections may be out of step now: stop this client.
            Err(e) => return rec.fault(format!("{e:#}")),
        }
    }
}

fn lockstep_clients(cell: &Cell<'_>, window: &Window, rec: &mut Recorder) {
    let k = match cell.mode {
        Mode::Distinct(k) => k,
        _ => 1,
    };
    let mut nodes = match Nodes::connect(&cell.urls) {
        Ok(nodes) => nodes,
        Err(e) => return rec.fault(format!("{e:#}")),
    };
    let keys: Vec<String> = (0..k).map(|client| cell.key(client)).collect();
    let mut cycle = 0u64;
    while window.open() {
        cycle += 1;
        let tokens: Vec<String> = (0..k)
            .map(|client| format!("raw-{client}-{cycle}"))
            .collect();
        let started = Instant::now();
        match nodes.lockstep(&keys, &tokens) {
            Ok(results) => {
                let ended = Instant::now();
                let ok = results.iter().filter(|&&ok| ok).count();
                rec.ok_at(window, started, ended, u64::try_from(ok).unwrap_or(0));
                for _ in ok..k {
                    rec.error(window, started, "no quorum");
                }
            }
            Err(e) => return rec.fault(format!("{e:#}")),
        }
    }
}
