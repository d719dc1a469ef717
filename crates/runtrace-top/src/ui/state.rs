//! The screen's state (sorting, filter, selection, what is being typed)
//! and what keys do to it: plain data, no terminal.
//!
//! ```
//! use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
//! use runtrace_top::ui::state::{Action, App, Column};
//! let mut app = App::default();
//! let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
//! assert_eq!(app.key(key('3')), Action::None);
//! assert_eq!(app.sort, (Column::PollsPerS, true));
//! assert_eq!(app.key(key('/')), Action::None);
//! for c in "db".chars() { app.key(key(c)); }
//! app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
//! assert_eq!(app.filter, "db");
//! assert_eq!(app.key(key(' ')), Action::TogglePause);
//! app.key(key('t'));
//! assert_eq!(app.table, runtrace_top::ui::state::Table::Spans);
//! ```

use crate::snapshot::{LocRow, Snapshot, SpanRow};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A column of the spawn-location table (sortable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `file:line:col`.
    Location,
    /// Tasks alive.
    Tasks,
    /// Polls per second.
    PollsPerS,
    /// Share of poll time.
    Time,
    /// Mean poll.
    Mean,
    /// Longest poll.
    Max,
    /// Wake -> poll p50.
    WakeP50,
    /// Wake -> poll p99.
    WakeP99,
    /// Long polls.
    Long,
}

impl Column {
    /// Every column, in screen order (keys 1 to 9).
    pub const ALL: [Column; 9] = [
        Column::Location,
        Column::Tasks,
        Column::PollsPerS,
        Column::Time,
        Column::Mean,
        Column::Max,
        Column::WakeP50,
        Column::WakeP99,
        Column::Long,
    ];

    /// Its heading.
    pub fn title(self) -> &'static str {
        match self {
            Column::Location => "location",
            Column::Tasks => "tasks",
            Column::PollsPerS => "polls/s",
            Column::Time => "time",
            Column::Mean => "mean poll",
            Column::Max => "max poll",
            Column::WakeP50 => "wake p50",
            Column::WakeP99 => "wake p99",
            Column::Long => "long",
        }
    }

    /// Its heading in the span table, whose columns the same keys sort.
    pub fn span_title(self) -> &'static str {
        match self {
            Column::Location => "span",
            Column::Tasks => "open",
            Column::PollsPerS => "closed/s",
            Column::Time => "time",
            Column::Mean => "busy p50",
            Column::Max => "busy p99",
            Column::WakeP50 => "wall p50",
            Column::WakeP99 => "wall p99",
            Column::Long => "delay",
        }
    }

    fn cmp_span(self, a: &SpanRow, b: &SpanRow) -> std::cmp::Ordering {
        let f = |x: f64, y: f64| x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
        match self {
            Column::Location => a.label.cmp(&b.label),
            Column::Tasks => a.open.cmp(&b.open),
            Column::PollsPerS => f(a.closed_per_s, b.closed_per_s),
            Column::Time => f(a.time_share, b.time_share),
            Column::Mean => a.busy_p50_ns.cmp(&b.busy_p50_ns),
            Column::Max => a.busy_p99_ns.cmp(&b.busy_p99_ns),
            Column::WakeP50 => a.wall_p50_ns.cmp(&b.wall_p50_ns),
            Column::WakeP99 => a.wall_p99_ns.cmp(&b.wall_p99_ns),
            Column::Long => a.delay_total_ns.cmp(&b.delay_total_ns),
        }
    }

    fn cmp(self, a: &LocRow, b: &LocRow) -> std::cmp::Ordering {
        let f = |x: f64, y: f64| x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
        match self {
            Column::Location => a.location.cmp(&b.location),
            Column::Tasks => a.tasks.cmp(&b.tasks),
            Column::PollsPerS => f(a.polls_per_s, b.polls_per_s),
            Column::Time => f(a.time_share, b.time_share),
            Column::Mean => a.mean_poll_ns.cmp(&b.mean_poll_ns),
            Column::Max => a.max_poll_ns.cmp(&b.max_poll_ns),
            Column::WakeP50 => a.wake_p50_ns.cmp(&b.wake_p50_ns),
            Column::WakeP99 => a.wake_p99_ns.cmp(&b.wake_p99_ns),
            Column::Long => a.long_polls.cmp(&b.long_polls),
        }
    }
}

/// The table the screen shows under the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Spawn locations.
    Locations,
    /// The application's spans, by label.
    Spans,
}

/// What is being typed on the bottom line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Editing {
    /// A filter for the locations (`/`).
    Filter(String),
    /// A time to seek to, in seconds (`g`).
    Seek(String),
}

/// What the caller must do after a key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Nothing beyond redrawing.
    None,
    /// Leave.
    Quit,
    /// Pause or play (replay).
    TogglePause,
    /// Step this many seconds (negative: back).
    Step(f64),
    /// Go to this time, seconds since the recording started.
    Seek(f64),
    /// Go to the next window with a new finding.
    NextFinding,
    /// Multiply the replay speed by this.
    Speed(f64),
}

/// The screen's state.
#[derive(Debug, Clone)]
pub struct App {
    /// The table shown (`t` switches).
    pub table: Table,
    /// Sort column, and descending.
    pub sort: (Column, bool),
    /// Locations shown contain this text.
    pub filter: String,
    /// Selected row of the (sorted, filtered) locations.
    pub selected: usize,
    /// The details pane is open.
    pub details: bool,
    /// The help pane is open.
    pub help: bool,
    /// What is being typed.
    pub editing: Option<Editing>,
    /// A message for the bottom line (a bad seek time).
    pub message: Option<String>,
}

