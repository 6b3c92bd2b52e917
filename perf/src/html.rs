//! `--html FILE`: one self-contained page (no scripts, no external assets; the charts are
//! inline SVG drawn here) with the run's configuration and summary, throughput per second,
//! latency percentiles (p50, p99, p99.9) per second and the whole run's latency
//! distribution (percentile on a log scale, as HdrHistogram plots it). Every axis names
//! its unit. The charts have the ids `throughput`, `latency-LABEL` (one per meter) and
//! `distribution`; every plotted point is a `<circle class="pt">` with its value in a
//! `<title>`.

use std::fmt::Write as _;

use crate::report::{self, Context};
use crate::stats::Summary;
use crate::timeline::Timeline;

/// What the page shows.
pub struct Page<'a> {
    pub ctx: &'a Context,
    /// The table's rows (label, summary).
    pub rows: &'a [(&'a str, &'a Summary)],
    /// The summary CPU per message is counted over.
    pub main: &'a Summary,
    pub notes: &'a [String],
    pub timelines: &'a [Timeline],
    /// Whole-run (percentile, µs) per meter label, as `Meter::distribution` gives it.
    pub distributions: &'a [(&'a str, Vec<(f64, u64)>)],
}

const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// The whole page.
pub fn page(p: &Page) -> String {
    let ctx = p.ctx;
    let mut out = String::new();
    let title = format!("ringmq-perf {} on topic {}", ctx.mode, ctx.topic);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<p>{}</p>\n",
        esc(&title),
        esc(&title),
        esc(&ctx.durability)
    );
    configuration(&mut out, ctx);
    summary(&mut out, p);
    out.push_str("<h2>Throughput per second</h2>\n");
    out.push_str(&throughput_chart(p.timelines));
    for t in p.timelines {
        let _ = writeln!(out, "<h2>{} latency per second</h2>", esc(&t.label));
        out.push_str(&latency_chart(t));
    }
    out.push_str("<h2>Latency distribution (whole run)</h2>\n");
    out.push_str(&distribution_chart(p.distributions));
    out.push_str("</body></html>\n");
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1000px}\
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;\
text-align:right}th:first-child,td:first-child{text-align:left}pre{background:#f4f4f4;\
padding:0.5em;white-space:pre-wrap}svg{display:block;margin:0.5em 0}";

fn configuration(out: &mut String, ctx: &Context) {
    out.push_str("<h2>Configuration</h2>\n<table><tr><th>broker</th><th>id</th><th>address</th><th>role</th><th>flush</th><th>shards</th></tr>\n");
    for b in &ctx.brokers {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&b.name),
            b.id,
            esc(&b.addr.to_string()),
            esc(&b.role),
            esc(&b.flush),
            b.shards
        );
    }
    out.push_str("</table>\n");
    let config = serde_json::to_string_pretty(&ctx.config).unwrap_or_default();
    let _ = writeln!(
        out,
        "<pre>{}{}</pre>",
        esc(&config),
        if ctx.embedded {
            "\n(embedded node)"
        } else {
            ""
        }
    );
}

fn summary(out: &mut String, p: &Page) {
    out.push_str("<h2>Summary</h2>\n<table><tr><th></th><th>messages</th><th>bytes</th><th>errors</th><th>elapsed (s)</th><th>msgs/s</th><th>MB/s</th></tr>\n");
    for (label, s) in p.rows {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.1}</td></tr>",
            esc(label),
            s.messages,
            s.bytes,
            s.errors,
            s.elapsed_s,
            report::thousands(s.msgs_per_s),
            s.mb_per_s
        );
    }
    out.push_str("</table>\n<table><tr><th>latency (µs)</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>samples</th></tr>\n");
    for (label, s) in p.rows {
        let l = s.latency_us;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(label),
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.p9999,
            l.max,
            l.samples
        );
    }
    out.push_str("</table>\n<pre>");
    for n in p.notes {
        let _ = writeln!(out, "{}", esc(n));
    }
    let _ = writeln!(
        out,
        "{}\n{}</pre>",
        esc(&report::cpu_line(&p.ctx.cpu, p.ctx.wall)),
        esc(&report::cpu_per_msg_line(&p.ctx.cpu, p.main.messages))
    );
}

