//! Output: the progress line (stderr, every second; it also notes the per-second timelines
//! `--html` draws, see `html`), the final table (stdout) and the JSON
//! document (`--json FILE`). The JSON's stable top-level fields are `messages`, `bytes`,
//! `errors`, `elapsed_s`, `msgs_per_s`, `mb_per_s` (10^6 bytes), `latency_us` {`p50`,
//! `p90`, `p99`, `p999`, `p9999`, `max`}; consume adds `acked`, `received`, `lost`,
//! `duplicates`, `out_of_order`, `dead_lettered`, `concurrent` (null without `--verify`)
//! and `per_queue`. The rest
//! (`mode`, `durability`, `brokers`, `config`, `cpu`, `replication`, ...) is descriptive.
//! `cpu` holds CPU seconds (`generator_s`, `node_s`) and CPU µs per message of the top
//! level's `messages` (`generator_us_per_msg`; `node_us_per_msg`, null when the node's CPU
//! time is unknown; `node_source` says where it came from).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::broker_info::{BrokerView, LagReport};
use crate::stats::{Counts, Meter, Percentiles, Summary};
use crate::threads::CpuUse;
use crate::timeline::{Second, Timeline};
use crate::verify;

/// Every second until `stop` is set: prints a progress line (when `print`) and notes each
/// meter's second (messages per second and latency percentiles of that second) for
/// `--html`. The last, partial second is noted when `stop` is seen; the task returns the
/// timelines, one per meter in `meters`' order.
pub fn spawn_progress(
    meters: Vec<(&'static str, Arc<Meter>)>,
    lag: Option<Arc<dyn Fn() -> Option<u64> + Send + Sync>>,
    stop: Arc<AtomicBool>,
    print: bool,
) -> tokio::task::JoinHandle<Vec<Timeline>> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut last: Vec<Counts> = meters.iter().map(|(_, m)| m.counts()).collect();
        let mut timelines: Vec<Timeline> = meters
            .iter()
            .map(|(label, m)| {
                m.take_second();
                Timeline::new(label)
            })
            .collect();
        let mut last_t = start;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            let stopping = stop.load(Ordering::Relaxed);
            let now = Instant::now();
            let dt = (now - last_t).as_secs_f64().max(1e-6);
            let t_s = (now - start).as_secs_f64();
            let mut line = format!("[{t_s:>4.0}s]");
            for (i, (label, m)) in meters.iter().enumerate() {
                let c = m.counts();
                let d_msgs = c.messages - last[i].messages;
                let d_bytes = c.bytes - last[i].bytes;
                let second = Second {
                    t_s,
                    msgs_per_s: d_msgs as f64 / dt,
                    errors: c.errors - last[i].errors,
                    latency_us: m.take_second(),
                };
                // The second the stop was seen in, when nothing happened in it (the run had
                // ended), is not a point of the run.
                let idle = d_msgs == 0 && second.latency_us.samples == 0 && second.errors == 0;
                if !(stopping && idle && !timelines[i].seconds.is_empty()) {
                    timelines[i].push(second);
                }
                let _ = write!(
                    line,
                    " {label} {:>9} msgs/s {:>8.1} MB/s err {:<4} p99 {} |",
                    thousands(d_msgs as f64 / dt),
                    d_bytes as f64 / 1e6 / dt,
                    c.errors,
                    micros(m.p99_so_far()),
                );
                last[i] = c;
            }
            if stopping {
                break;
            }
            if let Some(lag) = lag.as_ref().and_then(|f| f()) {
                let _ = write!(line, " repl lag {} B |", thousands(lag as f64));
            }
            line.pop();
            if print {
                eprintln!("{}", line.trim_end());
            }
            last_t = now;
        }
        timelines
    })
}

/// Everything a result says besides its meters.
#[derive(Debug, Clone)]
pub struct Context {
    pub mode: &'static str,
    pub topic: String,
    pub brokers: Vec<BrokerView>,
    pub durability: String,
    pub config: Value,
    pub cpu: CpuUse,
    pub wall: Duration,
    pub embedded: bool,
}

