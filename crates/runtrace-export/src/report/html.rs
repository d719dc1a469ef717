//! The page: the analysis report, the backlog report and the chart data
//! rendered as one HTML document with inline CSS and hand-written SVG (no
//! script, nothing fetched: it opens offline and from a mail attachment).

use super::charts::{Charts, BUCKETS, HIST};
use runtrace_analyze::backlog::BacklogReport;
use runtrace_analyze::{Report, FIX_FIRST};
use runtrace_model::fmt_ns;
use runtrace_model::model::Model;
use std::fmt::Write;

/// Escapes text for HTML content and attribute values.
///
/// ```
/// assert_eq!(runtrace_export::report::html::esc("<a href=\"x\">"), "&lt;a href=&quot;x&quot;&gt;");
/// ```
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}\
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:1.6em}\
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
.finding{border-left:5px solid #e0a800;padding:.4em .8em;margin:.6em 0;background:#fffbea}\
.finding.critical{border-color:#d33;background:#fff0f0}.headline{margin:.2em 0}#fix-first li.critical{color:#a00}details summary{cursor:pointer;color:#555}.sev{font-weight:bold;text-transform:uppercase;font-size:.8em}\
.ok{color:#2a7}.err{color:#d33}.muted{color:#777}code{font-size:.95em}svg{display:block;margin:.4em 0}\
img.flame{display:block;width:100%;height:auto;margin:.4em 0}";

/// Renders the page (see the [module](super) for an example through
/// [`super::write`]).
pub fn render(
    r: &Report,
    b: &BacklogReport,
    c: &Charts,
    model: &Model,
    flames: &[Flame],
    notes: &[String],
) -> String {
    let mut h = String::with_capacity(64 << 10);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>runtrace report</title><style>{STYLE}</style></head><body>"
    );
    h.push_str("<h1>runtrace report</h1>");
    fix_first(&mut h, r);
    summary(&mut h, r, b);
    findings(&mut h, r);
    utilisation(&mut h, c, model, r);
    snapshots(&mut h, r);
    h.push_str("<h2 id=\"histograms\">Latency histograms</h2>");
    histogram(&mut h, "poll-hist", "Poll duration", &c.poll_hist);
    histogram(
        &mut h,
        "wake-hist",
        "Wake (or spawn) → poll delay",
        &c.wake_hist,
    );
    locations(&mut h, r);
    waiting(&mut h, r);
    flame_graphs(&mut h, flames, notes);
    live_bytes(&mut h, c);
    backlog(&mut h, b, c, model);
    h.push_str("</body></html>\n");
    h
}

/// A flame graph of the page: an SVG drawn by inferno
/// ([`crate::flamegraph::svg`]).
pub struct Flame {
    /// Its title (drawn inside the SVG; the image's `alt` text).
    pub title: &'static str,
    /// The SVG document.
    pub svg: Vec<u8>,
}

/// The CPU section: each flame graph as an image (a `data:` URL: the SVG's
/// own styles and script stay inside it, and the page stays one file) and
/// what symbolization could not do (`notes`), or how to record samples
/// when the trace has none.
fn flame_graphs(h: &mut String, flames: &[Flame], notes: &[String]) {
    use base64::Engine as _;
    h.push_str("<h2 id=\"flame\">CPU flame graphs</h2>");
    if flames.is_empty() {
        h.push_str(
            "<p class=\"muted\">No CPU samples in this trace: record with \
             <code>RUNTRACE_CPU_HZ=99</code> (or <code>Recorder::builder().cpu_profile(99)</code>) \
             to see here where the CPU time went.</p>",
        );
        return;
    }
    h.push_str(
        "<p class=\"muted\">Stacks root at the bottom, widths in samples (on-CPU) or time \
         (off-CPU). To search, zoom or select a spawn location, worker or time range: \
         <code>runtrace flamegraph DIR -o flame.svg</code>.</p>",
    );
    for f in flames {
        let _ = write!(
            h,
            "<img class=\"flame\" alt=\"flame graph: {}\" src=\"data:image/svg+xml;base64,{}\">",
            esc(f.title),
            base64::engine::general_purpose::STANDARD.encode(&f.svg)
        );
    }
    for n in notes {
        let _ = write!(h, "<p class=\"muted\">Note: {}</p>", esc(n));
    }
}

/// The sampled heap bytes live over time (a line), when the trace has a
/// memory profile with the live set ([`Charts::live`]); nothing otherwise.
fn live_bytes(h: &mut String, c: &Charts) {
    let Some(&(end, _)) = c.live.last() else {
        return;
    };
    let max = c.live.iter().map(|p| p.1).max().unwrap_or(0);
    let (w, ch) = (900.0, 120.0);
    let x = |t: i64| t.max(0) as f64 / end.max(1) as f64 * w;
    let y = |b: u64| ch - b as f64 / max.max(1) as f64 * ch;
    // From zero at the start, then each instant.
    let pts: Vec<String> = std::iter::once((0, 0))
        .chain(c.live.iter().copied())
        .map(|(t, b)| format!("{:.1},{:.1}", x(t), y(b)))
        .collect();
    let _ = write!(
        h,
        "<h2>Memory</h2><section id=\"memory\"><p>Sampled heap bytes live (the weights of the \
         sampled allocations not freed yet, runtrace's own threads left out): {} at the end, \
         at most {}. Which code holds them: <code>runtrace flamegraph DIR --live</code>; \
         per spawn location and span: <code>runtrace analyze</code>.</p>\
         <svg id=\"live-bytes\" class=\"chart\" width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\"><polyline fill=\"none\" stroke=\"#a3c\" \
         stroke-width=\"2\" points=\"{}\"/><text x=\"4\" y=\"12\">max {}</text>\
         <text x=\"4\" y=\"{}\" class=\"muted\">live bytes over {} ({} points)</text>",
        esc(&runtrace_analyze::memory::bytes(c.live.last().map_or(0, |p| p.1))),
        esc(&runtrace_analyze::memory::bytes(max)),
        ch + 20.0,
        ch + 20.0,
        pts.join(" "),
        esc(&runtrace_analyze::memory::bytes(max)),
        ch + 16.0,
        fmt_ns(end.max(0) as u64),
        c.live.len()
    );
    for &(t, b) in &c.live {
        let _ = write!(
            h,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"#a3c\"><title>{} live at {:.3} s</title></circle>",
            x(t),
            y(b),
            esc(&runtrace_analyze::memory::bytes(b)),
            t as f64 / 1e9
        );
    }
    h.push_str("</svg></section>");
}

fn summary(h: &mut String, r: &Report, b: &BacklogReport) {
    let _ = write!(
        h,
        "<section id=\"summary\"><table>\
         <tr><th>Files</th><td>{}</td></tr><tr><th>Events</th><td>{}</td></tr>\
         <tr><th>Duration</th><td>{}</td></tr><tr><th>Recordings</th><td>{}</td></tr>\
         <tr><th>Tasks</th><td>{}</td></tr>\
         <tr><th>Polls</th><td>{} (p50 {}, p99 {}, max {})</td></tr>\
         <tr><th>Wake → poll</th><td>p50 {}, p99 {}, max {}</td></tr>\
         <tr><th>Dropped events</th><td>{}</td></tr></table>",
        r.files.len(),
        r.events,
        fmt_ns(r.duration_ns),
        esc(&r
            .processes
            .iter()
            .map(|p| format!("{} (pid {})", p.name, p.pid))
            .collect::<Vec<_>>()
            .join(", ")),
        esc(&runtrace_analyze::runtime::tasks_text(
            r.tasks_spawned,
            r.tasks_terminated,
            r.tasks_terminated_unseen
        )),
        r.poll_ns.count,
        fmt_ns(r.poll_ns.p50),
        fmt_ns(r.poll_ns.p99),
        fmt_ns(r.poll_ns.max),
        fmt_ns(r.wake_to_poll_ns.p50),
        fmt_ns(r.wake_to_poll_ns.p99),
        fmt_ns(r.wake_to_poll_ns.max),
        r.dropped_events,
    );
    if r.is_damaged() || b.is_damaged() {
        h.push_str("<p class=\"err\" id=\"damage\">The input is damaged; this report covers what was readable:</p><ul>");
        for e in &r.errors {
            let _ = write!(h, "<li><code>{}</code></li>", esc(e));
        }
        h.push_str("</ul>");
    }
    for n in &r.notes {
        let _ = write!(h, "<p class=\"muted\">{}</p>", esc(n));
    }
    h.push_str("</section>");
}

/// What the person on call reads first: one headline per finding, in
/// blame order, each linking to its evidence below.
fn fix_first(h: &mut String, r: &Report) {
    if r.findings.is_empty() {
        return;
    }
    h.push_str("<section id=\"fix-first\"><h2>What to fix first</h2><ol>");
    for (i, f) in r.findings.iter().take(FIX_FIRST).enumerate() {
        let _ = write!(
            h,
            "<li class=\"{}\"><a href=\"#finding-{i}\">{}</a></li>",
            f.severity.as_str(),
            esc(&f.headline())
        );
    }
    h.push_str("</ol>");
    let more = r.findings.len().saturating_sub(FIX_FIRST);
    if more > 0 {
        let _ = write!(
            h,
            "<p class=\"muted\">And {more} more under <a href=\"#findings\">Findings</a>.</p>"
        );
    }
    h.push_str("</section>");
}

fn findings(h: &mut String, r: &Report) {
    let _ = write!(
        h,
        "<h2>Findings ({})</h2><section id=\"findings\">",
        r.findings.len()
    );
    if r.findings.is_empty() {
        h.push_str("<p class=\"ok\">No findings: nothing crossed a threshold.</p>");
    }
    for (i, f) in r.findings.iter().enumerate() {
        let sev = f.severity.as_str();
        // The headline, then the evidence folded (no script: <details>).
        let _ = write!(
            h,
            "<div class=\"finding {sev}\" id=\"finding-{i}\" data-kind=\"{}\">\
             <p class=\"headline\"><span class=\"sev\">{sev}</span> {}</p>\
             <details><summary>Evidence</summary><b>{}</b>",
            f.kind.as_str(),
            esc(&f.headline_text()),
            f.kind.as_str().replace('_', " ")
        );
        if let Some(w) = &f.worker {
            let _ = write!(h, " on {}", esc(&w.to_string()));
        }
        if let Some((a, b)) = f.window_ns {
            let _ = write!(
                h,
                " <span class=\"muted\">at {:.6} s – {:.6} s</span>",
                a as f64 / 1e9,
                b as f64 / 1e9
            );
        }
        let _ = write!(h, "<p>{}</p>", esc(&f.detail));
        // What `runtrace analyze` prints under a finding: the functions
        // its culprit ran, its victims, the symptoms it explains.
        if let Some(line) = f.functions_line() {
            let _ = write!(
                h,
                "<p class=\"functions\"><b>Functions:</b> {}</p>",
                esc(&line)
            );
        }
        if let Some(line) = f.victims_line() {
            let _ = write!(h, "<p class=\"victims\"><b>Victims:</b> {}</p>", esc(&line));
        }
        if !f.effects.is_empty() {
            h.push_str("<p><b>Symptoms it explains:</b></p><ul class=\"effects\">");
            for e in &f.effects {
                let _ = write!(
                    h,
                    "<li><b>{}</b>: {}</li>",
                    e.kind.as_str().replace('_', " "),
                    esc(&e.detail)
                );
            }
            h.push_str("</ul>");
        }
        if !f.spawn_locs.is_empty() {
            h.push_str("<p>Spawn locations: ");
            let locs: Vec<String> = f
                .spawn_locs
                .iter()
                .map(|l| format!("<code>{}</code>", esc(l)))
                .collect();
            h.push_str(&locs.join(", "));
            h.push_str("</p>");
        }
        h.push_str("</details></div>");
    }
    h.push_str("</section>");
}

/// A heat map: one row per polling thread, one cell per time bucket,
/// darker when busier.
/// Flight-recorder snapshot triggers are drawn over it as red lines.
fn utilisation(h: &mut String, c: &Charts, model: &Model, r: &Report) {
    h.push_str("<h2>Worker utilisation over time</h2>");
    if c.rows.is_empty() {
        h.push_str("<p class=\"muted\" id=\"utilisation\">No polls in this trace.</p>");
        return;
    }
    let (label_w, cell_w, row_h) = (220.0, 7.0, 18.0);
    let used = ((c.end_ns / c.width_ns.max(1)) as usize + 1).min(BUCKETS);
    let width = label_w + cell_w * used as f64 + 10.0;
    let height = row_h * c.rows.len() as f64 + 24.0;
    let _ = write!(
        h,
        "<svg id=\"utilisation\" class=\"chart\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">"
    );
    for (i, row) in c.rows.iter().enumerate() {
        let y = i as f64 * row_h;
        let th = &model.threads[row.thread as usize];
        let name = match &th.name {
            Some(n) => format!("{n} (tid {})", th.tid),
            None => format!("tid {}", th.tid),
        };
        let _ = write!(h, "<text x=\"0\" y=\"{}\">{}</text>", y + 13.0, esc(&name));
        for (b, &busy) in row.busy.iter().take(used).enumerate() {
            let frac = (busy as f64 / c.width_ns as f64).min(1.0);
            let x = label_w + b as f64 * cell_w;
            let _ = write!(
                h,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{cell_w}\" height=\"{}\" fill=\"rgb(30,90,200)\" \
                 fill-opacity=\"{:.2}\"><title>{:.0}% busy at {:.3} s</title></rect>",
                row_h - 2.0,
                0.05 + 0.95 * frac,
                frac * 100.0,
                (b as u64 * c.width_ns) as f64 / 1e9
            );
        }
    }
    // Snapshot triggers: a line at the cell of their instant (buckets
    // start at each recording's start, as `at_ns` does).
    for s in r.snapshots.iter().filter(|s| !s.request) {
        let b = ((s.at_ns.max(0) as u64 / c.width_ns.max(1)) as usize).min(used - 1);
        let x = label_w + b as f64 * cell_w + cell_w / 2.0;
        let _ = write!(
            h,
            "<line class=\"snapshot\" x1=\"{x}\" y1=\"0\" x2=\"{x}\" y2=\"{}\" stroke=\"#d33\" \
             stroke-width=\"2\"><title>snapshot trigger at {:.3} s: {}</title></line>",
            row_h * c.rows.len() as f64,
            s.at_ns as f64 / 1e9,
            esc(&s.reason)
        );
    }
    let _ = write!(
        h,
        "<text x=\"{label_w}\" y=\"{}\" class=\"muted\">each cell {} (darker = busier)</text></svg>",
        height - 6.0,
        fmt_ns(c.width_ns)
    );
}

/// The flight recorder's snapshot triggers and the application's
/// requests (only when the trace has some): when and why each came.
fn snapshots(h: &mut String, r: &Report) {
    if r.snapshots.is_empty() {
        return;
    }
    h.push_str(
        "<h2>Snapshot triggers</h2><table id=\"snapshots\"><tr><th class=\"n\">At (s)</th>\
         <th class=\"n\">pid</th><th>Kind</th><th>Reason</th></tr>",
    );
    for s in &r.snapshots {
        let kind = match (s.request, s.answered) {
            (false, _) => "trigger",
            (true, true) => "request (snapshot taken)",
            (true, false) => "request (no rule lists it: no snapshot)",
        };
        let _ = write!(
            h,
            "<tr><td class=\"n\">{:.6}</td><td class=\"n\">{}</td><td>{kind}</td><td>{}</td></tr>",
            s.at_ns as f64 / 1e9,
            s.pid,
            esc(&s.reason)
        );
    }
    h.push_str("</table>");
}

/// A bar chart of a log2 histogram (bucket i: [2^i, 2^(i+1)) ns).
fn histogram(h: &mut String, id: &str, title: &str, counts: &[u64; HIST]) {
    let lo = counts.iter().position(|&n| n > 0);
    let hi = counts.iter().rposition(|&n| n > 0);
    let _ = write!(h, "<h3>{}</h3>", esc(title));
    let (Some(lo), Some(hi)) = (lo, hi) else {
        let _ = write!(h, "<p class=\"muted\" id=\"{id}\">No values.</p>");
        return;
    };
    let max = *counts.iter().max().unwrap_or(&1) as f64;
    let (bar_w, ch) = (44.0, 120.0);
    let width = bar_w * (hi - lo + 1) as f64 + 10.0;
    let height = ch + 44.0;
    let _ = write!(
        h,
        "<svg id=\"{id}\" class=\"chart\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"10\">"
    );
    for (i, &n) in counts.iter().enumerate().take(hi + 1).skip(lo) {
        let x = (i - lo) as f64 * bar_w;
        let bh = if n == 0 {
            0.0
        } else {
            (n as f64 / max * (ch - 14.0)).max(1.0)
        };
        let _ = write!(
            h,
            "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{bh}\" fill=\"#4a7\"><title>{} – {}: {n}</title></rect>\
             <text x=\"{x}\" y=\"{}\">{}</text>",
            ch - bh,
            bar_w - 3.0,
            fmt_ns(1 << i),
            fmt_ns(1 << (i + 1)),
            ch + 14.0 + 12.0 * ((i - lo) % 2) as f64,
            esc(&fmt_ns(1 << i))
        );
        if n > 0 {
            let _ = write!(
                h,
                "<text x=\"{x}\" y=\"{}\" fill=\"#555\">{n}</text>",
                ch - bh - 2.0
            );
        }
    }
    h.push_str("</svg>");
}

fn locations(h: &mut String, r: &Report) {
    h.push_str(
        "<h2>Top spawn locations</h2><table id=\"locations\"><tr><th>Location</th>\
         <th class=\"n\">Tasks</th><th class=\"n\">Polls</th><th class=\"n\">Poll time</th>\
         <th class=\"n\">Poll p99</th><th class=\"n\">Wake→poll p99</th><th class=\"n\">Long polls</th></tr>",
    );
    for l in r.spawn_locations.iter().take(20) {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&l.location),
            l.tasks,
            l.polls,
            fmt_ns(l.poll_ns_total),
            fmt_ns(l.poll_ns.p99),
            fmt_ns(l.wake_to_poll_ns.p99),
            l.long_polls
        );
    }
    h.push_str("</table>");
}

