//! A real Restate server for the integration tests: the binary pinned by `tests/npm` (`npm ci`
//! there), one engine or a three-node loopback cluster, each node in a fresh temporary
//! directory with its own loopback ports, killed and removed on drop.
//!
//! Set `AGENT_RESTATE_KEEP` to keep the directories (config, `engine.log`, data) after a run.
// Each test file includes this module and uses only part of it.
#![allow(dead_code, unreachable_pub)]

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a test without the install prints (or, under `CI`, fails with).
const MISSING: &str =
    "restate-server not installed; run: (cd agent-restate/tests/npm && npm ci --ignore-scripts)";

/// How long one node may take to become ready after its process starts.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the three nodes of a cluster may take together.
const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default is 24; 4 takes a node from about 280 to 185 MiB resident and halves its
/// start-up, and in these tests partitions only spread keys.
const PARTITIONS: u16 = 4;
/// A node that comes (back) up is "suspect" this long before partitions are placed on it;
/// the default (5 s) dominates a fresh cluster's start-up.
const SUSPECT: &str = "500ms";
/// How long an invocation may exchange nothing before the engine asks it to suspend (default
/// 1 min), so that tests reach suspension quickly.
const INACTIVITY: &str = "2s";
/// Answers only once every partition has a running processor.
const READY_QUERY: &str = r#"{"query": "SELECT count(*) FROM sys_invocation"}"#;

/// The platform binary of `@restatedev/restate-server` under `agent-restate/tests/npm/node_modules`, if
/// installed. The package's own `.bin/restate-server` is a node wrapper; the platform package
/// holds the native executable, which needs no node to run.
pub fn binary() -> Option<PathBuf> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        _ => return None,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    // Relative to agent-restate, also when another crate's tests include this module.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-restate/tests/npm/node_modules/@restatedev")
        .join(format!("restate-server-{os}-{arch}"))
        .join("bin/restate-server");
    path.is_file().then_some(path)
}

/// The binary, or `None` after printing one line saying what to install (the test then
/// returns). Under `CI` (set and not empty, as `.ci/run` sets it) a missing install fails the
/// test instead.
pub fn require() -> Option<PathBuf> {
    if let Some(path) = binary() {
        return Some(path);
    }
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so this test is required: {MISSING}");
    }
    // Written to stderr itself: the test harness captures `eprintln!` of passing tests.
    let _ = io::stderr().write_all(format!("skipped: {MISSING}\n").as_bytes());
    None
}

/// One Restate node: its process (while running), its ports and its directory.
pub struct Engine {
    binary: PathBuf,
    name: String,
    dir: PathBuf,
    config: PathBuf,
    ingress: u16,
    admin: u16,
    child: Option<Child>,
}

/// The settings that differ between a lone engine and a cluster's node.
struct NodeSpec<'a> {
    name: &'a str,
    cluster: &'a str,
    ports: Ports,
    replication: u8,
    auto_provision: bool,
    metadata_addresses: &'a [String],
    /// More `[worker.invoker]` keys (TOML lines), e.g. for the cluster bench.
    invoker: &'a str,
}

#[derive(Clone, Copy)]
struct Ports {
    fabric: u16,
    admin: u16,
    ingress: u16,
}

impl Engine {
    /// Starts a single-node cluster of its own and waits until it is ready.
    pub fn start(binary: &Path) -> Engine {
        Engine::start_with(binary, "")
    }

    /// [`Engine::start`] with more `[worker.invoker]` keys (TOML lines). The server ignores
    /// keys it does not know: check them in [`Engine::dump_config`].
    pub fn start_with(binary: &Path, invoker: &str) -> Engine {
        let cluster = unique_name();
        let [ports] = free_ports::<1>();
        let mut engine = Engine::prepare(
            binary,
            &NodeSpec {
                name: "n1",
                cluster: &cluster,
                ports,
                replication: 1,
                auto_provision: true,
                metadata_addresses: &[],
                invoker,
            },
        );
        engine.spawn();
        engine.wait_ready(Instant::now() + READY_TIMEOUT);
        engine
    }