/// `"  label  messages  bytes  errors  elapsed  msgs/s  MB/s"` rows and a latency block;
/// CPU per message is counted over `main`'s messages (the document's top level).
pub fn table(ctx: &Context, rows: &[(&str, &Summary)], main: &Summary, notes: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ringmq-perf {} on topic {}: {}",
        ctx.mode, ctx.topic, ctx.durability
    );
    for b in &ctx.brokers {
        let _ = writeln!(
            out,
            "  broker {} id {} at {}: {} {} ({} shards){}",
            b.name,
            b.id,
            b.addr,
            b.role,
            b.flush,
            b.shards,
            if ctx.embedded { ", embedded" } else { "" }
        );
    }
    let _ = writeln!(out, "  config {}", ctx.config);
    let _ = writeln!(
        out,
        "\n{:<10} {:>12} {:>14} {:>8} {:>10} {:>12} {:>9}",
        "", "messages", "bytes", "errors", "elapsed_s", "msgs/s", "MB/s"
    );
    for (label, s) in rows {
        let _ = writeln!(
            out,
            "{:<10} {:>12} {:>14} {:>8} {:>10.2} {:>12} {:>9.1}",
            label,
            thousands(s.messages as f64),
            thousands(s.bytes as f64),
            thousands(s.errors as f64),
            s.elapsed_s,
            thousands(s.msgs_per_s),
            s.mb_per_s
        );
    }
    let _ = writeln!(
        out,
        "\n{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "latency µs", "p50", "p90", "p99", "p99.9", "p99.99", "max", "samples"
    );
    for (label, s) in rows {
        let l = s.latency_us;
        let _ = writeln!(
            out,
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
            label,
            thousands(l.p50 as f64),
            thousands(l.p90 as f64),
            thousands(l.p99 as f64),
            thousands(l.p999 as f64),
            thousands(l.p9999 as f64),
            thousands(l.max as f64),
            thousands(l.samples as f64)
        );
    }
    out.push('\n');
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    let _ = writeln!(out, "{}", cpu_line(&ctx.cpu, ctx.wall));
    let _ = writeln!(out, "{}", cpu_per_msg_line(&ctx.cpu, main.messages));
    out
}

/// CPU µs per message of the load generator and of the node (`None`: no messages, or the
/// node's CPU time is unknown).
pub fn cpu_per_msg(cpu: &CpuUse, messages: u64) -> (Option<f64>, Option<f64>) {
    if messages == 0 {
        return (None, None);
    }
    let per = |s: f64| round3(s * 1e6 / messages as f64);
    (
        Some(per(cpu.generator_s)),
        cpu.node_source.as_ref().map(|_| per(cpu.node_s)),
    )
}

pub fn cpu_per_msg_line(cpu: &CpuUse, messages: u64) -> String {
    let (generator, node) = cpu_per_msg(cpu, messages);
    let us = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2} µs"));
    let source = match &cpu.node_source {
        Some(s) => format!("from {s}"),
        None => "unknown: not local, and no processCpuTimeMs in the broker's runtime info; see --node-pid".into(),
    };
    format!(
        "CPU per message ({} messages): load generator {}, node {} ({source})",
        thousands(messages as f64),
        us(generator),
        us(node)
    )
}

pub fn cpu_line(cpu: &CpuUse, wall: Duration) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut s = format!(
        "CPU over {:.1} s wall on {cores} cores: load generator {:.1} s ({} threads)",
        wall.as_secs_f64(),
        cpu.generator_s,
        cpu.generator_threads
    );
    if cpu.node_threads > 0 {
        let _ = write!(
            s,
            ", embedded node {:.1} s ({} threads)",
            cpu.node_s, cpu.node_threads
        );
    } else if cpu.node_source.is_some() {
        let _ = write!(s, ", node {:.1} s", cpu.node_s);
    }
    s
}