impl Default for App {
    fn default() -> Self {
        App {
            table: Table::Locations,
            sort: (Column::Time, true),
            filter: String::new(),
            selected: 0,
            details: false,
            help: false,
            editing: None,
            message: None,
        }
    }
}

impl App {
    /// The locations of `s` as shown: filtered and sorted.
    pub fn rows<'a>(&self, s: &'a Snapshot) -> Vec<&'a LocRow> {
        self.shown(&s.locations, |l| &l.location, Column::cmp)
    }

    /// The spans of `s` as shown: filtered by label, sorted by the same
    /// keys as the locations.
    pub fn span_rows<'a>(&self, s: &'a Snapshot) -> Vec<&'a SpanRow> {
        self.shown(&s.spans, |x| &x.label, Column::cmp_span)
    }

    /// `rows` whose `text` contains the filter, sorted by the sort column.
    fn shown<'a, T>(
        &self,
        rows: &'a [T],
        text: fn(&T) -> &str,
        cmp: fn(Column, &T, &T) -> std::cmp::Ordering,
    ) -> Vec<&'a T> {
        let f = self.filter.to_lowercase();
        let mut v: Vec<&T> = rows
            .iter()
            .filter(|r| f.is_empty() || text(r).to_lowercase().contains(&f))
            .collect();
        let (col, desc) = self.sort;
        v.sort_by(|a, b| {
            let o = cmp(col, a, b);
            if desc {
                o.reverse()
            } else {
                o
            }
        });
        v
    }

    /// Takes a key; returns what the caller must do.
    pub fn key(&mut self, k: KeyEvent) -> Action {
        self.message = None;
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        if let Some(ed) = self.editing.as_mut() {
            let buf = match ed {
                Editing::Filter(b) | Editing::Seek(b) => b,
            };
            match k.code {
                KeyCode::Char(c) => buf.push(c),
                KeyCode::Backspace => {
                    buf.pop();
                }
                KeyCode::Esc => self.editing = None,
                KeyCode::Enter => {
                    let ed = self.editing.take();
                    match ed {
                        Some(Editing::Filter(b)) => {
                            self.filter = b;
                            self.selected = 0;
                        }
                        Some(Editing::Seek(b)) => match parse_time(&b) {
                            Some(t) => return Action::Seek(t),
                            None => {
                                self.message =
                                    Some(format!("not a time: {b:?} (seconds, or M:SS)"));
                            }
                        },
                        None => {}
                    }
                }
                _ => {}
            }
            return Action::None;
        }
        match k.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc => {
                if self.help || self.details {
                    self.help = false;
                    self.details = false;
                } else {
                    return Action::Quit;
                }
            }
            KeyCode::Char(' ') | KeyCode::Char('p') => return Action::TogglePause,
            KeyCode::Left | KeyCode::Char('h') => return Action::Step(-1.0),
            KeyCode::Right | KeyCode::Char('l') => return Action::Step(1.0),
            KeyCode::Char('H') => return Action::Step(-10.0),
            KeyCode::Char('L') => return Action::Step(10.0),
            KeyCode::Char('n') => return Action::NextFinding,
            KeyCode::Char('+') | KeyCode::Char('=') => return Action::Speed(2.0),
            KeyCode::Char('-') => return Action::Speed(0.5),
            KeyCode::Char('g') => self.editing = Some(Editing::Seek(String::new())),
            KeyCode::Char('/') => self.editing = Some(Editing::Filter(self.filter.clone())),
            KeyCode::Char('s') => {
                let i = Column::ALL
                    .iter()
                    .position(|c| *c == self.sort.0)
                    .unwrap_or(0);
                self.sort = (Column::ALL[(i + 1) % Column::ALL.len()], true);
            }
            KeyCode::Char('r') => self.sort.1 = !self.sort.1,
            KeyCode::Char('t') => {
                self.table = match self.table {
                    Table::Locations => Table::Spans,
                    Table::Spans => Table::Locations,
                };
                self.selected = 0;
            }
            KeyCode::Char(c @ '1'..='9') => {
                let col = Column::ALL[(c as u8 - b'1') as usize];
                self.sort = if self.sort.0 == col {
                    (col, !self.sort.1)
                } else {
                    (col, col != Column::Location)
                };
            }
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected += 1,
            KeyCode::Enter | KeyCode::Char('d') => self.details = !self.details,
            KeyCode::Char('?') => self.help = !self.help,
            _ => {}
        }
        Action::None
    }
}

/// `12.5` or `1:05` (minutes and seconds) as seconds.
///
/// ```
/// use runtrace_top::ui::state::parse_time;
/// assert_eq!(parse_time("1:05"), Some(65.0));
/// assert_eq!(parse_time(" 2.5s "), Some(2.5));
/// assert_eq!(parse_time("soon"), None);
/// ```
pub fn parse_time(s: &str) -> Option<f64> {
    let s = s.trim();
    let s = s.strip_suffix('s').unwrap_or(s).trim();
    let t = match s.split_once(':') {
        Some((m, sec)) => m.trim().parse::<f64>().ok()? * 60.0 + sec.trim().parse::<f64>().ok()?,
        None => s.parse().ok()?,
    };
    (t.is_finite() && t >= 0.0).then_some(t)
}

/// [`parse_time`] for a command line (`runtrace top --at`): the error says
/// what was expected.
///
/// ```
/// use runtrace_top::ui::state::parse_at;
/// assert_eq!(parse_at("1:05"), Ok(65.0));
/// assert!(parse_at("soon").is_err());
/// ```
pub fn parse_at(s: &str) -> Result<f64, String> {
    parse_time(s).ok_or_else(|| format!("{s:?}: expected seconds or M:SS"))
}