    /// Writes the node's directory and config; starts nothing.
    fn prepare(binary: &Path, spec: &NodeSpec<'_>) -> Engine {
        let dir = fresh_dir(spec.name);
        let Ports {
            fabric,
            admin,
            ingress,
        } = spec.ports;
        let mut config = format!(
            "node-name = {name}\n\
             cluster-name = {cluster}\n\
             bind-address = \"127.0.0.1:{fabric}\"\n\
             advertised-address = \"http://127.0.0.1:{fabric}\"\n\
             listen-mode = \"tcp\"\n\
             base-dir = {base}\n\
             disable-telemetry = true\n\
             log-disable-ansi-codes = true\n\
             auto-provision = {auto_provision}\n\
             default-replication = {replication}\n\
             default-num-partitions = {PARTITIONS}\n\
             gossip-suspect-interval = \"{SUSPECT}\"\n",
            name = quoted(spec.name),
            cluster = quoted(spec.cluster),
            base = quoted(&dir.join("data").to_string_lossy()),
            auto_provision = spec.auto_provision,
            replication = spec.replication,
        );
        if !spec.metadata_addresses.is_empty() {
            let addresses: Vec<String> =
                spec.metadata_addresses.iter().map(|a| quoted(a)).collect();
            config += &format!(
                "\n[metadata-client]\naddresses = [{}]\n",
                addresses.join(", ")
            );
        }
        config += &format!(
            "\n[admin]\nbind-address = \"127.0.0.1:{admin}\"\n\
             \n[ingress]\nbind-address = \"127.0.0.1:{ingress}\"\n\
             \n[worker.invoker]\ninactivity-timeout = \"{INACTIVITY}\"\n{invoker}\n",
            invoker = spec.invoker,
        );
        let config_path = dir.join("config.toml");
        fs::write(&config_path, config).expect("write the engine config");
        Engine {
            binary: binary.to_path_buf(),
            name: spec.name.to_owned(),
            dir,
            config: config_path,
            ingress,
            admin,
            child: None,
        }
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "{} is already running", self.name);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open engine.log");
        let child = self
            .command()
            .arg("--no-logo")
            .stdout(log.try_clone().expect("engine.log"))
            .stderr(log)
            .spawn()
            .expect("spawn restate-server");
        self.child = Some(child);
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .arg("--config-file")
            .arg(&self.config)
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        // RESTATE_* variables override the config file; a developer's own must not leak in.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("RESTATE_") {
                command.env_remove(key);
            }
        }
        command
    }

    /// Waits until both health endpoints answer 200 and a query over every partition does.
    /// Health alone is not enough: it answers while the partition processors are still
    /// starting (about 0.5 s on one node, several seconds in a fresh cluster), and an
    /// invocation sent then waits for them.
    fn wait_ready(&mut self, deadline: Instant) {
        let health = format!("{}/health", self.admin_url());
        let ingress_health = format!("{}/restate/health", self.ingress_url());
        let query = format!("{}/query", self.admin_url());
        let mut last = String::from("no answer yet");
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "restate-server {} exited ({status}) before it was ready; log tail:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            let ready = [
                ("GET", &health, None),
                ("GET", &ingress_health, None),
                ("POST", &query, Some(READY_QUERY)),
            ]
            .into_iter()
            .all(|(method, url, body)| match http(method, url, body) {
                Ok((200, _)) => true,
                Ok((status, body)) => {
                    last = format!("{method} {url}: {status} {body}");
                    false
                }
                Err(error) => {
                    last = format!("{method} {url}: {error}");
                    false
                }
            });
            if ready {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "restate-server {} was not ready in time (last: {last}); log tail:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The ingress, e.g. `http://127.0.0.1:PORT` (no trailing slash).
    pub fn ingress_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ingress)
    }

    /// The admin API, e.g. `http://127.0.0.1:PORT` (no trailing slash).
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin)
    }

    /// The node's directory: `config.toml`, `engine.log` and `data/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The config file the node runs with.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The configuration the server resolves from the config file (`--dump-config`), defaults
    /// included. The server ignores keys it does not know, so this is how to see that a key
    /// written here took effect.
    pub fn dump_config(&self) -> String {
        let output = self
            .command()
            .arg("--dump-config")
            .output()
            .expect("run restate-server --dump-config");
        assert!(
            output.status.success(),
            "restate-server --dump-config failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8 config")
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's resident set size in KiB (`VmRSS`), while it runs (Linux only).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// SIGKILL, as a crash: no shutdown at all (what the server already wrote survives, as
    /// the OS holds it). Does nothing if the server is not running.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again with the same config, ports and data (after [`Engine::kill9`],
    /// or killing it first if it still runs) and waits until it is ready.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
        self.wait_ready(Instant::now() + READY_TIMEOUT);
    }

    /// The last lines of `engine.log` (both runs' output, after a restart).
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(80)..].join("\n")
    }

    /// Registers (forcibly: the same URI again replaces it) the deployment at `worker_url`.
    /// Retries non-2xx answers for a few seconds, as the worker may still be coming up.
    pub fn register(&self, worker_url: &str) {
        let url = format!("{}/deployments", self.admin_url());
        let body = format!("{{\"uri\": {}, \"force\": true}}", quoted(worker_url));
        let deadline = Instant::now() + REGISTER_TIMEOUT;
        loop {
            let last = match http("POST", &url, Some(&body)) {
                Ok((status, _)) if (200..300).contains(&status) => return,
                Ok((status, body)) => format!("{status} {body}"),
                Err(error) => error.to_string(),
            };
            if Instant::now() >= deadline {
                panic!("registering {worker_url} with {} failed: {last}", self.name);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("engine.log")
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "restate-server {} ({}) log tail:\n{}",
                self.name,
                self.dir.display(),
                self.log_tail()
            );
        }
        if std::env::var_os("AGENT_RESTATE_KEEP").is_some() {
            eprintln!(
                "kept restate-server {} in {}",
                self.name,
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Three nodes n1, n2, n3 of one loopback cluster: replication 2, each node a metadata
/// server, n1 the one that provisions it. Any one node may be down.
pub struct Cluster {
    nodes: Vec<Engine>,
}

impl Cluster {
    /// Starts the three nodes together (n2 and n3 wait for n1 to provision the cluster) and
    /// waits until each is ready.
    pub fn start(binary: &Path) -> Cluster {
        let cluster = unique_name();
        let ports = free_ports::<3>();
        let addresses: Vec<String> = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{}", p.fabric))
            .collect();
        let mut nodes: Vec<Engine> = ports
            .iter()
            .enumerate()
            .map(|(i, ports)| {
                Engine::prepare(
                    binary,
                    &NodeSpec {
                        name: &format!("n{}", i + 1),
                        cluster: &cluster,
                        ports: *ports,
                        replication: 2,
                        auto_provision: i == 0,
                        metadata_addresses: &addresses,
                        invoker: "",
                    },
                )
            })
            .collect();
        for node in &mut nodes {
            node.spawn();
        }
        let deadline = Instant::now() + CLUSTER_READY_TIMEOUT;
        for node in &mut nodes {
            node.wait_ready(deadline);
        }
        Cluster { nodes }
    }

    /// Node `i`, numbered 1 to 3 as named (n1..n3).
    pub fn node(&self, i: usize) -> &Engine {
        &self.nodes[Self::index(i)]
    }

    /// Node `i`, numbered 1 to 3 as named (n1..n3).
    pub fn node_mut(&mut self, i: usize) -> &mut Engine {
        &mut self.nodes[Self::index(i)]
    }

    /// SIGKILL to node `i` (1 to 3).
    pub fn kill9(&mut self, i: usize) {
        self.node_mut(i).kill9();
    }

    /// Starts node `i` (1 to 3) again on its data and waits until it is ready.
    pub fn restart(&mut self, i: usize) {
        self.node_mut(i).restart();
    }

    /// The three nodes' resident set sizes summed, in KiB, counting the running ones.
    pub fn rss_kib(&self) -> u64 {
        self.nodes.iter().filter_map(Engine::rss_kib).sum()
    }

    fn index(i: usize) -> usize {
        assert!(
            (1..=3).contains(&i),
            "cluster nodes are numbered 1 to 3, not {i}"
        );
        i - 1
    }
}

/// A blocking HTTP/1.1 request to `http://host:port/path` (no TLS), one connection each
/// (`Connection: close`). A body is sent as JSON. Returns the status and the body (chunked
/// bodies decoded).
pub fn http(method: &str, url: &str, body: Option<&str>) -> io::Result<(u16, String)> {
    let invalid =
        |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {url}"));
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr: SocketAddr = authority
        .parse()
        .map_err(|_| invalid("host must be ip:port"))?;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if let Some(body) = body {
        request += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    } else {
        request += "Content-Length: 0\r\n\r\n";
    }
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;

    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed HTTP response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(malformed)?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let payload = &raw[split + 4..];
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(malformed)?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        dechunk(payload).ok_or_else(malformed)?
    } else {
        payload.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_line = std::str::from_utf8(&data[..end]).ok()?;
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        data = &data[end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// Loopback ports for `N` nodes, found by binding port 0. All are held until every one is
/// chosen, so no two coincide.
fn free_ports<const N: usize>() -> [Ports; N] {
    let listeners: Vec<TcpListener> = (0..3 * N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    let port = |i: usize| listeners[i].local_addr().expect("local address").port();
    std::array::from_fn(|n| Ports {
        fabric: port(3 * n),
        admin: port(3 * n + 1),
        ingress: port(3 * n + 2),
    })
}

/// Unique within this machine: the process id, a counter and the clock.
fn unique_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "agent-restate-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn fresh_dir(node: &str) -> PathBuf {
    loop {
        let dir = std::env::temp_dir().join(format!("{}-{node}", unique_name()));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => panic!("create {}: {error}", dir.display()),
        }
    }
}

/// A string literal valid both in JSON and as a TOML basic string.
fn quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if (c as u32) < 0x20 => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