pub fn verify_lines(r: &verify::Report) -> Vec<String> {
    let t = &r.total;
    let mut out = vec![format!(
        "verify: acked {} received {} lost {} dead_lettered {} duplicates {} out_of_order {} concurrent {} misplaced {} (failed deliveries {}, unlisted deliveries {}){}",
        t.acked,
        t.received,
        t.lost,
        t.dead_lettered,
        t.duplicates,
        t.out_of_order,
        t.concurrent,
        t.misplaced,
        t.failed,
        r.unlisted,
        if r.torn_tail { "; the log's torn last line was skipped" } else { "" }
    )];
    if t.recalled + t.recalled_delivered + t.recall_unsure > 0 {
        out.push(format!(
            "  recalls: recalled {} (recall acknowledged, not delivered) recalled_delivered {} (recall acknowledged, delivered: must be 0) recall_unsure {} (recall sent, no answer, not delivered)",
            t.recalled, t.recalled_delivered, t.recall_unsure
        ));
    }
    for (q, v) in &r.per_queue {
        if v.notable() {
            out.push(format!(
                "  queue {q}: acked {} received {} lost {} dead_lettered {} duplicates {} out_of_order {} concurrent {} misplaced {}",
                v.acked, v.received, v.lost, v.dead_lettered, v.duplicates, v.out_of_order, v.concurrent, v.misplaced
            ));
        }
    }
    if let Some(n) = r.fail_chosen {
        out.push(format!(
            "  failures on purpose chose {n} of the acked messages (all dead-lettered unless --fail-times lets them through)"
        ));
    }
    for (p, s, q, o) in &r.lost_examples {
        out.push(format!(
            "  lost: producer {p:016x} sequence {s} at {q} offset {o}"
        ));
    }
    out
}

pub fn summary_json(s: &Summary) -> Value {
    json!({
        "messages": s.messages,
        "bytes": s.bytes,
        "errors": s.errors,
        "elapsed_s": round6(s.elapsed_s),
        "msgs_per_s": round3(s.msgs_per_s),
        "mb_per_s": round3(s.mb_per_s),
        "latency_us": percentiles_json(&s.latency_us),
    })
}

/// The lateness block of a run with scheduled messages: receipt minus due time, in ms.
pub fn lateness_lines(l: &crate::consume::Lateness) -> Vec<String> {
    let ms = |us: u64| format!("{:.1}", us as f64 / 1000.0);
    vec![
        format!(
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6}",
            "lateness ms", "p50", "p99", "p99.9", "max", "samples", "early"
        ),
        format!(
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6}",
            "scheduled",
            ms(l.us.p50),
            ms(l.us.p99),
            ms(l.us.p999),
            ms(l.us.max),
            thousands(l.samples as f64),
            l.early
        ),
        format!(
            "{:<10} {:>9} {:>9} {:>9} {:>9}",
            "stored",
            ms(l.store_us.p50),
            ms(l.store_us.p99),
            ms(l.store_us.p999),
            ms(l.store_us.max),
        ),
        "lateness: consumer receipt (scheduled) and the broker's store time of the delivered copy (stored, whole ms) minus the due time the broker set (TIMER_OUT_MS); early: stored or received before due (must be 0)".to_string(),
    ]
}

/// `lateness_ms` {p50, p99, p999, max, samples} and `early`.
pub fn lateness_json(l: &crate::consume::Lateness) -> Value {
    let ms = |us: u64| round3(us as f64 / 1000.0);
    json!({
        "lateness_ms": {
            "p50": ms(l.us.p50), "p99": ms(l.us.p99), "p999": ms(l.us.p999),
            "max": ms(l.us.max), "samples": l.samples,
        },
        "stored_lateness_ms": {
            "p50": ms(l.store_us.p50), "p99": ms(l.store_us.p99), "p999": ms(l.store_us.p999),
            "max": ms(l.store_us.max),
        },
        "early": l.early,
    })
}

pub fn percentiles_json(l: &Percentiles) -> Value {
    json!({
        "p50": l.p50, "p90": l.p90, "p99": l.p99, "p999": l.p999, "p9999": l.p9999,
        "max": l.max, "samples": l.samples,
    })
}

