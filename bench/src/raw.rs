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
//! - parked: what a blocking API with a thread per caller can reach at
//!   best. Each client thread hands its command to one I/O thread and parks
//!   until woken with its answer; the I/O thread writes everything handed
//!   to it since its last batch to each node in one write, reads every
//!   reply, and wakes each caller once. No quorum logic, no retry, no
//!   timers: the ceiling plus the parking and waking alone.
//! - parked per node: the same with an I/O thread per node (the shape of
//!   our node workers); a caller is woken by the last of them to answer.
//! - parked, pipelined: one writer thread writes what was handed at once
//!   and takes the next batch while the replies are out; one reader thread
//!   reads them in order and wakes the callers.
//!
//! The ceiling and parked shapes also run with our manager's commands in
//! place of the peers' (`-ours`: `SET key token NX PX ttl GET`, then our
//! release script, as `redlock-redis` writes them for one key on a
//! current server): what the servers' share of our node semantics (the
//! waiting line read on release, the acquire's `GET`) leaves of each bound,
//! with no lock logic around it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use redis::io::tcp::TcpSettings;
use redis::{Connection, IntoConnectionInfo as _, Value};
use redlock_core::model::Command;
use redlock_redis::RELEASE_CHANNEL;

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
    Parked,
    ParkedNodes,
    ParkedPipelined,
    /// The ceiling with our manager's commands.
    CeilingOurs,
    /// The parked shape (one I/O thread) with our manager's commands.
    ParkedOurs,
}

impl Shape {
    /// The commands this reference sends.
    fn commands(self) -> Commands {
        match self {
            Shape::CeilingOurs | Shape::ParkedOurs => Commands::Ours,
            _ => Commands::Peers,
        }
    }
}

/// Which commands a reference sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commands {
    /// The peers': `SET key token NX PX ttl`, then a compare-and-delete.
    Peers,
    /// Our manager's, as `redlock-redis` writes them
    /// ([`redlock_redis::testing::command_words`]): `SET key token NX PX
    /// ttl GET`, then the release script (its waiting line read, nobody
    /// told: no manager waits in these modes).
    Ours,
}

impl Commands {
    /// The release script's source.
    fn release_lua(self) -> String {
        match self {
            Commands::Peers => RELEASE_LUA.to_owned(),
            // `EVAL`, then the script's body.
            Commands::Ours => {
                let body = words(&ours_release(&["k".to_owned()], "t"), true).swap_remove(1);
                String::from_utf8_lossy(&body).into_owned()
            }
        }
    }

    /// The reply a granted acquire gets.
    fn granted(self) -> Expect {
        match self {
            Commands::Peers => Expect::Okay,
            // `GET`: the key's old value, none.
            Commands::Ours => Expect::Nil,
        }
    }
}

/// Our release of `key` held with `token`, alone (no line left, not an
/// election's).
fn ours_release<'a>(keys: &'a [String; 1], token: &'a str) -> Command<'a> {
    Command::Release {
        keys,
        token: token.as_bytes(),
        channel: RELEASE_CHANNEL.as_bytes(),
        leave: None,
        watched: false,
    }
}

/// `command`'s words as `redlock-redis` writes them (`body`: the script's
/// source, not its hash).
fn words(command: &Command<'_>, body: bool) -> Vec<Vec<u8>> {
    redlock_redis::testing::command_words(command, body)
}

/// `words` as one command, packed by redis-rs.
fn pack(words: &[Vec<u8>]) -> Vec<u8> {
    let (name, args) = words.split_first().expect("a command has a name");
    let mut command = redis::cmd(&String::from_utf8_lossy(name));
    for arg in args {
        command.arg(arg.as_slice());
    }
    command.get_packed_command()
}

/// A connection to every node, the script loaded on each.
struct Nodes {
    conns: Vec<Connection>,
    commands: Commands,
    sha: String,
    quorum: usize,
    ttl_ms: u64,
}