/// One line per meter: msgs/s against seconds.
pub fn throughput_chart(timelines: &[Timeline]) -> String {
    let series: Vec<Series> = timelines
        .iter()
        .map(|t| Series {
            name: t.label.clone(),
            points: t.seconds.iter().map(|s| (s.t_s, s.msgs_per_s)).collect(),
            tips: t
                .seconds
                .iter()
                .map(|s| format!("{} at {:.0} s: {:.0} msgs/s", t.label, s.t_s, s.msgs_per_s))
                .collect(),
        })
        .collect();
    chart(
        "throughput",
        &linear_axis("time (s)", &series, |p| p.0),
        &linear_axis("throughput (msgs/s)", &series, |p| p.1),
        &series,
    )
}

/// p50, p99 and p99.9 of each second in µs (seconds without a latency are left out).
pub fn latency_chart(t: &Timeline) -> String {
    type Pick = fn(&crate::stats::Percentiles) -> u64;
    let picks: [(&str, Pick); 3] = [
        ("p50", |l| l.p50),
        ("p99", |l| l.p99),
        ("p99.9", |l| l.p999),
    ];
    let series: Vec<Series> = picks
        .iter()
        .map(|(name, f)| {
            let kept: Vec<_> = t
                .seconds
                .iter()
                .filter(|s| s.latency_us.samples > 0)
                .collect();
            Series {
                name: (*name).to_string(),
                points: kept
                    .iter()
                    .map(|s| (s.t_s, f(&s.latency_us) as f64))
                    .collect(),
                tips: kept
                    .iter()
                    .map(|s| format!("{name} at {:.0} s: {} µs", s.t_s, f(&s.latency_us)))
                    .collect(),
            }
        })
        .collect();
    chart(
        &format!("latency-{}", t.label),
        &linear_axis("time (s)", &series, |p| p.0),
        &linear_axis("latency (µs)", &series, |p| p.1),
        &series,
    )
}

/// Latency (µs) against percentile, x as log10(1 / (1 - percentile)).
pub fn distribution_chart(dists: &[(&str, Vec<(f64, u64)>)]) -> String {
    let series: Vec<Series> = dists
        .iter()
        .map(|(label, d)| Series {
            name: (*label).to_string(),
            points: d.iter().map(|&(pct, us)| (nines(pct), us as f64)).collect(),
            tips: d
                .iter()
                .map(|&(pct, us)| format!("{label} p{}: {us} µs", trim(pct)))
                .collect(),
        })
        .collect();
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        .ceil();
    let mut ticks = Vec::new();
    let mut k = 0.0;
    while k <= x_max {
        ticks.push((k, trim(100.0 * (1.0 - 10f64.powf(-k))) + "%"));
        k += 1.0;
    }
    let x = Axis {
        label: "percentile (log scale of 1 / (1 - p))".to_string(),
        min: 0.0,
        max: x_max,
        ticks,
    };
    chart(
        "distribution",
        &x,
        &linear_axis("latency (µs)", &series, |p| p.1),
        &series,
    )
}

struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    tips: Vec<String>,
}

struct Axis {
    label: String,
    min: f64,
    max: f64,
    ticks: Vec<(f64, String)>,
}

const W: f64 = 900.0;
const H: f64 = 320.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 15.0;
const BOTTOM: f64 = 50.0;
/// Beyond this many points a series is drawn as a line only (no markers).
const MARKERS_MAX: usize = 1200;