/// The document: `main` (the mode's primary summary) at the top level, plus context.
pub fn document(ctx: &Context, main: &Summary, extra: Value) -> Value {
    let mut doc = summary_json(main);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (generator_us, node_us) = cpu_per_msg(&ctx.cpu, main.messages);
    let fields = [
        ("mode", json!(ctx.mode)),
        ("topic", json!(ctx.topic)),
        ("durability", json!(ctx.durability)),
        (
            "brokers",
            json!(ctx.brokers.iter().map(broker_json).collect::<Vec<_>>()),
        ),
        ("config", ctx.config.clone()),
        (
            "cpu",
            json!({
                "wall_s": round3(ctx.wall.as_secs_f64()),
                "cores": cores,
                "generator_s": round3(ctx.cpu.generator_s),
                "generator_threads": ctx.cpu.generator_threads,
                "node_s": round3(ctx.cpu.node_s),
                "node_threads": ctx.cpu.node_threads,
                "embedded": ctx.embedded,
                "node_source": ctx.cpu.node_source,
                "generator_us_per_msg": generator_us,
                "node_us_per_msg": node_us,
            }),
        ),
    ];
    if let Some(obj) = doc.as_object_mut() {
        for (k, v) in fields {
            obj.insert(k.to_string(), v);
        }
        if let Value::Object(more) = extra {
            obj.extend(more);
        }
    }
    doc
}

pub fn verify_json(r: Option<&verify::Report>) -> Value {
    let Some(r) = r else {
        return json!({
            "acked": null, "received": null, "lost": null, "duplicates": null,
            "out_of_order": null, "dead_lettered": null, "concurrent": null, "per_queue": null,
            "recalled": null, "recalled_delivered": null, "recall_unsure": null,
        });
    };
    let per: serde_json::Map<String, Value> = r
        .per_queue
        .iter()
        .map(|(q, v)| (q.clone(), verdict_json(v)))
        .collect();
    let mut doc = verdict_json(&r.total);
    if let Some(o) = doc.as_object_mut() {
        o.insert("per_queue".into(), Value::Object(per));
        o.insert("unlisted".into(), json!(r.unlisted));
        o.insert("verify_torn_tail".into(), json!(r.torn_tail));
        o.insert("fail_chosen".into(), json!(r.fail_chosen));
    }
    doc
}

fn verdict_json(v: &verify::Verdict) -> Value {
    json!({
        "acked": v.acked, "received": v.received, "lost": v.lost,
        "duplicates": v.duplicates, "out_of_order": v.out_of_order, "misplaced": v.misplaced,
        "dead_lettered": v.dead_lettered, "concurrent": v.concurrent, "failed": v.failed,
        "recalled": v.recalled, "recalled_delivered": v.recalled_delivered,
        "recall_unsure": v.recall_unsure,
    })
}

pub fn lag_json(l: &LagReport) -> Value {
    json!({
        "samples": l.samples,
        "slaves": l.slaves,
        "lag_bytes": {"p50": l.bytes_p50, "p99": l.bytes_p99, "max": l.bytes_max},
        "lag_ms": {"p50": l.ms_p50, "p99": l.ms_p99, "max": l.ms_max},
    })
}

fn broker_json(b: &BrokerView) -> Value {
    json!({
        "name": b.name, "id": b.id, "addr": b.addr.to_string(), "role": b.role,
        "flush": b.flush, "shards": b.shards, "durability": b.durability(),
    })
}

/// `n` per second over `window` (3 decimals; 0 for an empty window).
pub fn rate(n: u64, window: Duration) -> f64 {
    let s = window.as_secs_f64();
    if s > 0.0 {
        round3(n as f64 / s)
    } else {
        0.0
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Whole microseconds, as `stats::summarize` computes rates from.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// `1234567.8` -> `1,234,568`.
pub fn thousands(x: f64) -> String {
    let n = x.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// µs as `850 µs` or `12.3 ms`.
pub fn micros(us: u64) -> String {
    if us < 10_000 {
        format!("{us} µs")
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1234567.8), "1,234,568");
        assert_eq!(micros(850), "850 µs");
        assert_eq!(micros(12_345), "12.3 ms");
    }
}