impl Nodes {
    fn connect(urls: &[String], commands: Commands) -> anyhow::Result<Self> {
        let lua = commands.release_lua();
        let sha = redis::Script::new(&lua).get_hash().to_owned();
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
                .arg(&lua)
                .query(&mut conn)?;
            if loaded != sha {
                bail!("SCRIPT LOAD returned {loaded}, expected {sha}");
            }
            conns.push(conn);
        }
        Ok(Nodes {
            quorum: urls.len() / 2 + 1,
            conns,
            commands,
            sha,
            ttl_ms: u64::try_from(TTL.as_millis())?,
        })
    }

    /// A copy without connections, to pack the commands.
    fn packer(&self) -> Nodes {
        Nodes {
            conns: Vec::new(),
            commands: self.commands,
            sha: self.sha.clone(),
            quorum: self.quorum,
            ttl_ms: self.ttl_ms,
        }
    }

    fn set(&self, key: &str, token: &str) -> Vec<u8> {
        if self.commands == Commands::Ours {
            let command = Command::SetNxGet {
                key,
                token: token.as_bytes(),
                ttl_ms: self.ttl_ms,
            };
            return pack(&words(&command, false));
        }
        redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl_ms)
            .get_packed_command()
    }

    fn release(&self, key: &str, token: &str) -> Vec<u8> {
        if self.commands == Commands::Ours {
            let keys = [key.to_owned()];
            return pack(&words(&ours_release(&keys, token), false));
        }
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
        let granted = self.pipeline(&sets, keys.len(), self.commands.granted())?;
        let releases: Vec<u8> = keys
            .iter()
            .zip(tokens)
            .flat_map(|(key, token)| self.release(key, token))
            .collect();
        let released = self.pipeline(&releases, keys.len(), Expect::One)?;
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
        expected: Expect,
    ) -> anyhow::Result<Vec<usize>> {
        for conn in &mut self.conns {
            conn.send_packed_command(packed)?;
        }
        let mut matched = vec![0; k];
        for conn in &mut self.conns {
            for count in &mut matched {
                *count += usize::from(expected.is(&conn.recv_response()?));
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
        Shape::Ceiling | Shape::CeilingOurs => {
            runner::threads(&cell.setup, 1, |_, window, rec| {
                lockstep_clients(cell, shape.commands(), window, rec);
            })?
        }
        Shape::Parked | Shape::ParkedOurs => parked(cell, Layout::One, shape.commands())?,
        Shape::ParkedNodes => parked(cell, Layout::PerNode, shape.commands())?,
        Shape::ParkedPipelined => parked(cell, Layout::Pipelined, shape.commands())?,
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
    let mut nodes = match Nodes::connect(&cell.urls, shape.commands()) {
        Ok(nodes) => nodes,
        Err(e) => return rec.fault(format!("{e:#}")),
    };
    cycles(cell, client, window, rec, |key, token| match shape {
        Shape::Sequential => nodes.sequential(key, token),
        _ => nodes.floor(key, token),
    });
}

/// Client `client`'s cycles until the window closes: `cycle(key, token)`
/// says whether a quorum granted and released; an error (the connections
/// may be out of step now) stops the client.
fn cycles(
    cell: &Cell<'_>,
    client: usize,
    window: &Window,
    rec: &mut Recorder,
    mut cycle: impl FnMut(&str, &str) -> anyhow::Result<bool>,
) {
    let key = cell.key(client);
    let mut count = 0u64;
    while window.open() {
        count += 1;
        let token = format!("raw-{client}-{count}");
        let started = Instant::now();
        match cycle(&key, &token) {
            Ok(true) => rec.ok(window, started),
            Ok(false) => rec.error(window, started, "no quorum"),
            Err(e) => return rec.fault(format!("{e:#}")),
        }
    }
}

fn lockstep_clients(cell: &Cell<'_>, commands: Commands, window: &Window, rec: &mut Recorder) {
    let k = match cell.mode {
        Mode::Distinct(k) => k,
        _ => 1,
    };
    let mut nodes = match Nodes::connect(&cell.urls, commands) {
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

/// The reply a parked caller's command counts on.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// `+OK` (a `SET` that set the key).
    Okay,
    /// A nil (a `SET … GET` that set the key: it held nothing).
    Nil,
    /// `:1` (a release that deleted it).
    One,
}

impl Expect {
    fn is(self, reply: &Value) -> bool {
        match self {
            Expect::Okay => *reply == Value::Okay,
            Expect::Nil => *reply == Value::Nil,
            Expect::One => *reply == Value::Int(1),
        }
    }

    /// The reply as its one RESP line.
    fn line(self) -> &'static str {
        match self {
            Expect::Okay => "+OK\r\n",
            Expect::Nil => "$-1\r\n",
            Expect::One => ":1\r\n",
        }
    }
}

/// A command handed to the parked shape's I/O thread.
struct Handed {
    packed: Vec<u8>,
    expected: Expect,
    answer: Arc<Answer>,
}

/// Where the I/O threads leave one caller's answer.
struct Answer {
    caller: Thread,
    /// On how many nodes the reply was the expected one.
    matched: AtomicUsize,
    /// I/O threads yet to answer; the last one wakes the caller.
    remaining: AtomicUsize,
    /// Some I/O thread's connections broke.
    failed: AtomicBool,
}

/// What the callers and one I/O thread share.
struct Hub {
    handed: Mutex<Vec<Handed>>,
    /// Set once the I/O thread is spawned, before any caller runs.
    io: OnceLock<Thread>,
}

/// The hubs of one cell: one I/O thread for all nodes, or one per node.
struct Hubs {
    hubs: Vec<Hub>,
    stop: AtomicBool,
}

/// Stops the I/O threads when dropped, however the cell ends (a failed
/// spawn included): the scope that joins them would wait for ever.
struct StopOnDrop<'a>(&'a Hubs);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Release);
        for io in self.0.hubs.iter().filter_map(|hub| hub.io.get()) {
            io.unpark();
        }
    }
}

