//! Drawing: a pure function from the state and the window's snapshot to
//! widgets (tested on ratatui's `TestBackend`).
//!
//! ```
//! use ratatui::{backend::TestBackend, Terminal};
//! use runtrace_top::ui::{draw::draw, state::App};
//! let mut t = Terminal::new(TestBackend::new(40, 10)).unwrap();
//! t.draw(|f| draw(f, &App::default(), None, "waiting for events")).unwrap();
//! let text: String = t.backend().buffer().content().iter().map(|c| c.symbol()).collect();
//! assert!(text.contains("too small"));
//! ```

use super::state::{App, Column, Editing, Table as Shown};
use crate::snapshot::{fmt_age, fmt_function, fmt_rate, serving, Mode, Snapshot};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use runtrace_analyze::fmt_ns;

/// The smallest screen drawn (columns, rows); smaller shows a message.
pub const MIN_SIZE: (u16, u16) = (60, 16);

/// Draws the screen: the snapshot when there is one, else `waiting`.
pub fn draw(f: &mut Frame<'_>, app: &App, snap: Option<&Snapshot>, waiting: &str) {
    let area = f.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!(
            "terminal too small ({}x{}): runtrace top needs at least {}x{}; enlarge it, or q to quit",
            area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let Some(s) = snap else {
        let [top, bottom] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
        f.render_widget(Paragraph::new(waiting).wrap(Wrap { trim: true }), top);
        f.render_widget(Paragraph::new("q quit"), bottom);
        return;
    };
    let notes = s.header.notes.len().min(3) as u16 + s.heap.is_some() as u16;
    let nfind = (s.findings.len().max(1) as u16 * 2 + 2).min(area.height / 3);
    let nwork = (s.workers.len().max(1) as u16 + 3).min(area.height / 4 + 2);
    let [head, find, work, rest, foot] = Layout::vertical([
        Constraint::Length(1 + notes),
        Constraint::Length(nfind),
        Constraint::Length(nwork),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, s, head);
    findings(f, s, find);
    workers(f, s, work);
    let (table, det) = if app.details {
        let [t, d] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(rest);
        (t, Some(d))
    } else {
        (rest, None)
    };
    match app.table {
        Shown::Locations => locations(f, app, s, table),
        Shown::Spans => spans(f, app, s, table),
    }
    match (det, app.table) {
        (Some(d), Shown::Locations) => details(f, app, s, d),
        (Some(d), Shown::Spans) => span_details(f, app, s, d),
        (None, _) => {}
    }
    footer(f, app, s, foot);
    if app.help {
        help(f, area);
    }
}

fn header(f: &mut Frame<'_>, s: &Snapshot, area: Rect) {
    let h = &s.header;
    let red = Style::default().fg(Color::White).bg(Color::Red);
    let mut lines = vec![Line::from(vec![
        Span::styled(
            match s.mode {
                Mode::Live => " LIVE ",
                Mode::Replay => " REPLAY ",
            },
            Style::default().add_modifier(Modifier::REVERSED),
        ),
        Span::raw(" "),
        Span::styled(
            s.header_line(),
            if h.dropped_recent > 0 {
                red
            } else {
                Style::default()
            },
        ),
    ])];
    if let Some(line) = s.heap_line() {
        lines.push(Line::styled(line, Style::default().fg(Color::Magenta)));
    }
    for n in h.notes.iter().take(3) {
        lines.push(Line::styled(
            format!("note: {n}"),
            Style::default().fg(Color::Yellow),
        ));
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn findings(f: &mut Frame<'_>, s: &Snapshot, area: Rect) {
    let mut lines = Vec::new();
    if s.findings.is_empty() {
        lines.push(Line::raw("no finding in this window"));
    }
    for x in &s.findings {
        let color = if x.severity == "critical" {
            Color::Red
        } else {
            Color::Yellow
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:8} ", x.severity), Style::default().fg(color)),
            Span::styled(
                format!("{:20} ", x.kind),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "{}{}  since {}",
                x.cause,
                serving(&x.spans),
                fmt_age(x.age_ns)
            )),
        ]));
        lines.push(Line::raw(format!("    {}", x.detail)));
    }
    let title = format!(" findings ({}) ", s.findings.len());
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn workers(f: &mut Frame<'_>, s: &Snapshot, area: Rect) {
    let head = Row::new([
        "worker",
        "busy",
        "polls/s",
        "parks",
        "sched wait",
        "localq",
        "polling now",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows = s.workers.iter().map(|w| {
        Row::new(vec![
            w.name.clone(),
            format!("{:.0}%", w.busy * 100.0),
            fmt_rate(w.polls_per_s),
            w.parks.to_string(),
            fmt_ns(w.sched_wait_ns),
            w.local_q.to_string(),
            w.polling
                .as_ref()
                .map_or_else(|| "-".into(), |(l, ns)| format!("{l} ({})", fmt_ns(*ns))),
        ])
    });
    let t = Table::new(
        rows,
        [
            Constraint::Length(30),
            Constraint::Length(5),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(6),
            Constraint::Min(10),
        ],
    )
    .header(head)
    .block(Block::bordered().title(format!(" workers ({}) ", s.workers.len())));
    f.render_widget(t, area);
}

fn locations(f: &mut Frame<'_>, app: &App, s: &Snapshot, area: Rect) {
    let rows = app.rows(s);
    let cells = rows.iter().map(|l| {
        [
            l.location.clone(),
            l.tasks.to_string(),
            fmt_rate(l.polls_per_s),
            format!("{:.1}%", l.time_share * 100.0),
            fmt_ns(l.mean_poll_ns),
            fmt_ns(l.max_poll_ns),
            fmt_ns(l.wake_p50_ns),
            fmt_ns(l.wake_p99_ns),
            l.long_polls.to_string(),
        ]
    });
    let title = format!(
        " spawn locations ({} of {}){} ",
        rows.len(),
        s.locations.len(),
        filter_note(app)
    );
    sorted(f, app, area, (Column::title, 6), cells, title);
}

/// ` filter "db"`, or nothing.
fn filter_note(app: &App) -> String {
    if app.filter.is_empty() {
        String::new()
    } else {
        format!(" filter \"{}\"", app.filter)
    }
}

/// A table sorted by [`Column`] keys: headings `titles` (and the last
/// column's width), rows `cells` (in the order shown), the selected row
/// reversed and kept in view.
fn sorted(
    f: &mut Frame<'_>,
    app: &App,
    area: Rect,
    (titles, last): (fn(Column) -> &'static str, u16),
    cells: impl Iterator<Item = [String; 9]>,
    title: String,
) {
    let head = Row::new(
        Column::ALL
            .iter()
            .enumerate()
            .map(|(i, c)| heading(app, i, *c, titles(*c))),
    )
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows: Vec<[String; 9]> = cells.collect();
    let sel = app.selected.min(rows.len().saturating_sub(1));
    // Keep the selected row in view.
    let visible = area.height.saturating_sub(3) as usize;
    let skip = sel.saturating_sub(visible.saturating_sub(1));
    let body = rows.into_iter().enumerate().skip(skip).map(|(i, c)| {
        let r = Row::new(c);
        if i == sel {
            r.style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            r
        }
    });
    let t = Table::new(
        body,
        [
            Constraint::Min(24),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(last),
        ],
    )
    .header(head)
    .block(Block::bordered().title(title));
    f.render_widget(t, area);
}

/// The sort column's heading mark.
fn heading(app: &App, i: usize, c: Column, title: &str) -> String {
    let mark = match (app.sort.0 == c, app.sort.1) {
        (true, true) => "▼",
        (true, false) => "▲",
        (false, _) => "",
    };
    format!("{}{title}{mark}", i + 1)
}

fn spans(f: &mut Frame<'_>, app: &App, s: &Snapshot, area: Rect) {
    let rows = app.span_rows(s);
    let cells = rows.iter().map(|x| {
        [
            x.label.clone(),
            x.open.to_string(),
            fmt_rate(x.closed_per_s),
            format!("{:.1}%", x.time_share * 100.0),
            fmt_ns(x.busy_p50_ns),
            fmt_ns(x.busy_p99_ns),
            fmt_ns(x.wall_p50_ns),
            fmt_ns(x.wall_p99_ns),
            fmt_ns(x.delay_total_ns),
        ]
    });
    let title = if s.spans.is_empty() {
        " spans: none in this window (the application records none, or none ran) ".to_string()
    } else {
        format!(
            " spans ({} of {}){} ",
            rows.len(),
            s.spans.len(),
            filter_note(app)
        )
    };
    sorted(f, app, area, (Column::span_title, 10), cells, title);
}

fn span_details(f: &mut Frame<'_>, app: &App, s: &Snapshot, area: Rect) {
    let rows = app.span_rows(s);
    let Some(x) = rows.get(app.selected.min(rows.len().saturating_sub(1))) else {
        f.render_widget(
            Paragraph::new("no span selected").block(Block::bordered().title(" details ")),
            area,
        );
        return;
    };
    let mut lines = Vec::new();
    for fd in &s.findings {
        if fd.spans.iter().any(|l| l.starts_with(&x.label)) {
            lines.push(Line::styled(
                format!(
                    "{} ({}) at {}: {}",
                    fd.kind, fd.severity, fd.cause, fd.detail
                ),
                Style::default().fg(Color::Red),
            ));
        }
    }
    lines.push(Line::styled(
        "served by (spawn locations, most poll time first):",
        Style::default().add_modifier(Modifier::BOLD),
    ));
    for l in &x.locations {
        lines.push(Line::raw(format!("  {l}")));
    }
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(format!(" {} ", x.label))),
        area,
    );
}

fn details(f: &mut Frame<'_>, app: &App, s: &Snapshot, area: Rect) {
    let rows = app.rows(s);
    let Some(l) = rows.get(app.selected.min(rows.len().saturating_sub(1))) else {
        f.render_widget(
            Paragraph::new("no location selected").block(Block::bordered().title(" details ")),
            area,
        );
        return;
    };
    let mut lines = Vec::new();
    for x in &s.findings {
        if x.cause == l.location {
            lines.push(Line::styled(
                format!("cause of {} ({}): {}", x.kind, x.severity, x.detail),
                Style::default().fg(Color::Red),
            ));
        } else if x.victims.contains(&l.location) {
            lines.push(Line::styled(
                format!("held up by {} ({}): {}", x.cause, x.kind, x.detail),
                Style::default().fg(Color::Yellow),
            ));
        }
    }
    if !l.spans.is_empty() {
        lines.push(Line::raw(format!("serving: {}", l.spans.join(", "))));
    }
    if !l.functions.is_empty() {
        let fs: Vec<String> = l.functions.iter().map(fmt_function).collect();
        lines.push(Line::styled(
            format!("functions: {}", fs.join(", ")),
            Style::default().fg(Color::Cyan),
        ));
    }
    lines.push(Line::styled(
        format!(
            "{:>10} {:>8} {:>12} {:>10} {:>10}",
            "task", "worker", "at", "poll", "delay"
        ),
        Style::default().add_modifier(Modifier::BOLD),
    ));
    for (task, worker, at, ns, delay) in &l.recent {
        lines.push(Line::raw(format!(
            "{:>10} {:>8} {:>11.3}s {:>10} {:>10}",
            task,
            if *worker == runtrace_format::NO_WORKER {
                "-".to_string()
            } else {
                worker.to_string()
            },
            at,
            fmt_ns(*ns),
            delay.map_or_else(|| "-".into(), fmt_ns)
        )));
    }
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(format!(" {} : recent polls ", l.location))),
        area,
    );
}

