//! Latency of one trivial call: fresh runtime + context, arguments,
//! `return $text`, result. `cargo run --release -p toolshed-bench --bin sandbox` (scripts/bench.sh).
//!
//! Prints two figures: the full `run_blocking` cycle, and the time until the
//! outcome is reported (`run_reporting`, what a pool caller waits for; the
//! runtime teardown follows it).

use std::time::Instant;

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