impl Hubs {
    /// Hands `packed` to every I/O thread and parks until all answered: on
    /// how many nodes the reply was `expected`, `None` when an I/O thread
    /// failed.
    fn call(&self, answer: &Arc<Answer>, packed: &[u8], expected: Expect) -> Option<usize> {
        answer.matched.store(0, Ordering::Relaxed);
        answer.remaining.store(self.hubs.len(), Ordering::Relaxed);
        for hub in &self.hubs {
            hub.handed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Handed {
                    packed: packed.to_vec(),
                    expected,
                    answer: Arc::clone(answer),
                });
            if let Some(io) = hub.io.get() {
                io.unpark();
            }
        }
        while answer.remaining.load(Ordering::Acquire) > 0 {
            std::thread::park();
        }
        (!answer.failed.load(Ordering::Relaxed)).then(|| answer.matched.load(Ordering::Relaxed))
    }

    /// I/O thread `index`: batches until `stop`.
    fn serve(&self, index: usize, mut nodes: Nodes) {
        let hub = &self.hubs[index];
        let mut batch = Vec::new();
        let mut out = Vec::new();
        let mut failed = false;
        while !self.stop.load(Ordering::Acquire) {
            std::mem::swap(
                &mut batch,
                &mut *hub.handed.lock().unwrap_or_else(PoisonError::into_inner),
            );
            if batch.is_empty() {
                std::thread::park_timeout(Duration::from_millis(10));
                continue;
            }
            let mut matched = vec![0; batch.len()];
            if !failed {
                out.clear();
                for handed in &batch {
                    out.extend_from_slice(&handed.packed);
                }
                failed = nodes.exchange(&out, &batch, &mut matched).is_err();
            }
            answer(batch.drain(..), matched, failed);
        }
    }

    /// The pipelined shape's writer (the hub's I/O thread): writes what was
    /// handed to every node at once, hands the batch to the reader, and
    /// takes the next without waiting for the replies.
    fn write_ahead(&self, mut nodes: Vec<TcpStream>, batches: &mpsc::Sender<Vec<Handed>>) {
        let hub = &self.hubs[0];
        let mut out = Vec::new();
        while !self.stop.load(Ordering::Acquire) {
            let batch =
                std::mem::take(&mut *hub.handed.lock().unwrap_or_else(PoisonError::into_inner));
            if batch.is_empty() {
                std::thread::park_timeout(Duration::from_millis(10));
                continue;
            }
            out.clear();
            for handed in &batch {
                out.extend_from_slice(&handed.packed);
            }
            if nodes
                .iter_mut()
                .try_for_each(|node| node.write_all(&out))
                .is_err()
            {
                let matched = vec![0; batch.len()];
                answer(batch.into_iter(), matched, true);
            } else if batches.send(batch).is_err() {
                return;
            }
        }
    }
}