fn chart(id: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |v: f64| LEFT + (v - x.min) / (x.max - x.min).max(1e-9) * pw;
    let sy = |v: f64| TOP + ph - (v - y.min) / (y.max - y.min).max(1e-9) * ph;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-size=\"12\">",
        esc(id)
    );
    let _ = writeln!(
        o,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"></rect>"
    );
    for (v, label) in &x.ticks {
        let px = sx(*v);
        let _ = writeln!(
            o,
            "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#eee\"></line><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            TOP + ph,
            TOP + ph + 16.0,
            esc(label)
        );
    }
    for (v, label) in &y.ticks {
        let py = sy(*v);
        let _ = writeln!(
            o,
            "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"></line><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 6.0,
            py + 4.0,
            esc(label)
        );
    }
    let _ = writeln!(
        o,
        "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        LEFT + pw / 2.0,
        H - 10.0,
        esc(&x.label)
    );
    let _ = writeln!(
        o,
        "<text class=\"axis\" transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        TOP + ph / 2.0,
        esc(&y.label)
    );
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(a, b)| format!("{:.1},{:.1}", sx(a), sy(b)))
            .collect();
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"></polyline>",
            pts.join(" ")
        );
        if s.points.len() <= MARKERS_MAX {
            for (&(a, b), tip) in s.points.iter().zip(&s.tips) {
                let _ = writeln!(
                    o,
                    "<circle class=\"pt\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"><title>{}</title></circle>",
                    sx(a),
                    sy(b),
                    esc(tip)
                );
            }
        }
        let ly = TOP + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            o,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{color}\"></rect><text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            LEFT + pw + 10.0,
            ly - 6.0,
            LEFT + pw + 28.0,
            esc(&s.name)
        );
    }
    if series.iter().all(|s| s.points.is_empty()) {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no data</text>",
            LEFT + pw / 2.0,
            TOP + ph / 2.0
        );
    }
    o.push_str("</svg>\n");
    o
}

/// An axis from 0 to a round number above the largest value, 4 to 10 ticks.
fn linear_axis(label: &str, series: &[Series], pick: fn(&(f64, f64)) -> f64) -> Axis {
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(pick))
        .fold(0.0f64, f64::max);
    let step = nice_step(top.max(1.0) / 5.0);
    let max = ((top / step).ceil() * step).max(step);
    let n = (max / step).round() as u64;
    let ticks = (0..=n)
        .map(|i| {
            let v = i as f64 * step;
            (v, trim(v))
        })
        .collect();
    Axis {
        label: label.to_string(),
        min: 0.0,
        max,
        ticks,
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// Percentile (0-100) to its position on the log axis: log10(1 / (1 - p)).
fn nines(pct: f64) -> f64 {
    let tail = (1.0 - pct / 100.0).max(1e-9);
    -tail.log10()
}

/// A number without trailing zeros (at most 4 decimals).
fn trim(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A page of its own (for modes with their own report, like `failover`): `title`, then
/// `body` (HTML, already escaped), with this module's style.
pub fn plain_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = esc(title)
    )
}

