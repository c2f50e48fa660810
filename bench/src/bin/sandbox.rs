//! Latency of one trivial call: a fresh context (on the thread's kept runtime), arguments,
//! `return $text`, result. `cargo run --release -p toolshed-bench --bin sandbox` (scripts/bench.sh).
//!
//! Prints two figures: the full `run_blocking` cycle, and the time until the
//! outcome is reported (`run_reporting`, what a pool caller waits for; freeing
//! the context follows it). Then a call that `$fetch`es 16 KiB from a
//! loopback server (recorded, as every run is), and the same call replayed
//! from its recording (a failed call's Replay, without the network).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;

use toolshed_domain::outbound::InternalHosts;
use toolshed_domain::sandbox::{run_blocking, run_reporting, RunRequest, ToolValue};

const WARMUP: usize = 200;
const ITERATIONS: usize = 5000;

fn main() {
    let mut req = RunRequest::new("return $text");
    req.args.insert("text".into(), "hello".into());

    report("run_blocking (full cycle)", || {
        let req = req.clone();
        let started = Instant::now();
        let outcome = run_blocking(req);
        let elapsed = started.elapsed();
        assert_eq!(outcome.result, Ok(ToolValue::Text("hello".into())));
        elapsed.as_secs_f64() * 1e6
    });
    report("run_reporting (until outcome)", || {
        let req = req.clone();
        let started = Instant::now();
        let mut elapsed = 0.0;
        run_reporting(req, |outcome| {
            elapsed = started.elapsed().as_secs_f64() * 1e6;
            assert_eq!(outcome.result, Ok(ToolValue::Text("hello".into())));
        });
        elapsed
    });

    let port = loopback_api(16 * 1024);
    let mut fetching = RunRequest::new(format!("return (await (await $fetch('http://127.0.0.1:{port}/data')).text()).length"));
    fetching.fetch_allow = vec![format!("127.0.0.1:{port}")];
    fetching.internal_hosts = InternalHosts::parse("127.0.0.1");
    let recording = Arc::new(run_blocking(fetching.clone()).fetches);
    let time = |req: &RunRequest| {
        let started = Instant::now();
        let outcome = run_blocking(req.clone());
        assert_eq!(outcome.result, Ok(ToolValue::Json((16 * 1024).into())));
        started.elapsed().as_secs_f64() * 1e6
    };
    report("$fetch 16 KiB over loopback", || time(&fetching));
    fetching.replay = Some(recording);
    report("the same, replayed", || time(&fetching));
}

/// Answers every request with `size` bytes, one connection at a time.
fn loopback_api(size: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let body = "x".repeat(size);
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            while reader.read_line(&mut head).unwrap_or(0) > 0 && !head.ends_with("\r\n\r\n") {}
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n{body}");
        }
    });
    port
}

fn report(name: &str, mut sample: impl FnMut() -> f64) {
    for _ in 0..WARMUP {
        sample();
    }
    let mut micros: Vec<f64> = (0..ITERATIONS).map(|_| sample()).collect();
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    let mean = micros.iter().sum::<f64>() / micros.len() as f64;
    println!("{name:32} {ITERATIONS} iterations: median {:6.1} µs  p99 {:6.1} µs  mean {:6.1} µs", at(0.5), at(0.99), mean);
}