/// The pipelined shape's reader: reads each batch's replies, in the order
/// the batches were written, one line each (the references' replies are
/// all one line), and wakes their callers.
fn read_behind(mut nodes: Vec<BufReader<TcpStream>>, batches: &mpsc::Receiver<Vec<Handed>>) {
    let mut line = String::new();
    let mut failed = false;
    for batch in batches {
        let mut matched = vec![0; batch.len()];
        for node in &mut nodes {
            for (handed, count) in batch.iter().zip(matched.iter_mut()) {
                line.clear();
                // A closed connection reads nothing: a failure too.
                if !failed {
                    failed = !matches!(node.read_line(&mut line), Ok(read) if read > 0);
                }
                *count += usize::from(line == handed.expected.line());
            }
        }
        answer(batch.into_iter(), matched, failed);
    }
}

/// Adds each handed command's `matched` count to its answer (or marks it
/// `failed`), waking each caller whose last I/O thread this was.
fn answer(batch: impl Iterator<Item = Handed>, matched: Vec<usize>, failed: bool) {
    for (handed, matched) in batch.zip(matched) {
        let answer = &handed.answer;
        if failed {
            answer.failed.store(true, Ordering::Relaxed);
        }
        answer.matched.fetch_add(matched, Ordering::Relaxed);
        if answer.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            answer.caller.unpark();
        }
    }
}

impl Nodes {
    /// Writes `out` (the batch's commands) to every node in one write,
    /// then reads a reply per command from each.
    fn exchange(
        &mut self,
        out: &[u8],
        batch: &[Handed],
        matched: &mut [usize],
    ) -> anyhow::Result<()> {
        for conn in &mut self.conns {
            conn.send_packed_command(out)?;
        }
        for conn in &mut self.conns {
            for (handed, count) in batch.iter().zip(matched.iter_mut()) {
                *count += usize::from(handed.expected.is(&conn.recv_response()?));
            }
        }
        Ok(())
    }
}

/// How the parked shapes' I/O threads share the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One I/O thread, one batch per node in flight.
    One,
    /// An I/O thread per node.
    PerNode,
    /// A writer and a reader thread: batches written while earlier ones
    /// are still out.
    Pipelined,
}

/// A connection of its own to each node, as plain sockets, for the
/// pipelined shape's writer and reader.
fn sockets(urls: &[String]) -> anyhow::Result<(Vec<TcpStream>, Vec<BufReader<TcpStream>>)> {
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for url in urls {
        let address = url
            .strip_prefix("redis://")
            .with_context(|| format!("{url}: not redis://host:port"))?;
        let socket = TcpStream::connect(address).with_context(|| format!("connecting to {url}"))?;
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(IO_TIMEOUT))?;
        socket.set_write_timeout(Some(IO_TIMEOUT))?;
        readers.push(BufReader::new(socket.try_clone()?));
        writers.push(socket);
    }
    Ok((writers, readers))
}