/// A chart of one series of (x, y) points on linear axes from 0, each point with its
/// tooltip.
pub fn line_chart(
    id: &str,
    labels: (&str, &str),
    name: &str,
    points: Vec<(f64, f64, String)>,
) -> String {
    let series = [Series {
        name: name.to_string(),
        tips: points.iter().map(|p| p.2.clone()).collect(),
        points: points.into_iter().map(|p| (p.0, p.1)).collect(),
    }];
    chart(
        id,
        &linear_axis(labels.0, &series, |p| p.0),
        &linear_axis(labels.1, &series, |p| p.1),
        &series,
    )
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Percentiles;
    use crate::threads::CpuUse;
    use crate::timeline::Second;
    use std::time::Duration;

    /// Every element opened is closed in order (`meta` is void), and `<`/`>` only bound tags.
    fn assert_well_formed(html: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = html.strip_prefix("<!DOCTYPE html>").expect("doctype");
        while let Some(i) = rest.find('<') {
            assert!(!rest[..i].contains('>'), "stray > before {}", &rest[i..]);
            let end = rest[i..].find('>').expect("tag closed") + i;
            let tag = &rest[i + 1..end];
            assert!(!tag.contains('<'), "stray < in {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "closing {name}");
            } else {
                let name: String = tag
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                if name != "meta" {
                    stack.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(!rest.contains('>'));
        assert!(stack.is_empty(), "unclosed {stack:?}");
    }

    fn second(t_s: f64, msgs_per_s: f64, p50: u64, p99: u64, p999: u64) -> Second {
        Second {
            t_s,
            msgs_per_s,
            errors: 0,
            latency_us: Percentiles {
                p50,
                p99,
                p999,
                samples: 10,
                ..Percentiles::default()
            },
        }
    }

    #[test]
    fn page_is_well_formed_with_the_numbers_and_units() {
        let ctx = Context {
            mode: "produce",
            topic: "T<&>".into(),
            brokers: Vec::new(),
            durability: "acked after fdatasync".into(),
            config: serde_json::json!({"batch": 64, "note": "<b>"}),
            cpu: CpuUse::default(),
            wall: Duration::from_secs(3),
            embedded: false,
        };
        let s = Summary {
            messages: 123_457,
            bytes: 9_876_543,
            errors: 7,
            elapsed_s: 3.0,
            msgs_per_s: 41_152.3,
            mb_per_s: 3.3,
            latency_us: Percentiles {
                p50: 811,
                p90: 1_901,
                p99: 4_321,
                p999: 9_876,
                p9999: 12_345,
                max: 23_456,
                samples: 123_457,
            },
        };
        let timeline = Timeline {
            label: "send".into(),
            seconds: vec![
                second(1.0, 40_111.0, 777, 3_333, 8_888),
                second(2.0, 42_222.0, 799, 4_444, 9_999),
                Second {
                    t_s: 3.0,
                    ..Second::default()
                },
            ],
        };
        let dist = vec![(0.0, 5), (90.0, 1_500), (99.0, 4_300), (99.9, 9_800)];
        let html = page(&Page {
            ctx: &ctx,
            rows: &[("send", &s)],
            main: &s,
            notes: &["a note".to_string()],
            timelines: std::slice::from_ref(&timeline),
            distributions: &[("send", dist)],
        });
        assert_well_formed(&html);
        assert!(html.contains("T&lt;&amp;&gt;"));
        assert!(!html.contains("<b>"));
        for n in [
            "123457", "9876543", "41,152", "811", "4321", "9876", "12345", "23456",
        ] {
            assert!(html.contains(n), "{n} missing");
        }
        for n in [
            "40111 msgs/s",
            "42222 msgs/s",
            "p50 at 1 s: 777 µs",
            "p99 at 2 s: 4444 µs",
            "p99.9 at 2 s: 9999 µs",
            "p99.9: 9800 µs",
            "p90: 1500 µs",
        ] {
            assert!(html.contains(n), "{n} missing");
        }
        for unit in [
            "time (s)",
            "throughput (msgs/s)",
            "latency (µs)",
            "percentile (log scale",
        ] {
            assert!(html.contains(unit), "axis {unit} missing");
        }
        assert!(html.contains("99.9%"));
        assert!(!html.contains("<script"));
        assert!(!html.contains(" src=") && !html.contains(" href="));
        // The third second has no latency: the throughput chart has 3 points, each
        // latency series 2.
        let tp = chart_of(&html, "throughput");
        assert_eq!(tp.matches("class=\"pt\"").count(), 3);
        assert_eq!(
            chart_of(&html, "latency-send")
                .matches("class=\"pt\"")
                .count(),
            6
        );
        assert_eq!(
            chart_of(&html, "distribution")
                .matches("class=\"pt\"")
                .count(),
            4
        );
    }

    #[test]
    fn empty_run_still_draws_axes() {
        let html = throughput_chart(&[Timeline::new("send")]);
        assert!(html.contains("no data"));
        assert!(html.contains("throughput (msgs/s)"));
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(12_000.0), 20_000.0);
        assert_eq!(trim(99.9), "99.9");
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
    }

    fn chart_of<'a>(html: &'a str, id: &str) -> &'a str {
        let start = html.find(&format!("<svg id=\"{id}\"")).expect("chart");
        let end = html[start..].find("</svg>").expect("closed") + start;
        &html[start..end]
    }
}
