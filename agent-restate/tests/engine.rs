//! The engine harness itself (`support/engine.rs`) against the pinned Restate server: one
//! engine and a three-node cluster start, take a deployment, serve an invocation, survive
//! SIGKILL and restart on their data; every config key the harness writes takes effect.
//!
//! Without the install (`npm ci` in `tests/npm`) the tests skip with one line, except under
//! `CI`, where they are required.

#[path = "support/engine.rs"]
mod engine;

use std::time::{Duration, Instant};

use echo::Echo;
use engine::{Cluster, Engine, http};
use restate_sdk::prelude::{Endpoint, HttpServer};

mod echo {
    use restate_sdk::prelude::*;

    /// Answers with its input.
    pub(crate) struct Echo;

    #[restate_sdk::service]
    impl Echo {
        #[handler]
        async fn echo(&self, _ctx: Context<'_>, text: String) -> Result<String, HandlerError> {
            Ok(text)
        }
    }
}

/// A worker serving `Echo` on a loopback port, for as long as the returned runtime lives.
fn echo_worker() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the worker");
    let url = format!("http://{}", listener.local_addr().expect("worker address"));
    runtime.spawn(HttpServer::new(Endpoint::builder().bind(Echo).build()).serve(listener));
    (runtime, url)
}

/// Calls `Echo/echo` through `engine`'s ingress; retries for a while, since a partition that
/// lost its leader answers again only once another node has taken over.
fn assert_echoes(engine: &Engine, text: &str) {
    let url = format!("{}/Echo/echo", engine.ingress_url());
    let body = format!("\"{text}\"");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = http("POST", &url, Some(&body));
        if let Ok((200, ref echoed)) = answer {
            assert_eq!(echoed, &body);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{url} did not echo: {answer:?}; log tail:\n{}",
            engine.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_healthy(engine: &Engine) {
    let admin = http("GET", &format!("{}/health", engine.admin_url()), None);
    let ingress = http(
        "GET",
        &format!("{}/restate/health", engine.ingress_url()),
        None,
    );
    assert!(
        matches!(admin, Ok((200, _))) && matches!(ingress, Ok((200, _))),
        "admin {admin:?}, ingress {ingress:?}"
    );
}

/// The server ignores unknown keys, so each key of the written config must come back, same
/// value, from `--dump-config` (which appends a slash to URLs).
fn assert_config_applied(engine: &Engine) {
    fn leaves(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
        for (key, value) in table {
            let path = format!("{prefix}{key}");
            match value {
                toml::Value::Table(inner) => leaves(&format!("{path}."), inner, out),
                value => out.push((path, value.clone())),
            }
        }
    }
    fn lookup<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
        let (head, rest) = path.split_once('.').unwrap_or((path, ""));
        let value = table.get(head)?;
        match (rest, value) {
            ("", value) => Some(value),
            (rest, toml::Value::Table(inner)) => lookup(inner, rest),
            _ => None,
        }
    }
    fn normalized(value: &toml::Value) -> toml::Value {
        match value {
            toml::Value::String(s) => toml::Value::String(s.trim_end_matches('/').to_owned()),
            toml::Value::Array(items) => toml::Value::Array(items.iter().map(normalized).collect()),
            other => other.clone(),
        }
    }
    let written: toml::Table = std::fs::read_to_string(engine.config_path())
        .expect("read the config")
        .parse()
        .expect("the written config parses");
    let resolved: toml::Table = engine
        .dump_config()
        .parse()
        .expect("the dumped config parses");
    let mut keys = Vec::new();
    leaves("", &written, &mut keys);
    for (path, value) in keys {
        assert_eq!(
            lookup(&resolved, &path).map(normalized),
            Some(normalized(&value)),
            "config key {path}"
        );
    }
}

fn mib(kib: u64) -> u64 {
    kib.div_ceil(1024)
}

#[test]
fn engine_survives_kill9_and_restarts_on_its_data() {
    let Some(binary) = engine::require() else {
        return;
    };
    let started = Instant::now();
    let mut engine = Engine::start(&binary);
    let ready = started.elapsed();
    assert_healthy(&engine);
    assert_config_applied(&engine);

    let (_worker, worker_url) = echo_worker();
    engine.register(&worker_url);
    assert_echoes(&engine, "before");
    eprintln!(
        "engine: ready in {} ms, RSS {} MiB after one invocation",
        ready.as_millis(),
        mib(engine.rss_kib().unwrap_or(0))
    );

    engine.kill9();
    assert!(engine.pid().is_none());
    assert!(
        http("GET", &format!("{}/health", engine.admin_url()), None).is_err(),
        "the admin API still answers after SIGKILL"
    );

    let restarted = Instant::now();
    engine.restart();
    let ready = restarted.elapsed();
    assert_healthy(&engine);
    // The deployment registered before the kill is still known.
    assert_echoes(&engine, "after");
    eprintln!("engine: ready again in {} ms", ready.as_millis());
}

#[test]
fn cluster_serves_through_any_node_and_survives_losing_one() {
    let Some(binary) = engine::require() else {
        return;
    };
    let started = Instant::now();
    let mut cluster = Cluster::start(&binary);
    let ready = started.elapsed();
    for i in 1..=3 {
        assert_healthy(cluster.node(i));
    }
    assert_config_applied(cluster.node(1));
    assert_config_applied(cluster.node(2));

    let (_worker, worker_url) = echo_worker();
    cluster.node(1).register(&worker_url);
    for i in 1..=3 {
        assert_echoes(cluster.node(i), &format!("via n{i}"));
    }
    eprintln!(
        "cluster: ready in {} ms, RSS {} MiB for three nodes",
        ready.as_millis(),
        mib(cluster.rss_kib())
    );

    for lost in [2, 1] {
        cluster.kill9(lost);
        for i in (1..=3).filter(|&i| i != lost) {
            let asked = Instant::now();
            assert_echoes(cluster.node(i), &format!("n{lost} down, via n{i}"));
            eprintln!(
                "cluster: n{lost} down, echo via n{i} in {} ms",
                asked.elapsed().as_millis()
            );
        }
        let restarted = Instant::now();
        cluster.restart(lost);
        eprintln!(
            "cluster: n{lost} ready again in {} ms",
            restarted.elapsed().as_millis()
        );
        assert_echoes(cluster.node(lost), &format!("n{lost} back"));
    }
}