/// The parked shapes: a thread per client, the I/O threads in `layout`.
fn parked(
    cell: &Cell<'_>,
    layout: Layout,
    commands: Commands,
) -> anyhow::Result<(Recorder, crate::measure::Usage)> {
    let mut nodes = Nodes::connect(&cell.urls, commands)?;
    // The callers' copy, without connections, packs the commands.
    let packer = nodes.packer();
    let pipelined = if layout == Layout::Pipelined {
        Some(sockets(&cell.urls)?)
    } else {
        None
    };
    let shares: Vec<Nodes> = if layout == Layout::PerNode {
        nodes
            .conns
            .drain(..)
            .map(|conn| Nodes {
                conns: vec![conn],
                ..packer.packer()
            })
            .collect()
    } else {
        vec![nodes]
    };
    let hubs = Arc::new(Hubs {
        hubs: shares
            .iter()
            .map(|_| Hub {
                handed: Mutex::new(Vec::new()),
                io: OnceLock::new(),
            })
            .collect(),
        stop: AtomicBool::new(false),
    });
    std::thread::scope(|scope| {
        // Dropped before the scope joins the I/O threads.
        let _stop = StopOnDrop(&hubs);
        if let Some((writers, readers)) = pipelined {
            let (to_reader, batches) = mpsc::channel();
            let writing = Arc::clone(&hubs);
            let io = std::thread::Builder::new()
                .name("bench-parked-writer".into())
                .spawn_scoped(scope, move || writing.write_ahead(writers, &to_reader))?;
            let _ = hubs.hubs[0].io.set(io.thread().clone());
            // It ends once the writer dropped its sender.
            std::thread::Builder::new()
                .name("bench-parked-reader".into())
                .spawn_scoped(scope, move || read_behind(readers, &batches))?;
        } else {
            for (index, share) in shares.into_iter().enumerate() {
                let serving = Arc::clone(&hubs);
                let io = std::thread::Builder::new()
                    .name(format!("bench-parked-io-{index}"))
                    .spawn_scoped(scope, move || serving.serve(index, share))?;
                let _ = hubs.hubs[index].io.set(io.thread().clone());
            }
        }
        runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
            let answer = Arc::new(Answer {
                caller: std::thread::current(),
                matched: AtomicUsize::new(0),
                remaining: AtomicUsize::new(0),
                failed: AtomicBool::new(false),
            });
            cycles(cell, client, window, rec, |key, token| {
                let expected = packer.commands.granted();
                let granted = hubs.call(&answer, &packer.set(key, token), expected);
                let released = hubs.call(&answer, &packer.release(key, token), Expect::One);
                let (g, r) = granted
                    .zip(released)
                    .context("the I/O threads' connections broke")?;
                Ok(g >= packer.quorum && r >= packer.quorum)
            });
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `-ours` references send what our manager sends: the words
    /// `redlock-redis` writes, the release by the hash of the script
    /// loaded.
    #[test]
    fn our_commands_are_the_managers() {
        let nodes = Nodes {
            conns: Vec::new(),
            commands: Commands::Ours,
            sha: redis::Script::new(&Commands::Ours.release_lua())
                .get_hash()
                .to_owned(),
            quorum: 3,
            ttl_ms: 5,
        };
        assert_eq!(
            nodes.set("k", "t"),
            redis::cmd("SET")
                .arg("k")
                .arg("t")
                .arg("NX")
                .arg("PX")
                .arg(5)
                .arg("GET")
                .get_packed_command()
        );
        let release = words(&ours_release(&["k".to_owned()], "t"), false);
        assert_eq!(
            release[..2],
            [b"EVALSHA".to_vec(), nodes.sha.clone().into_bytes()]
        );
        assert_eq!(nodes.release("k", "t"), pack(&release));
    }
}