/// The tokio resources waited on most (when the trace has resource
/// events): per site, its waits, p99, total waiting, the holder charged
/// with the most of it (or, for what nobody holds, the location whose
/// wakes ended the most), and the location that waited most.
fn waiting(h: &mut String, r: &Report) {
    let events = r.waiting["resources"]["events"].as_u64().unwrap_or(0);
    if events == 0 {
        return;
    }
    h.push_str("<h2>Waiting</h2><section id=\"waiting\">");
    if r.resource_waits.is_empty() {
        let _ = write!(
            h,
            "<p>{events} tokio resource events, and no task waited on a resource.</p></section>"
        );
        return;
    }
    let _ = write!(
        h,
        "<p>The tokio resources tasks waited on most ({} of {} sites; every wait: \
         <code>runtrace perfetto</code>, <code>runtrace export parquet</code>, MCP <code>get_resource_waits</code>).</p>\
         <table id=\"resource-waits\"><tr><th>Resource</th><th class=\"n\">Waits</th>\
         <th class=\"n\">Wait p99</th><th class=\"n\">Total waiting</th><th>Top holder</th><th>Waited most</th></tr>",
        r.resource_waits.len().min(10),
        r.resource_waits.len()
    );
    for s in r.resource_waits.iter().take(10) {
        let holder = match (s.holders.first(), s.released_by.first()) {
            (Some(x), _) if x.charged_wait_ns > 0 => format!(
                "<code>{}</code> ({} holds, p99 {}, {} across an await; overlapped {} of waiting)",
                esc(&x.spawn_loc),
                x.holds,
                fmt_ns(x.hold_p99_ns),
                x.holds_across_await,
                fmt_ns(x.charged_wait_ns)
            ),
            (_, Some(x)) => format!(
                "released by <code>{}</code> ({} waits ended)",
                esc(&x.spawn_loc),
                x.waits_ended
            ),
            _ => "unknown".to_string(),
        };
        let waiter = s.waiters.first().map_or(String::new(), |w| {
            format!(
                "<code>{}</code> ({} waits, {})",
                esc(&w.spawn_loc),
                w.waits,
                fmt_ns(w.wait_ns_total)
            )
        });
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td>{holder}</td><td>{waiter}</td></tr>",
            esc(&s.label()),
            s.waits,
            fmt_ns(s.wait_p99_ns),
            fmt_ns(s.wait_ns_total),
        );
    }
    h.push_str("</table></section>");
}