fn footer(f: &mut Frame<'_>, app: &App, s: &Snapshot, area: Rect) {
    let text = match (&app.editing, &app.message) {
        (Some(Editing::Filter(b)), _) => format!("filter {}: {b}_  (Enter apply, Esc cancel)", match app.table {
            Shown::Locations => "locations",
            Shown::Spans => "spans",
        }),
        (Some(Editing::Seek(b)), _) => format!("seek to (seconds or M:SS): {b}_  (Enter go, Esc cancel)"),
        (None, Some(m)) => m.clone(),
        (None, None) => match s.mode {
            Mode::Live => "q quit  1-9/s sort  r reverse  / filter  t spans  ↑↓ select  Enter details  ? help".into(),
            Mode::Replay => "q quit  space pause  ←→ step  g seek  n next finding  +- speed  1-9 sort  / filter  t spans  Enter details  ? help".into(),
        },
    };
    f.render_widget(
        Paragraph::new(text).style(Style::default().add_modifier(Modifier::REVERSED)),
        area,
    );
}

fn help(f: &mut Frame<'_>, area: Rect) {
    let w = area.width.min(64);
    let h = area.height.min(19);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let text = "\
q, Esc       quit (Esc closes a pane first)
space, p     pause / play (replay)
← →, h l     step back / forward 1 s (H L: 10 s)
g            seek to a time (seconds, or M:SS)
n            next window with a new finding
+ -          replay faster / slower (0.1x to 100x)
1-9          sort by that column (again: reverse)
s, r         next sort column, reverse
/            filter the table by text
t            spawn locations <-> the application's spans
↑ ↓, k j     select a row
Enter, d     details: recent polls, what held it, functions
?            this help";
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(text).block(Block::bordered().title(" keys ")),
        r,
    );
}