/// Per queue: its largest size per time bucket (a line) with trigger
/// marks, then
/// every trigger with its verdicts.
fn backlog(h: &mut String, b: &BacklogReport, c: &Charts, model: &Model) {
    if b.queues.is_empty() && b.triggers.is_empty() {
        return;
    }
    h.push_str("<h2>Backlog</h2><section id=\"backlog\">");
    for q in &b.queues {
        let _ =
            write!(
            h,
            "<h3>Queue <code>{}</code></h3><p>{} enqueued, {} dequeued, {} dropped, max size {}; \
             rates per {} window up to {:.0} enqueues/s and {:.0} dequeues/s; \
             fastest growth {:+.0}/s at {:.3} s</p>",
            esc(&q.name),
            q.enqueued,
            q.dequeued,
            q.dropped,
            q.max_size,
            fmt_ns(b.options.window_ns),
            q.windows.iter().map(|w| w.enqueue_per_sec).fold(0.0, f64::max),
            q.windows.iter().map(|w| w.dequeue_per_sec).fold(0.0, f64::max),
            q.peak_growth_per_sec,
            q.peak_growth_at_ns as f64 / 1e9
        );
        let Some((_, sizes)) = c.queues.iter().find(|(n, _)| model.name(*n) == q.name) else {
            continue;
        };
        let used = ((c.end_ns / c.width_ns.max(1)) as usize + 1).min(BUCKETS);
        let (w, ch, cell) = (900.0, 120.0, 900.0 / used as f64);
        let max = q.max_size.max(1) as f64;
        let pts: Vec<String> = sizes
            .iter()
            .take(used)
            .enumerate()
            .map(|(i, &v)| {
                format!(
                    "{:.1},{:.1}",
                    (i as f64 + 0.5) * cell,
                    ch - v as f64 / max * ch
                )
            })
            .collect();
        let _ = write!(
            h,
            "<svg class=\"chart backlog\" width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\" \
             xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\"><polyline fill=\"none\" stroke=\"#36c\" \
             stroke-width=\"2\" points=\"{}\"/><text x=\"4\" y=\"12\">max {}</text>\
             <text x=\"4\" y=\"{}\" class=\"muted\">largest size per {} (red: triggers)</text>",
            ch + 20.0,
            ch + 20.0,
            pts.join(" "),
            q.max_size,
            ch + 16.0,
            fmt_ns(c.width_ns)
        );
        for t in b.triggers.iter().filter(|t| *t.queue == *q.name) {
            let x = (t.timestamp_ns as f64 / c.width_ns as f64 * cell).clamp(0.0, w);
            let _ = write!(
                h,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"0\" y2=\"{ch}\" stroke=\"#d33\"><title>trigger: {}</title></line>",
                esc(&t.reason)
            );
        }
        h.push_str("</svg>");
    }
    if !b.triggers.is_empty() {
        h.push_str(
            "<table id=\"triggers\"><tr><th>At</th><th>Queue</th><th class=\"n\">Size</th>\
             <th>Reason</th><th>Enqueues/s, dequeues/s (before → in the window)</th><th>Verdict</th></tr>",
        );
        for t in &b.triggers {
            let verdict = t
                .verdicts
                .first()
                .map_or("no cause above the floor".to_string(), |v| {
                    format!(
                        "{} ({:.0}%): {}",
                        v.cause.as_str(),
                        v.score * 100.0,
                        v.evidence
                    )
                });
            let rate = |before: Option<f64>, during: f64| match before {
                Some(b) => format!("{b:.0} → {during:.0}"),
                None => format!("{during:.0}"),
            };
            let _ = write!(
                h,
                "<tr><td>{:.3} s</td><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td>\
                 <td>{}, {}</td><td>{}</td></tr>",
                t.timestamp_ns as f64 / 1e9,
                esc(&runtrace_model::shown_name(&t.queue)),
                t.queue_size,
                esc(&t.reason),
                rate(t.enqueue_rate_before, t.enqueue_rate_during),
                rate(t.dequeue_rate_before, t.dequeue_rate_during),
                esc(&verdict)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
}
